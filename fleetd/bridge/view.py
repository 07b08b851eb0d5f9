"""Rows of the fleet view that come from the bridge: sessions, tickets, capacity.

Nothing here reads a pane or carries pane text, prompts or replies. Worktree paths and preserved
worktrees are lead-only and are added by the caller for leads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from fleetd.bridge.answers import CapacityRow, ModelHealthFlag, OpenTurn, SessionRow
from fleetd.bridge.backlog import MemberBacklog
from fleetd.bridge.checked_views import CheckedMemberViews
from fleetd.bridge.member_views import MemberViews
from fleetd.bridge.orphans import OrphanBook
from fleetd.bridge.placement import NO_BENCH, ModelBench
from fleetd.bridge.roster import Roster, TouchReader
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import TaskBook
from fleetd.bridge.teardown_check import recheck_teardowns
from fleetd.config import FleetdConfig
from fleetd.health.capacity import capacity_rows, idle_for_seconds
from fleetd.health.settings import HealthSettings
from fleetd.health.snapshot import (
    MemberView,
    ProfileCapacityInput,
)

__all__ = ["BridgeView", "health_settings", "profile_inputs"]


class BridgeView:
    """Reads the bridge's sessions, queues, tickets and orphans into rows and health views."""

    def __init__(
        self,
        *,
        roster: Roster,
        tasks: TaskBook,
        orphans: OrphanBook,
        settings: Callable[[], FleetdConfig],
        bench: ModelBench = NO_BENCH,
    ) -> None:
        self.roster = roster
        self.tasks = tasks
        self.orphans = orphans
        self.settings = settings
        self.bench = bench
        self.views = MemberViews(roster=roster, tasks=tasks)

    def marks(self) -> TouchReader:
        """A reader of its own of the roster's touches: the members whose view or row may have
        moved since it last took them (:class:`~fleetd.bridge.roster.Touches`)."""
        return self.roster.touches.reader()

    def check_kept_views(self) -> None:
        """From now on check every member view handed out against one built with nothing kept
        (:class:`~fleetd.bridge.checked_views.CheckedMemberViews`; the test harness turns it on)."""
        self.views = CheckedMemberViews(roster=self.roster, tasks=self.tasks)

    def profile_inputs(self, now: datetime) -> tuple[ProfileCapacityInput, ...]:
        """Every configured profile, its cap and its model's bench at ``now``: what the capacity
        rows of ``fleet_list``, the heartbeat and placement are built from."""
        return profile_inputs(self.settings(), dict(self.bench.benched(now)))

    def model_health(self, profile: str, now: datetime) -> ModelHealthFlag | None:
        """The flag a member row and a send's answer carry while the member's profile is
        benched (its provider no longer lists its model); ``None`` otherwise. Work to a live
        member is never refused for it: the lead decides."""
        until = self.bench.benched_until(profile, now)
        return None if until is None else ModelHealthFlag.benched(until)

    def row_inputs(self, session_id: str, *, pending: bool) -> tuple[object, ...]:
        """What a member's row reads of the bridge beside its session and member view: its live
        status, what the row shows of its open turn and that ticket's delivery, and (``pending``:
        the view counts some) its pending tickets. Equal inputs, equal row (the fleet body's
        stamp)."""
        turn = self.roster.inflight.get(session_id)
        inputs: tuple[object, ...] = (self.roster.live_status.get(session_id),)
        if turn is not None:
            ticket = self.tasks.get(turn.token.ticket_id)
            shown = (turn.token, turn.delivered_at, turn.saw_working, turn.baseline)
            inputs += (*shown, ticket.delivery if ticket is not None else None)
        if pending:
            inputs += tuple(t.ticket_id for t in self.tasks.pending_for(session_id))
        return inputs

    def delivered_at(self, session_id: str) -> datetime | None:
        """When the member's open turn was delivered (``None``: no open turn)."""
        turn = self.roster.inflight.get(session_id)
        return None if turn is None else turn.delivered_at

    def session_row(
        self,
        session: Session,
        *,
        now: datetime,
        backlog: MemberBacklog | None = None,
        view: MemberView | None = None,
    ) -> SessionRow:
        """One member as ``fleet_list`` and ``fleet_status`` show it (see :func:`session_row`)."""
        return session_row(self, session, now=now, backlog=backlog, view=view)

    def session_fields(
        self,
        session: Session,
        *,
        now: datetime,
        backlog: MemberBacklog | None = None,
        view: MemberView | None = None,
    ) -> dict[str, Any]:
        """The fields of :meth:`session_row`, by field name, for a model that extends it."""
        return session_fields(self, session, now=now, backlog=backlog, view=view)

    def member_view(
        self, session: Session, *, mute_events: int = 0, backlog: MemberBacklog | None = None
    ) -> MemberView:
        """The bridge side of one member, as the health core and the capacity view read it."""
        return member_view(self, session, mute_events=mute_events, backlog=backlog)

    def tick_views(
        self,
        sessions: list[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> tuple[MemberView, ...]:
        """Every member's view for the health tick (see :meth:`MemberViews.for_tick`), after the
        released members the roster marked as changed had their teardown invariant checked again
        (:func:`~fleetd.bridge.teardown_check.recheck_teardowns`): when one's answer changed,
        ``sessions`` are read again, so each view is of the member as it is now."""
        roster = self.roster
        if recheck_teardowns(roster.changes.marked(), roster=roster, tasks=self.tasks):
            current = roster.sessions.get
            sessions = [current(s.session_id, s) for s in sessions]
        return self.views.for_tick(sessions, mute_counts=mute_counts, backlogs=backlogs)

    def member_views(
        self,
        sessions: Iterable[Session],
        *,
        mute_counts: Mapping[str, int] | None = None,
        backlogs: Mapping[str, MemberBacklog] | None = None,
    ) -> list[MemberView]:
        """The bridge side of many members, in order (see :func:`member_views`)."""
        return member_views(self, sessions, mute_counts=mute_counts or {}, backlogs=backlogs or {})

    def version_views(
        self, sessions: list[Session], *, backlogs: Mapping[str, MemberBacklog]
    ) -> list[MemberView]:
        """Every member's view for a version of the fleet view, reading again only the members
        the roster marked since the last version (:meth:`MemberViews.for_view`)."""
        return self.views.for_view(sessions, backlogs=backlogs)

    def capacity_view(
        self,
        backlogs: Mapping[str, MemberBacklog] | None = None,
        views: Iterable[MemberView] | None = None,
        *,
        now: datetime,
    ) -> list[CapacityRow]:
        """Per-profile capacity, from the same rows placement reads (orphans and benches
        included)."""
        return capacity_view(self, backlogs, views, now=now)


def session_row(
    bridge: BridgeView,
    session: Session,
    *,
    now: datetime,
    backlog: MemberBacklog | None = None,
    view: MemberView | None = None,
) -> SessionRow:
    """One member as ``fleet_list`` and ``fleet_status`` show it.

    ``backlog`` is this member's replies still waiting in its lead's inbox: while any wait, the
    row has no ``idleForSeconds`` (one idle rule: :func:`fleetd.health.capacity.idle_for_seconds`).
    ``view`` is the member's :class:`MemberView` when the caller has built it already (with that
    backlog). The row is built without validation (:meth:`~fleetd.bridge.answers.WireModel.of`:
    ``fleet_list`` builds one per changed member of a thousand); every value is of its field's
    type here (:func:`session_fields`).
    """
    return SessionRow.of(**session_fields(bridge, session, now=now, backlog=backlog, view=view))


def session_fields(
    bridge: BridgeView,
    session: Session,
    *,
    now: datetime,
    backlog: MemberBacklog | None = None,
    view: MemberView | None = None,
) -> dict[str, Any]:
    """The fields of :func:`session_row` by field name: those with nothing to say are left out."""
    sid = session.session_id
    pending = bridge.tasks.pending_for(sid)
    turn = bridge.roster.inflight.get(sid)
    fields: dict[str, Any] = {
        "session_id": sid,
        "name": session.name,
        "profile": session.profile,
        "kind": session.kind,
        "role": session.role,
        "owner": session.owner,
        "pane_id": session.pane_id,
        "state": session.state,
        "presence": session.presence,
        "turn": session.turn,
        "live_status": bridge.roster.live_status.get(sid),
        "queued": len(bridge.roster.queues.get(sid, ())),
        "pending_tickets": sorted(t.ticket_id for t in pending),
        "state_age_seconds": _age(session.state_since, now),
    }
    if turn is not None:
        open_ticket = bridge.tasks.get(turn.token.ticket_id)
        fields["open_turn"] = OpenTurn.of(
            ticket=turn.token.ticket_id,
            turn=turn.token.turn,
            delivery=open_ticket.delivery if open_ticket is not None else None,
            delivered_age_seconds=_age(turn.delivered_at, now),
            saw_working=turn.saw_working,
            baseline=turn.baseline.capture.value if turn.baseline else None,
        )
    idle = idle_for_seconds(view or member_view(bridge, session, backlog=backlog), now)
    if idle is not None and session.state_since is not None:
        fields["idle_for_seconds"] = _age(session.state_since, now)
    if session.released_cause is not None:
        fields["released_cause"] = session.released_cause
    if session.live:
        flag = bridge.model_health(session.profile, now)
        if flag is not None:
            fields["model_health"] = flag
    if session.worktree is not None:
        fields["branch"] = session.worktree.branch
    return fields


def member_view(
    bridge: BridgeView,
    session: Session,
    *,
    mute_events: int = 0,
    backlog: MemberBacklog | None = None,
) -> MemberView:
    """The bridge side of one member, as the health core and the capacity view read it."""
    mutes = {session.session_id: mute_events} if mute_events else {}
    backlogs = {session.session_id: backlog} if backlog is not None else {}
    return member_views(bridge, (session,), mute_counts=mutes, backlogs=backlogs)[0]


def member_views(
    bridge: BridgeView,
    sessions: Iterable[Session],
    *,
    mute_counts: Mapping[str, int],
    backlogs: Mapping[str, MemberBacklog],
) -> list[MemberView]:
    """The bridge side of many members at once (see :class:`MemberViews`)."""
    return bridge.views.build(sessions, mute_counts=mute_counts, backlogs=backlogs)


def profile_inputs(
    config: FleetdConfig, benched: Mapping[str, datetime] | None = None
) -> tuple[ProfileCapacityInput, ...]:
    """Every configured profile, its cap and (from ``benched``: profile -> end) its model's
    bench, in name order, as capacity reads them."""
    ends = benched or {}
    return tuple(
        ProfileCapacityInput(profile=name, max_load=profile.max_load, benched_until=ends.get(name))
        for name, profile in sorted(config.profiles.items())
    )


def health_settings(config: FleetdConfig) -> HealthSettings:
    """The hot health values of one tick, from the live config."""
    health = config.health
    return HealthSettings(
        snapshot_interval=health.snapshot_interval,
        working_suspect_after=health.working_suspect_after,
        pane_probe_interval=health.pane_probe_interval,
        lead_unresponsive_after=health.lead_unresponsive_after,
        capacity_long_idle_after=health.capacity_long_idle_after,
        readiness_grace=config.bridge.readiness_grace,
    )


def capacity_view(
    bridge: BridgeView,
    backlogs: Mapping[str, MemberBacklog] | None = None,
    views: Iterable[MemberView] | None = None,
    *,
    now: datetime,
) -> list[CapacityRow]:
    """Per-profile capacity, from the same rows placement reads (orphans and benches included):
    a benched profile shows ``free`` 0 and ``benched``, with the bench's end.

    ``views`` are the live members' views when the caller has built them already."""
    if views is None:
        views = member_views(bridge, bridge.roster.live(), mute_counts={}, backlogs=backlogs or {})
    rows = capacity_rows(bridge.profile_inputs(now), list(views), orphans=bridge.orphans.members())
    return [
        CapacityRow.of(
            profile=row.profile,
            max_load=row.max_load,
            live=row.live,
            free=row.free,
            reclaimable=row.reclaimable,
            orphaned=row.orphaned,
            benched=row.benched,
            benched_until=row.benched_until.isoformat() if row.benched_until else None,
        )
        for row in rows
    ]


def _age(since: datetime | None, now: datetime) -> float | None:
    return None if since is None else round((now - since).total_seconds(), 3)
