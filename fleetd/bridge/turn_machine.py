"""The turn machine: one member's turn as a frozen value and a pure ``step``.

Theory of operation
-------------------
A turn is one prompt typed into one member and everything the bridge learns until it ends. Its
state is a :class:`TurnState` value; :func:`step` takes a state, an event (a *fact*: the prompt
was typed, a status was seen, a reply resolved the turn) and the time, and returns the next state
and the *effects* it requests (record the prompt as uncertain, type it, read the pane …). The
shell (:mod:`~fleetd.bridge.delivery`, :mod:`~fleetd.bridge.repair`, the roster's
:class:`~fleetd.bridge.roster.OpenTurns`) carries the effects out, in order, and feeds their
outcomes back as events. Nothing here does I/O, reads a clock or draws random numbers.

Every legal move is one row of :data:`TRANSITIONS`: (phase, event kind) → (next phase, cause).
A pair not in the table raises :class:`~fleetd.errors.IllegalTransitionError` and changes
nothing, as h11's connection state machine refuses what it does not know. Where a row's next
phase depends on a guard (a status seen while a resolver holds the turn, a turn restored after a
restart), the event kind already says so: :func:`event_kind` classifies the fact, the table
decides.

Phases::

    PENDING ─begin─▶ TYPING ─typed, uncertain─▶ SUBMITTED ─working─▶ WORKING ─idle─▶ AT_BOUNDARY
       │               │ └─refused, store refused─▶ UNTYPED             ▲                  │
       │               └─withdrawn─▶ WITHDRAWN                           └─────working──────┘
       └─restore─▶ RESTORED
    SUBMITTED, WORKING, AT_BOUNDARY, RESTORED ──resolved──▶ SETTLED
                                              ──closed────▶ ABANDONED

The write-ahead rule of the state store (issue 21 item 2) is the ``begin`` row: its effects are
:class:`RecordUncertain` *then* :class:`TypePrompt`, and the shell stops at the first effect
that fails, so a prompt is never typed before it is stored as uncertain. Only that row asks for
:class:`TypePrompt`, and only ``PENDING`` reaches it, so a turn is typed at most once.

The values the turn holds live here too: its :class:`TurnToken`, the :class:`DeliveryBaseline`
captured right after the prompt (M4 §8.2), the :class:`BoundaryWatch` of raw status
observations the lost-boundary stable gate reads, and the :class:`RepairLedger` of what
lost-boundary repair answered for its token (M4 §8.3–§8.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetd.errors import IllegalTransitionError
from fleetd.herdr.model import AgentStatus

__all__ = [
    "MAX_ATTEMPTS",
    "NOT_ATTEMPTS",
    "REPLY_GRACE",
    "RETRY_DELAY",
    "TRANSITIONS",
    "BaselineCapture",
    "BaselineRead",
    "BoundaryWatch",
    "CaptureBaseline",
    "DeliveryBaseline",
    "EventKind",
    "ForgetTurnRecord",
    "PromptRefused",
    "PromptTyped",
    "PromptUncertain",
    "ReadBoundary",
    "RecordUncertain",
    "RecordUntyped",
    "RepairAnswered",
    "RepairLedger",
    "ResubmitEnter",
    "StatusPolled",
    "StatusSighted",
    "StoreRefused",
    "TicketWithdrawn",
    "TurnClosed",
    "TurnEffect",
    "TurnEvent",
    "TurnPhase",
    "TurnResolved",
    "TurnRestored",
    "TurnState",
    "TurnToken",
    "TypePrompt",
    "TypingBegan",
    "event_kind",
    "record_repair",
    "step",
]

#: How long after a trusted boundary a member's own fleet_reply may still win over the fallback.
REPLY_GRACE: Final = timedelta(seconds=1)
RETRY_DELAY: Final = timedelta(seconds=60)
"""How long after a retryable repair answer the same token may be tried again (compiled)."""
MAX_ATTEMPTS: Final = 3
"""At most this many repair attempts per token, whatever the answers were."""
#: Repair answers that are not an attempt on an open turn: they leave the token's ledger as it was.
NOT_ATTEMPTS: Final = frozenset({"repair_stopped_for_token", "retry_not_due"})


# ---------------------------------------------------------------------------- values


class BaselineCapture(StrEnum):
    PRESENT = "present"
    READ_FAILED = "read_failed"
    UNRECOGNISED = "unrecognised"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnToken:
    """Identity of one accepted, delivered send."""

    token_id: str
    session_id: str
    ticket_id: str
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryBaseline:
    """What the pane showed right after the prompt was sent.

    ``clip_chars`` is the ``bridge.maxScrapeChars`` the text was clipped to, so a later read is
    compared over the same tail even if that key changed meanwhile.
    """

    token_id: str
    captured_at: datetime
    source: str
    text: str
    marker_recognised: bool
    capture: BaselineCapture
    clip_chars: int = 4000


#: herdr's statuses at the prompt (``AgentStatus.at_prompt``), looked up: every open turn, every
#: health tick.
_AT_PROMPT = frozenset(status for status in AgentStatus if status.at_prompt)


@dataclass(frozen=True, slots=True)
class BoundaryWatch:
    """Raw status observations of one open turn, as the lost-boundary stable gate reads them.

    A *stretch* is a run of at-prompt observations (``idle`` or ``done``) with one
    ``state_change_seq``; ``at_prompt`` counts its observations up to two. Anything else breaks
    the stretch and bumps ``epoch``: ``working``, ``blocked`` or ``unknown``, a missing or
    unreadable agent (``None``), or an at-prompt observation with another sequence number (the
    agent changed status in between, unseen). A repair that reads the pane starts from a stable
    stretch and compares ``epoch`` before and after, so an observation arriving meanwhile makes
    it lose the race. A break of a watch broken already changes nothing (the epoch moved at the
    first): a working member's sightings, every health tick, make no new value.
    """

    seq: int | None = None
    at_prompt: int = 0
    epoch: int = 0

    def observe(self, status: AgentStatus | None, seq: int | None) -> BoundaryWatch:
        """The watch after one observation (``status`` ``None``: the agent was missing or
        unreadable); ``self`` when the observation changes nothing."""
        if status in _AT_PROMPT and seq is not None:
            if self.at_prompt and seq == self.seq:
                if self.at_prompt >= 2:
                    return self
                return BoundaryWatch(seq, 2, self.epoch)
            # another sequence number between two sightings at the prompt: the status moved
            return BoundaryWatch(seq, 1, self.epoch + 1 if self.at_prompt else self.epoch)
        if self.seq is None and not self.at_prompt:
            return self  # broken already: the epoch moved when it broke
        return BoundaryWatch(None, 0, self.epoch + 1)

    @property
    def stable(self) -> bool:
        """Two at-prompt observations of one sequence number and nothing else since."""
        return self.at_prompt >= 2


@dataclass(frozen=True, slots=True)
class RepairLedger:
    """What lost-boundary repair answered for one token: attempts, refused scrapes, the last
    result (a :class:`~fleetd.bridge.repair_gates.RepairResult` value) with its detail code, and
    when one more attempt may be made (``None``: no more)."""

    attempts: int = 0
    refused_scrapes: int = 0
    last: str | None = None
    detail: str | None = None
    retry_at: datetime | None = None


def record_repair(
    ledger: RepairLedger,
    *,
    result: str,
    detail: str,
    retryable: bool,
    race_lost: bool,
    now: datetime,
) -> RepairLedger:
    """The token's ledger after one answer (an attempt that reached the gates of an open turn).

    A refused scrape (``retryable``) allows one delayed retry, the second stops repair for the
    token; a lost race allows another attempt after the same delay unless a scrape was refused
    already; never more than :data:`MAX_ATTEMPTS` (M4 §8.4)."""
    attempts = ledger.attempts + 1
    refused = ledger.refused_scrapes + (1 if retryable else 0)
    retry_at: datetime | None = None
    if (retryable and refused < 2 and attempts < MAX_ATTEMPTS) or (
        race_lost and refused == 0 and attempts < MAX_ATTEMPTS
    ):
        retry_at = now + RETRY_DELAY
    return RepairLedger(
        attempts=attempts, refused_scrapes=refused, last=result, detail=detail, retry_at=retry_at
    )


class TurnPhase(StrEnum):
    """Where a turn is. Terminal phases take no event."""

    #: hashed as the string it is (``Enum``'s own hash is a Python call; the table is looked up
    #: for every open turn at every status sighting)
    __hash__ = str.__hash__

    PENDING = "pending"  # the head of the queue, chosen for this turn; nothing stored or typed
    TYPING = "typing"  # stored as uncertain; the prompt is on its way to herdr
    SUBMITTED = "submitted"  # typed (or maybe typed): the turn is open, working not seen yet
    WORKING = "working"  # herdr showed the member working for this turn
    AT_BOUNDARY = "at_boundary"  # working, then at its prompt: a trusted boundary, reply awaited
    RESTORED = "restored"  # opened by an earlier run of fleetd: only the member's reply ends it
    SETTLED = "settled"  # its ticket was resolved (reply, fallback or repair)
    ABANDONED = "abandoned"  # closed without a resolution of its own (released, target lost …)
    UNTYPED = "untyped"  # nothing was typed: its ticket is queued again (or failed by its queue)
    WITHDRAWN = "withdrawn"  # the send was cancelled while its prompt was in flight

    @property
    def open(self) -> bool:
        """The turn is open: watched for its member, answered by its reply."""
        return self in _OPEN

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_OPEN = frozenset(
    {TurnPhase.SUBMITTED, TurnPhase.WORKING, TurnPhase.AT_BOUNDARY, TurnPhase.RESTORED}
)
_TERMINAL = frozenset(
    {TurnPhase.SETTLED, TurnPhase.ABANDONED, TurnPhase.UNTYPED, TurnPhase.WITHDRAWN}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnState:
    """One turn, as a value. Only :func:`step` makes a new one from an old one.

    ``delivered_at`` is when herdr answered the prompt (``None`` before); ``uncertain`` says that
    answer may have come after typing (the ticket's delivery is uncertain); ``saw_working`` that
    herdr showed the member working for it; ``resubmitted`` that Enter was pressed again (once,
    M4 §5.1); ``boundary_at`` when a trusted boundary was first seen (``None`` once working
    again); ``restored`` that an earlier run opened it (no baseline, no fallback: M4 §8).
    """

    phase: TurnPhase
    token: TurnToken
    delivered_at: datetime | None = None
    uncertain: bool = False
    baseline: DeliveryBaseline | None = None
    saw_working: bool = False
    resubmitted: bool = False
    boundary_at: datetime | None = None
    restored: bool = False
    watch: BoundaryWatch = field(default_factory=BoundaryWatch)
    repair: RepairLedger = field(default_factory=RepairLedger)

    @classmethod
    def pending(cls, token: TurnToken) -> TurnState:
        """A turn about to begin: nothing stored, nothing typed."""
        return cls(phase=TurnPhase.PENDING, token=token)

    @property
    def opened_at(self) -> datetime:
        """When the open turn was delivered (an open turn always has that time)."""
        assert self.delivered_at is not None, "only an open turn has a delivery time"
        return self.delivered_at


# ---------------------------------------------------------------------------- events


class EventKind(StrEnum):
    """What :data:`TRANSITIONS` is keyed on, besides the phase (see :func:`event_kind`)."""

    __hash__ = str.__hash__  # as TurnPhase's

    BEGIN = "begin"
    RESTORE = "restore"
    STORE_REFUSED = "store_refused"
    TYPED = "typed"
    UNCERTAIN = "uncertain"
    REFUSED = "refused"
    WITHDRAWN = "withdrawn"
    BASELINE = "baseline"
    POLLED_WORKING = "polled_working"
    POLLED_AT_PROMPT = "polled_at_prompt"
    POLLED_OTHER = "polled_other"
    SIGHTED = "sighted"
    REPAIR_ANSWERED = "repair_answered"
    RESOLVED = "resolved"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class TypingBegan:
    """The member is at its prompt and nothing holds it: this turn's prompt is to be typed."""


@dataclass(frozen=True, slots=True)
class TurnRestored:
    """The state store holds this turn open from an earlier run of fleetd."""

    delivered_at: datetime


@dataclass(frozen=True, slots=True)
class StoreRefused:
    """The state store could not record the prompt as uncertain: nothing may be typed."""


@dataclass(frozen=True, slots=True)
class PromptTyped:
    """herdr answered the prompt: typed."""


@dataclass(frozen=True, slots=True)
class PromptUncertain:
    """herdr's answer may have come after typing (an unknown code, an unreadable result, a broken
    link): the turn opens as delivered, never typed again."""

    code: str


@dataclass(frozen=True, slots=True)
class PromptRefused:
    """herdr typed nothing (refused before typing, not sent, or its target is gone)."""

    code: str


@dataclass(frozen=True, slots=True)
class TicketWithdrawn:
    """The turn's send was cancelled, or failed, while its prompt was in flight."""


@dataclass(frozen=True, slots=True)
class BaselineRead:
    """The pane right after the prompt, as the resolver's own scrape read it (M4 §8.2)."""

    baseline: DeliveryBaseline


@dataclass(frozen=True, slots=True)
class StatusPolled:
    """The delivery poller read the member's live status.

    ``held``: a resolver holds the member's reconciliation gate, so a turn at its prompt is left
    alone. ``submit_window``: how long after delivery a prompt not yet working gets Enter again
    (``bridge.submitRetry``, read by the shell when it polls).
    """

    status: AgentStatus
    seq: int | None
    held: bool = False
    submit_window: timedelta = timedelta(seconds=5)


@dataclass(frozen=True, slots=True)
class StatusSighted:
    """A raw status sighting that only the boundary watch records: the health monitor's fleet
    list, the repair's fresh look, an unreadable lookup (``status`` ``None``: missing or
    unreadable)."""

    status: AgentStatus | None
    seq: int | None


@dataclass(frozen=True, slots=True)
class RepairAnswered:
    """Lost-boundary repair answered for this turn's token (codes only, M4 §8.3)."""

    result: str
    detail: str
    retryable: bool = False
    race_lost: bool = False


@dataclass(frozen=True, slots=True)
class TurnResolved:
    """The turn's ticket was resolved through the completion guard (``source``: reply, fallback,
    raw fallback or repaired)."""

    source: str


@dataclass(frozen=True, slots=True)
class TurnClosed:
    """The turn ends without a resolution of its own (``cause``: released, target lost, its
    ticket ended elsewhere)."""

    cause: str


TurnEvent = (
    TypingBegan
    | TurnRestored
    | StoreRefused
    | PromptTyped
    | PromptUncertain
    | PromptRefused
    | TicketWithdrawn
    | BaselineRead
    | StatusPolled
    | StatusSighted
    | RepairAnswered
    | TurnResolved
    | TurnClosed
)

_KINDS: dict[type[object], EventKind] = {
    TypingBegan: EventKind.BEGIN,
    TurnRestored: EventKind.RESTORE,
    StoreRefused: EventKind.STORE_REFUSED,
    PromptTyped: EventKind.TYPED,
    PromptUncertain: EventKind.UNCERTAIN,
    PromptRefused: EventKind.REFUSED,
    TicketWithdrawn: EventKind.WITHDRAWN,
    BaselineRead: EventKind.BASELINE,
    StatusSighted: EventKind.SIGHTED,
    RepairAnswered: EventKind.REPAIR_ANSWERED,
    TurnResolved: EventKind.RESOLVED,
    TurnClosed: EventKind.CLOSED,
}


def event_kind(event: TurnEvent) -> EventKind:
    """The kind the table is keyed on. A polled status is ``working``, ``at prompt`` (and nothing
    holds the turn) or ``other`` (blocked, unknown, or at its prompt while a resolver holds it:
    nothing is judged)."""
    if isinstance(event, StatusPolled):
        if event.status is AgentStatus.WORKING:
            return EventKind.POLLED_WORKING
        if event.status in _AT_PROMPT and not event.held:
            return EventKind.POLLED_AT_PROMPT
        return EventKind.POLLED_OTHER
    return _KINDS[type(event)]


# ---------------------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class RecordUncertain:
    """Store the ticket as ``uncertain`` with this turn, before anything is typed (write-ahead).
    When it cannot be stored the shell feeds back :class:`StoreRefused` and runs nothing more."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class TypePrompt:
    """Type the turn's prompt into the member (``agent.prompt``); feed back its answer."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class RecordUntyped:
    """Store the ticket as queued again, with its prompt: nothing was typed, no turn opened."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class ForgetTurnRecord:
    """Drop the turn's record from the state store (no turn opens, or it ended)."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class CaptureBaseline:
    """Read the pane right after the prompt; feed back :class:`BaselineRead` (M4 §8.2)."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class ResubmitEnter:
    """Press Enter once more: the prompt did not start working within the submit window."""

    token: TurnToken


@dataclass(frozen=True, slots=True)
class ReadBoundary:
    """The completion fallback: read the pane at the trusted boundary and resolve the ticket
    from it, marked as a fallback."""

    token: TurnToken


TurnEffect = (
    RecordUncertain
    | TypePrompt
    | RecordUntyped
    | ForgetTurnRecord
    | CaptureBaseline
    | ResubmitEnter
    | ReadBoundary
)


# ---------------------------------------------------------------------------- the table

P, K = TurnPhase, EventKind
_WATCHED = (P.SUBMITTED, P.WORKING, P.AT_BOUNDARY, P.RESTORED)

#: (phase, event kind) -> (next phase, cause). The only legal moves.
TRANSITIONS: dict[tuple[TurnPhase, EventKind], tuple[TurnPhase, str]] = {
    (P.PENDING, K.BEGIN): (P.TYPING, "stored as uncertain, then typed (issue 21 item 2)"),
    (P.PENDING, K.RESTORE): (P.RESTORED, "the state store holds it open from an earlier run"),
    (P.TYPING, K.STORE_REFUSED): (P.UNTYPED, "not stored as uncertain, so never typed"),
    (P.TYPING, K.TYPED): (P.SUBMITTED, "herdr typed the prompt: the turn opens"),
    (P.TYPING, K.UNCERTAIN): (P.SUBMITTED, "may have been typed: opens, never typed again"),
    (P.TYPING, K.REFUSED): (P.UNTYPED, "herdr typed nothing: the ticket waits in its queue"),
    (P.TYPING, K.WITHDRAWN): (P.WITHDRAWN, "cancelled while the prompt was in flight"),
    (P.SUBMITTED, K.BASELINE): (P.SUBMITTED, "the delivery baseline (M4 §8.2)"),
    (P.WORKING, K.BASELINE): (P.WORKING, "the delivery baseline, read late (M4 §8.2)"),
    (P.AT_BOUNDARY, K.BASELINE): (P.AT_BOUNDARY, "the delivery baseline, read late (M4 §8.2)"),
    (P.SUBMITTED, K.POLLED_WORKING): (P.WORKING, "working seen for this turn"),
    (P.WORKING, K.POLLED_WORKING): (P.WORKING, "still working"),
    (P.AT_BOUNDARY, K.POLLED_WORKING): (P.WORKING, "working again: not a boundary yet"),
    (P.RESTORED, K.POLLED_WORKING): (P.RESTORED, "working seen; only its reply ends it (M4 §8)"),
    (P.SUBMITTED, K.POLLED_AT_PROMPT): (
        P.SUBMITTED,
        "not working yet: Enter again once past the submit window (M4 §5.1)",
    ),
    (P.WORKING, K.POLLED_AT_PROMPT): (P.AT_BOUNDARY, "working then idle/done: trusted boundary"),
    (P.AT_BOUNDARY, K.POLLED_AT_PROMPT): (
        P.AT_BOUNDARY,
        "no reply within the grace: the completion fallback reads the pane",
    ),
    (P.RESTORED, K.POLLED_AT_PROMPT): (P.RESTORED, "a restart spans it: no fallback (M4 §8)"),
    **{
        (phase, K.POLLED_OTHER): (phase, "blocked, unknown or held: nothing judged")
        for phase in _WATCHED
    },
    **{
        (phase, K.SIGHTED): (phase, "recorded on the boundary watch (M4 §8.3)")
        for phase in _WATCHED
    },
    **{
        (phase, K.REPAIR_ANSWERED): (phase, "the token's repair ledger (M4 §8.4)")
        for phase in _WATCHED
    },
    **{(phase, K.RESOLVED): (P.SETTLED, "its ticket resolved, once") for phase in _WATCHED},
    **{
        (phase, K.CLOSED): (P.ABANDONED, "closed without a result of its own") for phase in _WATCHED
    },
}


def step(
    state: TurnState, event: TurnEvent, now: datetime
) -> tuple[TurnState, tuple[TurnEffect, ...]]:
    """The turn after ``event`` at ``now`` and the effects it requests, or
    :class:`~fleetd.errors.IllegalTransitionError` (``state`` is never changed: it is frozen).

    Returns ``state`` itself when nothing changed (a sighting that moves no watch count)."""
    kind = event_kind(event)
    row = TRANSITIONS.get((state.phase, kind))
    if row is None:
        raise IllegalTransitionError("turn", state.phase.value, kind.value)
    phase = row[0]
    if type(event) is StatusSighted:  # the hot path: every open turn, every health tick
        watch = state.watch.observe(event.status, event.seq)
        return (state if watch is state.watch else _with(state, watch=watch)), ()
    if isinstance(event, StatusPolled):
        watch = state.watch.observe(event.status, event.seq)
        return _polled(state, event, now, kind=kind, phase=phase, watch=watch)
    token = state.token
    if kind is K.BEGIN:
        return _with(state, phase=phase), (RecordUncertain(token), TypePrompt(token))
    if kind is K.RESTORE:
        assert isinstance(event, TurnRestored)
        opened = _with(
            state, phase=phase, delivered_at=event.delivered_at, resubmitted=True, restored=True
        )
        return opened, ()
    if kind is K.STORE_REFUSED:
        return _with(state, phase=phase), ()
    if kind is K.TYPED or kind is K.UNCERTAIN:
        opened = _with(state, phase=phase, delivered_at=now, uncertain=kind is K.UNCERTAIN)
        return opened, (CaptureBaseline(token),)
    if kind is K.REFUSED:
        return _with(state, phase=phase), (RecordUntyped(token),)
    if kind is K.WITHDRAWN:
        return _with(state, phase=phase), (ForgetTurnRecord(token),)
    if isinstance(event, BaselineRead):
        return _with(state, baseline=event.baseline), ()
    if isinstance(event, RepairAnswered):
        if event.detail in NOT_ATTEMPTS:
            return state, ()
        ledger = record_repair(
            state.repair,
            result=event.result,
            detail=event.detail,
            retryable=event.retryable,
            race_lost=event.race_lost,
            now=now,
        )
        return _with(state, repair=ledger), ()
    # K.RESOLVED, K.CLOSED: the turn ends, and its record with it
    return _with(state, phase=phase), (ForgetTurnRecord(token),)


def _polled(
    state: TurnState,
    event: StatusPolled,
    now: datetime,
    *,
    kind: EventKind,
    phase: TurnPhase,
    watch: BoundaryWatch,
) -> tuple[TurnState, tuple[TurnEffect, ...]]:
    """A status the poller read: the table's row, with the timing guards of its phase."""
    if kind is K.POLLED_WORKING:
        if phase is state.phase and state.saw_working and state.boundary_at is None:
            return (state if watch is state.watch else _with(state, watch=watch)), ()
        return _with(state, phase=phase, watch=watch, saw_working=True, boundary_at=None), ()
    if kind is K.POLLED_OTHER or phase is P.RESTORED:
        return (state if watch is state.watch else _with(state, watch=watch)), ()
    if phase is P.AT_BOUNDARY:
        boundary_at = state.boundary_at if state.boundary_at is not None else now
        if phase is state.phase and watch is state.watch and boundary_at is state.boundary_at:
            moved = state  # the same poll again: nothing moved, so no new value
        else:
            moved = _with(state, phase=phase, watch=watch, boundary_at=boundary_at)
        if now - boundary_at >= REPLY_GRACE:
            return moved, (ReadBoundary(state.token),)
        return moved, ()
    # SUBMITTED, at its prompt: Enter once more past the submit window (the paste/submit race)
    if not state.resubmitted and now - state.opened_at >= event.submit_window:
        return _with(state, watch=watch, resubmitted=True), (ResubmitEnter(state.token),)
    return (state if watch is state.watch else _with(state, watch=watch)), ()


_SLOTS: Final = tuple(TurnState.__dataclass_fields__)
_new, _set = object.__new__, object.__setattr__


def _with(state: TurnState, **changes: object) -> TurnState:
    """A new value: ``state`` with ``changes``. Every field is copied as it is (the values were
    checked when they were made), without ``dataclasses.replace``'s pass through ``__init__``:
    this runs for an open turn at every status that moves it."""
    new: TurnState = _new(TurnState)
    for name in _SLOTS:
        _set(new, name, changes[name] if name in changes else getattr(state, name))
    return new
