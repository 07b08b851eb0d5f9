"""What one fleet tick sees: the contract between the runtime monitor and ``decide``.

The runtime builds a :class:`FleetSnapshot` once per tick from one ``agent.list`` (the herdr
view), the bridge's in-memory roster, turns, tasks and inboxes (the bridge view), and the pane
reads that the previous tick asked for. Everything here is a plain value — primitives,
``StrEnum`` members, tuples and frozen dataclasses (``@fact`` for the per-member ones) — so the
bridge and herdr packages can change their own types without touching health, and health never
imports them.

Identity: a member is its ``session_id`` (stable for one session; names can be reused); its herdr
``name`` is the target for per-target calls and the key of :attr:`LiveView.targeted_errors`
and :attr:`ProbeResult.target`. Inbox keys are leads' names (never herdr agent names). A live
agent is matched to a member or a lead by ``terminal_id`` when the bridge knows it (the same
agent incarnation), else by name.

Only codes, names, counts, times and digests cross this boundary: never pane text, prompts,
replies or exception messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from operator import attrgetter
from types import MappingProxyType

from fleetd.health.fact import fact
from fleetd.health.settings import HealthSettings
from fleetd.health.states import FAULT_LEAD_STATES, PEER_STATES, LeadState

__all__ = [
    "AT_PROMPT",
    "BoundaryScreen",
    "FleetSnapshot",
    "InboxFailureView",
    "InboxKind",
    "InboxView",
    "LeadView",
    "LiveAgent",
    "LiveStatus",
    "LiveView",
    "LossCause",
    "MemberView",
    "OpenTurn",
    "ProbeResult",
    "ProbeSource",
    "ProfileCapacityInput",
    "RemoteLead",
    "RepairView",
    "SessionState",
    "TargetLoss",
    "WorktreeFacts",
    "is_target_loss",
]


class LiveStatus(StrEnum):
    """herdr's raw ``agent_status``. ``idle`` and ``done`` both mean "at its prompt"."""

    IDLE = "idle"
    WORKING = "working"
    BLOCKED = "blocked"
    DONE = "done"
    UNKNOWN = "unknown"


AT_PROMPT = frozenset({LiveStatus.IDLE, LiveStatus.DONE})
"""Raw statuses that mean "at its prompt", ready for input."""


class SessionState(StrEnum):
    """The bridge's session FSM value for a member."""

    SPAWNING = "spawning"
    READY = "ready"
    BUSY = "busy"
    DONE = "done"
    FAILED = "failed"
    RELEASED = "released"


class ProbeSource(StrEnum):
    """herdr ``pane.read`` sources health may ask for (snake_case on the wire)."""

    VISIBLE = "visible"
    DETECTION = "detection"
    RECENT_UNWRAPPED = "recent_unwrapped"


class InboxKind(StrEnum):
    """Typed inbox record kinds (M4 §7.1)."""

    REPLY = "reply"
    HEALTH = "health"


class LossCause(StrEnum):
    """Why the bridge itself released a member it had lost (the health state it stands for)."""

    GONE = "gone"
    NEVER_READY = "never_ready"


def is_target_loss(code: str | None) -> bool:
    """True for any herdr ``*_not_found`` code: the target is gone (PROTOCOL §9)."""
    return code is not None and code.endswith("_not_found")


def _frozen_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _non_negative(owner: object, *names: str) -> None:
    for name in names:
        if getattr(owner, name) < 0:
            raise ValueError(f"{type(owner).__name__}.{name} must not be negative")


@fact
class LiveAgent:
    """One entry of a successful ``agent.list``."""

    name: str | None
    pane_id: str
    terminal_id: str
    status: LiveStatus
    state_change_seq: int = 0
    kind: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveView:
    """The herdr side of one tick.

    ``ping_ok`` is measured only when the list failed or an expected lead was absent; ``None``
    means "not measured". ``targeted_errors`` maps a target name to the error code of a
    per-target call made this tick (for example ``agent.get`` for an absent member).
    """

    list_ok: bool
    agents: tuple[LiveAgent, ...] = ()
    ping_ok: bool | None = None
    targeted_errors: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.list_ok and self.agents:
            raise ValueError("a failed agent.list has no agents")
        object.__setattr__(self, "targeted_errors", _frozen_map(self.targeted_errors))


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairView:
    """What lost-boundary repair last answered for an open turn's token (M4 §8.3-§8.4).

    ``result`` is the bridge's typed result value (``refused_unchanged``, ...), ``detail`` the
    stable code of the check that answered, ``attempts`` how many answers the token has had, and
    ``retry_at`` when one more request may be made (``None``: repair will not try it again).
    """

    result: str
    detail: str
    attempts: int
    retry_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RepairView.attempts must be at least 1")


