"""A target's end: failure of its work, loss, a launch herdr gave up on, readiness, release.

Every terminal cause for a target — a lead's stop, herdr saying it is gone, a launch that never
became ready, a clean stop of fleetd — goes through :meth:`TargetLifecycle.fail_target_work`, the
one idempotent target-wide failure operation, and then through one release per session
(:class:`~fleetd.bridge.teardown.Teardown`). The poller and the health monitor report what they
see here; they never touch the roster themselves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from itertools import compress
from pathlib import Path

from fleetd.bridge.answers import ReleaseResult
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import TRANSITIONS, Session, SessionEvent, SessionState
from fleetd.bridge.tasks import TaskBook, Ticket
from fleetd.bridge.teardown import Teardown
from fleetd.bridge.teardown_check import record_teardown
from fleetd.bridge.work_product import TerminalEdges
from fleetd.bridge.worktrees import Worktrees
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import HerdrError
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo

__all__ = ["TargetLifecycle"]

_log = logging.getLogger("fleetd.bridge")

#: The session table's move for a loss health found (:meth:`TargetLifecycle.release_lost`).
_LOSS_EVENTS = {
    ReleaseCause.GONE: SessionEvent.TARGET_GONE,
    ReleaseCause.NEVER_READY: SessionEvent.NEVER_READY,
}


class TargetLifecycle:
    """How the targets of one bridge end."""

    def __init__(
        self,
        *,
        control: AgentControl,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        settings: Callable[[], FleetdConfig],
        worktrees: Worktrees,
        manifest_root: Path,
        revoke: Callable[[str], None],
        on_failure: Callable[[str], None],
        unclosed: Callable[[Session], None],
        ahead: Callable[[Session, ReleaseCause], None],
    ) -> None:
        self._control = control
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._settings = settings
        self._worktrees = worktrees
        self._teardown = Teardown(
            control=control,
            roster=roster,
            tasks=tasks,
            clock=clock,
            worktrees=worktrees,
            manifest_root=manifest_root,
            revoke=revoke,
            fail_work=lambda session, reason: self.fail_target_work(session, reason=reason),
            on_failure=on_failure,
            unclosed=unclosed,
            ahead=ahead,
        )
        self._edges = TerminalEdges(roster, worktrees, releasing=self.releasing)

    async def measure_terminal_edges(self) -> int:
        """Commits ahead for live members whose terminal edge is new (WORK_PRODUCT_AT_RISK): the
        work a release would have to preserve, measured before any release is asked for."""
        return await self._edges.measure()

    def fail_target_work(self, session: Session, *, reason: str) -> list[Ticket]:
        """Fail every queued, accepted and async task of a target exactly once (idempotent).

        Run again on a released target (the monitor's one retry after a broken teardown
        invariant), it checks the invariant afterwards (:mod:`~fleetd.bridge.teardown_check`).
        """
        sid = session.session_id
        self._roster.gates.add(sid)
        self._roster.clear_queue(sid)
        now = self._clock.now()
        self._roster.inflight.close(sid, reason, now)
        failed = self._tasks.fail_target(sid, reason=reason, now=now)
        session = self._roster.sessions.get(sid, session)  # as it is now
        if not session.live:
            record_teardown(session, roster=self._roster, tasks=self._tasks)
        return failed

    def releasing(self, session_id: str) -> bool:
        """True while a release of this session is under way."""
        return self._teardown.releasing(session_id)

    async def release(
        self,
        session: Session,
        cause: ReleaseCause,
        *,
        code: str | None = None,
        loss: ReleaseCause | None = None,
    ) -> ReleaseResult:
        """Stop a member and settle its work and worktree (see :class:`Teardown`)."""
        return await self._teardown.release(session, cause, code=code, loss=loss)

    async def release_all(self, cause: ReleaseCause) -> None:
        """Release every live member with ``cause`` (a clean stop: SHUTDOWN), all at once."""
        live = self._roster.live()
        outcomes = await asyncio.gather(
            *(self.release(session, cause) for session in live), return_exceptions=True
        )
        for session, outcome in zip(live, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                _log.warning("session %s: release failed: %s", session.session_id, outcome)
        if live:
            _log.info("released %d members (%s)", len(live), cause.value)

    async def release_lost(self, session: Session, cause: ReleaseCause) -> ReleaseResult:
        """Health found the member lost (``GONE`` or ``NEVER_READY``): move it along the session
        table where the table allows that move from where it is now, then release it."""
        sid = session.session_id
        session = self._roster.sessions.get(sid, session)
        event = _LOSS_EVENTS[cause]
        if (session.state, event) in TRANSITIONS:
            session = self._roster.apply(sid, event, self._clock.now())
        return await self.release(session, cause)

    async def target_not_found(self, session: Session, code: str | None = None) -> bool:
        """herdr says the target is gone; confirm the link works, then fail its work once.

        ``code`` is herdr's ``*_not_found`` code; the release records it for health. False when
        the link itself is in doubt (nothing was decided: the caller may ask again later).
        """
        try:
            await self._control.ping()
        except HerdrError:
            return False  # the link itself is in doubt: not proof of a dead member
        sid = session.session_id
        now_held = self._roster.sessions.get(sid)  # read again: the ping awaited
        if now_held is not None and now_held.live and not self.releasing(sid):
            session = self._roster.apply(sid, SessionEvent.TARGET_GONE, self._clock.now())
            await self.release(session, ReleaseCause.GONE, code=code)
        return True

    async def start_progress(self, session: Session, info: AgentInfo) -> None:
        """Watch a starting member; herdr giving up on the launch ends the spawn.

        With nothing sent yet the spawn rolls back (its worktree goes) and health is told the
        member never became ready; with a send waiting the member never became ready and its
        worktree is preserved.
        """
        if session.terminal_id is None:
            session = self._roster.update(session.session_id, terminal_id=info.terminal_id)
        if (
            info.launch_pending
            or info.interactive_ready
            or session.presence
            or self.releasing(session.session_id)
        ):
            return
        sid = session.session_id
        if self._roster.queues.get(sid):
            session = self._roster.apply(sid, SessionEvent.NEVER_READY, self._clock.now())
            await self.release(session, ReleaseCause.NEVER_READY, code="launch_failed")
        else:
            _log.warning(
                "session %s (%s): herdr gave up on its launch before anything was sent; "
                "the spawn is rolled back (fleet_status shows releasedCause spawn_rollback)",
                session.session_id,
                session.name,
            )
            session = self._roster.apply(sid, SessionEvent.START_FAILED, self._clock.now())
            # its worktree goes with the rollback; health still tells the lead that spawned it
            await self.release(
                session,
                ReleaseCause.SPAWN_ROLLBACK,
                code="launch_failed",
                loss=ReleaseCause.NEVER_READY,
            )

    async def check_readiness(self) -> None:
        """A starting member with a waiting send and no presence past the grace never became ready.

        Its queued sends fail, its process stops, and a provisioned worktree is preserved. A member
        with nothing waiting is left starting: readiness expiry alone is not a reason to stop it.
        """
        grace = self._settings().bridge.readiness_grace
        now = self._clock.now()
        sessions = self._roster.sessions  # a member has a queue while the roster holds it
        queues = self._roster.queues
        waiting = list(compress(queues.keys(), queues.values()))  # few, most ticks
        for sid in waiting:
            session = sessions[sid]
            if (
                session.state is SessionState.SPAWNING
                and now - session.created_at >= grace
                and not self.releasing(sid)
            ):
                session = self._roster.apply(sid, SessionEvent.NEVER_READY, now)
                await self.release(session, ReleaseCause.NEVER_READY)
