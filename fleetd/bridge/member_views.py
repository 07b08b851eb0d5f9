"""Each member's view as the health tick reads it, kept between ticks.

A tick reads every member's :class:`~fleetd.health.snapshot.MemberView` — ten thousand on a large
fleet — and about one in a hundred changes between ticks. :class:`MemberViews` keeps each view with
the stamp of what it was built from, and the health tick's read (:meth:`MemberViews.for_tick`)
looks again only at the members the roster marked as changed. Nothing here reads a pane or
carries pane text, prompts or replies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter

from fleetd.bridge.backlog import MemberBacklog
from fleetd.bridge.roster import Roster, TouchReader
from fleetd.bridge.sessions import Session, SessionState
from fleetd.bridge.tasks import TaskBook, Ticket
from fleetd.bridge.turns import RepairLedger, TurnState, TurnToken
from fleetd.health.snapshot import (
    BoundaryScreen,
    LossCause,
    MemberView,
    OpenTurn,
    RepairView,
    TargetLoss,
    WorktreeFacts,
)
from fleetd.health.snapshot import SessionState as HealthSessionState

__all__ = ["MemberViews"]


#: What a member's view was built from besides its session's own fields, read once per member: its
#: session (a frozen value: a new object is a change), its open turn and turn ledger; whether the
#: turn's ticket is gone and whether it is still open; queued sends; pending tickets; mute events;
#: waiting replies.
_Stamp = tuple[
    Session,
    "TurnToken | None",
    "RepairLedger | None",
    bool,
    bool,
    int,
    int,
    int,
    "MemberBacklog | None",
]


class MemberViews:
    """Every member's :class:`~fleetd.health.snapshot.MemberView`, rebuilt only when it changed.

    A tick reads every member — ten thousand on a large fleet — and about one in a hundred changes
    between ticks. A view is kept with the stamp of everything it was built from (:data:`_Stamp`):
    the session is a frozen value that only the roster replaces, so a new object is its change;
    the open turn's token and repair ledger (frozen values that only the turn machine's
    ``step`` replaces), the ticket, queue, pending count, mutes and backlog are read as values. An
    unchanged stamp hands back the very same view object, which also lets the health core's reuse
    check compare it by identity. Views of sessions the roster no longer holds are dropped, so what
    is kept is bounded by the roster (live members and the last released rows).

    Reading every member's stamp is itself most of a large tick, so the health tick reads through
    :meth:`for_tick`, which looks again only at the members the roster marked as changed
    (:class:`~fleetd.bridge.roster.Touches`) and at those whose mutes or waiting replies moved.
    """

    __slots__ = ("_kept", "_roster", "_tasks", "_tick", "_view")

    def __init__(self, *, roster: Roster, tasks: TaskBook) -> None:
        self._roster = roster
        self._tasks = tasks
        self._kept: dict[str, tuple[_Stamp, MemberView]] = {}
        self._tick = _Pass(roster.changes)  # the health tick's reads (for_tick)
        self._view: _Pass | None = None  # the fleet view's (for_view), from its first read

    def __len__(self) -> int:
        return len(self._kept)

    def for_tick(
        self,
        sessions: list[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> tuple[MemberView, ...]:
        """The views of ``sessions`` for the health tick, reading only the members that changed.

        The roster touches a session in its :class:`~fleetd.bridge.roster.Touches` whenever
        anything its view is built from may have moved (its session, open turn or ledger, queue,
        tickets); this tick's mute counts and waiting replies are compared with the last tick's.
        When the sessions are the members of the last tick, in the same order, only the marked
        members are looked at again; otherwise every member is read through :meth:`build`.
        """
        return tuple(self._since(self._tick, sessions, mute_counts, backlogs))

    def for_view(
        self, sessions: list[Session], *, backlogs: Mapping[str, MemberBacklog]
    ) -> list[MemberView]:
        """The views of ``sessions`` for a version of the fleet view (no mute counts), read as
        :meth:`for_tick` reads them but against the marks since the fleet view's last read (its
        own reader of the roster's :class:`~fleetd.bridge.roster.Touches`): a busy fleet
        builds a version many times a second, each time a member or two moved."""
        if self._view is None:
            self._view = _Pass(self._roster.touches.reader())
        return list(self._since(self._view, sessions, {}, backlogs))

    def _since(
        self,
        last: _Pass,
        sessions: list[Session],
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> list[MemberView]:
        """The views of ``sessions`` against ``last`` (its marks, members, views and per-call
        inputs), which it then holds for the next call. The list is the pass's own."""
        marked = last.changes.take()
        moved = _moved(mute_counts, last.mutes) | _moved(backlogs, last.backlogs)
        last.mutes, last.backlogs = dict(mute_counts), dict(backlogs)
        # the same members in the same order, compared id by id at C speed (a member's new value
        # is put in the roster only by the roster, which marks it)
        ids = list(map(_SESSION_ID, sessions))
        if ids != last.ids:
            views = self._read(sessions, mute_counts=mute_counts, backlogs=backlogs)
            last.ids, last.views = ids, views
            last.position = {sid: n for n, sid in enumerate(ids)}
            return views
        views, where = last.views, last.position.get
        again = [n for n in map(where, marked | moved) if n is not None]
        read = self._read([sessions[n] for n in again], mute_counts=mute_counts, backlogs=backlogs)
        for n, view in zip(again, read, strict=True):
            views[n] = view
        return views

    def build(
        self,
        sessions: Iterable[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> list[MemberView]:
        """The views of ``sessions``, in order: each session is read, and a view is built only
        when its stamp moved."""
        return self._read(sessions, mute_counts=mute_counts, backlogs=backlogs)

    def _read(
        self,
        sessions: Iterable[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> list[MemberView]:
        """:meth:`build`, which :meth:`for_tick` also reads through: the lookups are bound once,
        each session is read once."""
        inflight, queues = self._roster.inflight.get, self._roster.queues.get
        ticket_of, pending_count = self._tasks.get, self._tasks.pending_count
        mutes_of, backlog_of = mute_counts.get, backlogs.get
        kept = self._kept
        previous = kept.get
        views = []
        for session in sessions:
            sid = session.session_id
            turn = inflight(sid)
            ticket = ticket_of(turn.token.ticket_id) if turn is not None else None
            queued, pending = len(queues(sid, ())), pending_count(sid)
            mutes, backlog = mutes_of(sid, 0), backlog_of(sid)
            stamp: _Stamp = (
                session,
                turn.token if turn is not None else None,
                turn.repair if turn is not None else None,
                ticket is None,
                ticket is not None and not ticket.terminal,
                queued,
                pending,
                mutes,
                backlog,
            )
            entry = previous(sid)
            if entry is not None and entry[0] == stamp:
                views.append(entry[1])
                continue
            view = _build(
                session, turn, ticket, queued=queued, pending=pending, mutes=mutes, backlog=backlog
            )
            kept[sid] = (stamp, view)
            views.append(view)
        if len(kept) > len(self._roster.sessions) + _SLACK:
            held = self._roster.sessions
            self._kept = {sid: entry for sid, entry in kept.items() if sid in held}
        return views


_SESSION_ID = attrgetter("session_id")


class _Pass:
    """One reader's incremental reads of the member views: its marks, and the members, views and
    per-call inputs (mute counts, waiting replies) of its last read."""

    __slots__ = ("backlogs", "changes", "ids", "mutes", "position", "views")

    def __init__(self, changes: TouchReader) -> None:
        self.changes = changes
        self.ids: list[str] = []  # the session ids of the last read, in its order
        self.views: list[MemberView] = []
        self.position: dict[str, int] = {}
        self.mutes: Mapping[str, int] = {}
        self.backlogs: Mapping[str, MemberBacklog] = {}


#: Views kept beyond the roster's sessions before those of forgotten sessions are dropped.
_SLACK = 64


def _moved(now: Mapping[str, object], before: Mapping[str, object]) -> set[str]:
    """The keys whose value differs between two per-member mappings (absent counts as a value)."""
    return {key for key in now.keys() | before.keys() if now.get(key) != before.get(key)}


def _build(
    session: Session,
    turn: TurnState | None,
    ticket: Ticket | None,
    *,
    queued: int,
    pending: int,
    mutes: int,
    backlog: MemberBacklog | None,
) -> MemberView:
    """One member's view from its session, open turn and that turn's ticket, and the counts its
    stamp was made of (read once)."""
    open_turn = None
    if turn is not None:
        open_turn = OpenTurn(
            token=turn.token.token_id,
            number=turn.token.turn,
            accepted_at=ticket.accepted_at if ticket else turn.opened_at,
            delivered_at=turn.opened_at,
            waiter_open=ticket is not None and not ticket.terminal,
            repair=_repair(turn.repair),
        )
    return MemberView(
        session_id=session.session_id,
        name=session.name,
        profile=session.profile,
        session_state=_HEALTH_STATES[session.state],
        state_since=session.state_since if session.state_since is not None else session.created_at,
        spawned_at=session.created_at,
        pane_id=session.pane_id,
        terminal_id=session.terminal_id,
        kind=session.kind,
        role=session.role,
        owner_lead=session.owner,
        presence=session.presence,
        turn=open_turn,
        repaired_token=session.repaired_token,
        queued_sends=queued,
        pending_tasks=pending,
        mute_events=mutes,
        worktree=(
            WorktreeFacts(commits_ahead=session.commits_ahead, preserved=session.preserved)
            if session.worktree is not None
            else None
        ),
        loss=_loss(session) if session.lost is not None else None,
        boundary_screen=_boundary_screen(session) if session.fatal_screen is not None else None,
        uncollected_replies=backlog.replies if backlog is not None else 0,
        oldest_uncollected_at=backlog.oldest_at if backlog is not None else None,
        teardown_violations=session.teardown_violations,
    )


#: A bridge session state as health spells it (looked up, not parsed: it is read every tick).
_HEALTH_STATES = {state: HealthSessionState(state.value) for state in SessionState}


def _repair(ledger: RepairLedger) -> RepairView | None:
    """The bridge's last lost-boundary repair answer for the open turn, as health reads it."""
    if ledger.attempts == 0 or ledger.last is None:
        return None
    return RepairView(
        result=ledger.last,
        detail=ledger.detail or "",
        attempts=ledger.attempts,
        retry_at=ledger.retry_at,
    )


def _loss(session: Session) -> TargetLoss | None:
    lost = session.lost
    if lost is None:
        return None
    return TargetLoss(
        cause=LossCause(lost.cause.value),
        code=lost.code,
        at=lost.at,
        tickets_failed=lost.tickets_failed,
        failed_tickets=lost.failed_tickets,
    )


def _boundary_screen(session: Session) -> BoundaryScreen | None:
    """The fatal screen of the turn that just ended; a later delivery makes it stale."""
    seen = session.fatal_screen
    if seen is None or session.state is not SessionState.DONE or seen.turn != session.turn:
        return None
    return BoundaryScreen(signature_id=seen.signature_id, ticket=seen.ticket)
