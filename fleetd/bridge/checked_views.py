"""Member views checked, every time they are asked for, against views built with nothing kept.

The bridge keeps each member's health view and rebuilds only those its roster marked changed
(:class:`~fleetd.bridge.roster.Touches`). :class:`CheckedMemberViews` proves in every test that
runs through a test fleet (:func:`fleetd.testing.build_test_fleet` turns it on with
:meth:`~fleetd.bridge.view.BridgeView.check_kept_views`) that no kept view goes stale. It reads the
roster and the ticket book directly, so it lives inside the bridge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleetd.bridge.backlog import MemberBacklog
from fleetd.bridge.member_views import MemberViews
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import TaskBook
from fleetd.health.snapshot import MemberView

__all__ = ["CheckedMemberViews"]


class CheckedMemberViews(MemberViews):
    """Member views that are checked, every time, against views built with nothing kept.

    Each time views are asked for, it also checks that the roster marked every session whose
    bridge-side inputs moved since the last health tick took the marks
    (:class:`~fleetd.bridge.roster.Touches`): the health tick reads no other member again, so
    a change made without a mark would leave its view stale until the next unrelated one.
    """

    __slots__ = ("_taken",)

    def __init__(self, *, roster: Roster, tasks: TaskBook) -> None:
        super().__init__(roster=roster, tasks=tasks)
        self._taken: dict[str, tuple[object, ...]] = {}  # inputs when the marks were last taken

    def _inputs(self, session: Session) -> tuple[object, ...]:
        """What the bridge holds that a member's view is built from, read plainly."""
        sid = session.session_id
        turn = self._roster.inflight.get(sid)
        ticket = self._tasks.get(turn.token.ticket_id) if turn is not None else None
        return (
            session,
            turn.token if turn is not None else None,
            turn.repair if turn is not None else None,
            ticket is None,
            ticket is not None and ticket.terminal,
            len(self._roster.queues.get(sid, ())),
            self._tasks.pending_count(sid),
        )

    def _check_marks(self) -> None:
        marked = self._roster.changes.marked()
        for sid, session in self._roster.sessions.items():
            before = self._taken.get(sid)
            if before is not None and sid not in marked and self._inputs(session) != before:
                raise AssertionError(f"member {sid} changed without a mark: its view went stale")

    def build(
        self,
        sessions: Iterable[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> list[MemberView]:
        self._check_marks()
        sessions = list(sessions)
        kept = super().build(sessions, mute_counts=mute_counts, backlogs=backlogs)
        fresh = MemberViews(roster=self._roster, tasks=self._tasks).build(
            sessions, mute_counts=mute_counts, backlogs=backlogs
        )
        _same(kept, fresh)
        return kept

    def for_tick(
        self,
        sessions: list[Session],
        *,
        mute_counts: Mapping[str, int],
        backlogs: Mapping[str, MemberBacklog],
    ) -> tuple[MemberView, ...]:
        self._check_marks()
        kept = super().for_tick(sessions, mute_counts=mute_counts, backlogs=backlogs)
        self._taken = {sid: self._inputs(s) for sid, s in self._roster.sessions.items()}
        fresh = MemberViews(roster=self._roster, tasks=self._tasks).build(
            sessions, mute_counts=mute_counts, backlogs=backlogs
        )
        _same(kept, fresh)
        return kept

    def for_view(
        self, sessions: list[Session], *, backlogs: Mapping[str, MemberBacklog]
    ) -> list[MemberView]:
        kept = super().for_view(sessions, backlogs=backlogs)
        fresh = MemberViews(roster=self._roster, tasks=self._tasks).build(
            sessions, mute_counts={}, backlogs=backlogs
        )
        _same(kept, fresh)
        return kept


def _same(kept: Iterable[MemberView], fresh: Iterable[MemberView]) -> None:
    for old, new in zip(kept, fresh, strict=True):
        if old != new:
            raise AssertionError(f"a kept member view went stale:\n{old}\n!=\n{new}")