@fact
class OpenTurn:
    """An accepted send that has not resolved: its TurnToken and where it stands."""

    token: str
    number: int
    accepted_at: datetime
    delivered_at: datetime | None = None
    waiter_open: bool = True
    repair: RepairView | None = None


@fact
class WorktreeFacts:
    """Work-product facts measured on a terminal session edge, not every tick (§9)."""

    commits_ahead: int | None
    preserved: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetLoss:
    """A loss the bridge handled itself before any tick saw it (M4 §6: failure paths publish).

    The poller fails a target's work and releases it within one 250 ms pass, so the monitor would
    only ever see RELEASED. The bridge records this fact on the session instead: ``code`` is a
    stable code (a herdr ``*_not_found`` code, ``readiness_grace_expired``, ``launch_failed``),
    ``tickets_failed`` how many tickets that release failed, ``failed_tickets`` the first few ids.
    """

    cause: LossCause
    code: str
    at: datetime
    tickets_failed: int = 0
    failed_tickets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _non_negative(self, "tickets_failed")


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundaryScreen:
    """A tested fatal signature the completion fallback's boundary read found (ERROR_ON_SCREEN).

    herdr shows an errored Claude Code or Codex turn as ``idle``, so the turn resolves at its
    boundary; the bridge keeps the signature id and the ticket for the member's current turn only.
    """

    signature_id: str
    ticket: str


@fact
class MemberView:
    """The bridge side of one member.

    ``state_since`` is when the session FSM last changed state; ``owner_lead`` is the exact lead
    that owns the accepted delegation (no singular-primary fallback); ``pending_tasks`` counts
    non-terminal tasks including async tickets; ``mute_events`` counts turns resolved through
    completion fallback since the previous tick; ``loss`` is a target loss the bridge released
    the member for; ``boundary_screen`` a fatal screen read at the current turn's boundary;
    ``uncollected_replies`` counts this member's
    replies still waiting in its owning lead's inbox (inboxes are per lead; the runtime reads
    them per member), the oldest created at ``oldest_uncollected_at``. ``teardown_violations``
    names the parts of the post-teardown invariant (M4 §8.5) the bridge found broken for a
    released member, as stable codes in §8.5 order (pending tasks are ``pending_tasks``);
    ``repaired_token`` is the token of the last turn lost-boundary repair resolved.
    """

    # what a steady tick reads of every member comes first, within one cache line
    session_id: str
    name: str
    terminal_id: str | None = None
    owner_lead: str | None = None
    mute_events: int = 0
    profile: str
    session_state: SessionState
    state_since: datetime
    spawned_at: datetime
    pane_id: str | None = None
    kind: str | None = None
    role: str | None = None
    presence: bool = False
    turn: OpenTurn | None = None
    queued_sends: int = 0
    pending_tasks: int = 0
    last_reply_at: datetime | None = None
    worktree: WorktreeFacts | None = None
    loss: TargetLoss | None = None
    boundary_screen: BoundaryScreen | None = None
    uncollected_replies: int = 0
    oldest_uncollected_at: datetime | None = None
    teardown_violations: tuple[str, ...] = ()
    repaired_token: str | None = None

    def __post_init__(self) -> None:
        # one comparison on the way in: ten thousand members are built every tick
        if (
            min(self.queued_sends, self.pending_tasks, self.mute_events, self.uncollected_replies)
            < 0
        ):
            _non_negative(
                self, "queued_sends", "pending_tasks", "mute_events", "uncollected_replies"
            )


@fact  # one per lead a tick: built as a plain slotted dataclass (fact.py)
class LeadView:
    """One expected lead: identity from the CallerResolver supplier, plus push/nudge outcomes.

    Identity is not liveness; liveness comes only from the live view. ``actionable_waiting``
    counts typed records waiting for this lead to collect, the oldest created at
    ``oldest_actionable_at``. The push and heartbeat loops publish what they saw and did before
    deciding not to inject (§4.4, Unit 4 criterion 4): ``push_status`` is the raw status they
    last read, ``last_push_error`` the code of their last failed herdr call, ``nudges_sent`` the
    nudges for the current head of the inbox (``nudge_cap_reached_at`` once capped), and
    ``last_nudge_at``/``last_heartbeat_at`` when they last injected one.
    """

    name: str
    agent_name: str
    terminal_id: str | None = None
    configured: bool = True
    discovered: bool = False
    actionable_waiting: int = 0
    oldest_actionable_at: datetime | None = None
    nudges_sent: int = 0
    nudge_cap_reached_at: datetime | None = None
    push_status: LiveStatus | None = None
    last_push_error: str | None = None
    last_nudge_at: datetime | None = None
    last_heartbeat_at: datetime | None = None

    def __post_init__(self) -> None:
        _non_negative(self, "actionable_waiting", "nudges_sent")


@fact  # one per lead a tick
class InboxView:
    """One lead's inbox key (or an orphan key no lead in view owns).

    ``depth`` counts what the lead can collect: entries held for a decode failure are not its
    backlog and are not counted. A member's own waiting replies are on its :class:`MemberView`.
    """

    key: str
    depth: int
    oldest_created_at: datetime | None = None
    kinds: tuple[InboxKind, ...] = ()
    push_cap_reached: bool = False

    def __post_init__(self) -> None:
        _non_negative(self, "depth")


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxFailureView:
    """One inbox entry that could not be decoded, as the inbox adapter reports it (redacted).

    ``reason`` is the decoder's bounded reason code (``unsupported_version``, ``malformed_json``,
    ...); ``unsettled`` is true while the entry still sits on the key's queue (held for a newer
    build, or waiting for its quarantine copy). ``message_id`` is already made safe to show.
    """

    key: str
    reason: str
    message_id: str
    unsettled: bool
    occurrences: int
    last_seen_at: datetime

    def __post_init__(self) -> None:
        if self.occurrences < 1:
            raise ValueError("InboxFailureView.occurrences must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    """The outcome of one pane read the previous tick requested.

    Only a normalised ``digest`` and a tested ``fatal_signature_id`` come in (computed by
    ``fleetd.screens``); the text itself never reaches health.
    """

    target: str
    source: ProbeSource
    ok: bool
    digest: str | None = None
    fatal_signature_id: str | None = None
    error_code: str | None = None

    def __post_init__(self) -> None:
        if self.ok and self.error_code is not None:
            raise ValueError("a successful probe has no error code")
        if not self.ok and (self.digest is not None or self.fatal_signature_id is not None):
            raise ValueError("a failed probe has no digest or signature")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileCapacityInput:
    """A configured profile, its cap (``None``: unlimited), and when the bench of its model ends
    (``None``: not benched; a benched profile has no free slot, whatever its load)."""

    profile: str
    max_load: int | None = None
    benched_until: datetime | None = None

    def __post_init__(self) -> None:
        if self.max_load is not None and self.max_load < 1:
            raise ValueError("ProfileCapacityInput.max_load must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteLead:
    """A lead another fleetd instance serves, as that instance's last summary shows it.

    ``assigned``: the foreign incidents its own instance has assigned it. ``last_seen``: when
    this instance last saw its instance renew, on this instance's clock; ``renew_every``: the
    interval its instance renews at (a lead of a down instance is never a candidate).
    """

    instance: str
    name: str
    state: LeadState
    raw_status: LiveStatus | None
    assigned: int
    last_seen: datetime
    renew_every: timedelta

    @property
    def healthy(self) -> bool:
        """Not in an open unhealthy (fault) state."""
        return self.state not in FAULT_LEAD_STATES

    @property
    def peer_candidate(self) -> bool:
        """May be chosen as a new peer recipient (before per-incident exclusions)."""
        return (
            self.state in PEER_STATES
            and self.raw_status is not None
            and self.raw_status is not LiveStatus.UNKNOWN
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetSnapshot:
    """Everything one tick of ``decide`` reads."""

    live: LiveView
    members: tuple[MemberView, ...] = ()
    leads: tuple[LeadView, ...] = ()
    inboxes: tuple[InboxView, ...] = ()
    probes: tuple[ProbeResult, ...] = ()
    config: HealthSettings = field(default_factory=HealthSettings)
    profiles: tuple[ProfileCapacityInput, ...] = ()
    inbox_failures: tuple[InboxFailureView, ...] = ()
    #: When the oldest health record the inbox refused (still held in memory) was made; ``None``
    #: while every record reached its lead's inbox.
    unpublished_since: datetime | None = None
    #: The leads other fleetd instances sharing the journal last published (several hosts,
    #: issue 24): peers of last resort for routing. Leads of a down instance are ignored.
    remote_leads: tuple[RemoteLead, ...] = ()

    def __post_init__(self) -> None:
        # Members are checked by decide, which asks every member only when it cannot carry the
        # last tick's members over (same ids at the same places): a large fleet is not walked
        # once more here every tick (see member_pass.every_member).
        for what, items, field_name in (
            ("lead name", self.leads, "name"),
            ("inbox key", self.inboxes, "key"),
            ("profile", self.profiles, "profile"),
        ):
            if len(set(map(attrgetter(field_name), items))) != len(items):
                raise ValueError(f"FleetSnapshot has a duplicate {what}")
