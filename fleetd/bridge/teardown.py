"""Releasing a member: one teardown per session, worktree safety, manifests.

A release fails the target's work through the bridge's one idempotent target-wide failure
operation, stops the process, settles the worktree by its release cause (M4 §5.3 as corrected:
only SPAWN_ROLLBACK and a COMPLETED release of a clean worktree remove it; a dirty worktree, a
failed dirty-check and every abnormal cause preserve it), writes an atomic manifest for a
preserved worktree before the live session goes, removes the member's mark once its pane is
closed or known gone (a pane herdr could not close keeps its mark, so the next run finds the
member), revokes the member's token, records a target loss for health
(:mod:`fleetd.bridge.evidence`) and retires the session. Last, it checks the post-teardown
invariant of M4 §8.5 (:mod:`fleetd.bridge.teardown_check`) against the tickets the target held
when the release began, and keeps the answer on the session for health. A second release of the
same session — a retried stop, the poller, the monitor — joins the one under way instead of
running again with a different cause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from fleetd.bridge.answers import ReleaseResult
from fleetd.bridge.evidence import target_lost
from fleetd.bridge.manifests import PreservedWorktree, write_manifest
from fleetd.bridge.marks import SESSIONS_DIR, remove_mark
from fleetd.bridge.panes import close_own_pane
from fleetd.bridge.release import ReleaseCause, WorktreeAction
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import TaskBook, Ticket
from fleetd.bridge.teardown_check import record_teardown
from fleetd.bridge.worktrees import Worktree, Worktrees, release_worktree
from fleetd.clock import Clock
from fleetd.errors import FleetdError, HerdrError, TargetNotFoundError
from fleetd.herdr.control import AgentControl

__all__ = ["Teardown"]

_log = logging.getLogger("fleetd.bridge")


class Teardown:
    """The releases of one bridge.

    ``ahead`` stores a release before any of it runs (the state store's write-ahead rule);
    ``fail_work`` is the one idempotent target-wide failure operation
    (:meth:`~fleetd.bridge.lifecycle.TargetLifecycle.fail_target_work`); ``on_failure`` hears of a
    teardown step that could not be done (a manifest not written), for the fleet view.
    """

    def __init__(
        self,
        *,
        control: AgentControl,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        worktrees: Worktrees,
        manifest_root: Path,
        revoke: Callable[[str], None],
        fail_work: Callable[[Session, str], list[Ticket]],
        on_failure: Callable[[str], None],
        unclosed: Callable[[Session], None],
        ahead: Callable[[Session, ReleaseCause], None],
    ) -> None:
        self._control = control
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._worktrees = worktrees
        self._manifest_root = manifest_root
        self._revoke = revoke
        self._fail_work = fail_work
        self._on_failure = on_failure
        self._unclosed = unclosed
        self._ahead = ahead
        self._releases: dict[str, asyncio.Task[ReleaseResult]] = {}

    def releasing(self, session_id: str) -> bool:
        """True while a release of this session is under way."""
        return session_id in self._releases

    async def release(
        self,
        session: Session,
        cause: ReleaseCause,
        *,
        code: str | None = None,
        loss: ReleaseCause | None = None,
    ) -> ReleaseResult:
        """Stop a member, settle its work and its worktree, and remove it from the live roster.

        One release per session: a second caller (a retried stop, the poller, the monitor) gets
        the outcome of the release already under way, whatever cause it asked for. A target loss
        (GONE, NEVER_READY; ``code`` says which evidence) is recorded on the session for health;
        ``loss`` names the loss when the cause is not one (a launch herdr gave up on with nothing
        sent rolls the spawn back, and is still a member that never became ready).
        """
        sid = session.session_id
        session = self._roster.sessions.get(sid, session)  # as it is now, not as the caller read it
        running = self._releases.get(sid)
        if running is None:
            if not session.live:
                return ReleaseResult(session_id=sid, cause=session.released_cause, already=True)
            running = asyncio.ensure_future(self._release(session, cause, code, loss or cause))
            self._releases[sid] = running
            running.add_done_callback(lambda _task: self._releases.pop(sid, None))
        return await asyncio.shield(running)

    async def _release(
        self, session: Session, cause: ReleaseCause, code: str | None, loss: ReleaseCause
    ) -> ReleaseResult:
        sid, roster = session.session_id, self._roster
        self._ahead(session, cause)  # stored before any of it runs: a restart finishes it
        pending = [t.ticket_id for t in self._tasks.pending_for(sid)]
        session = roster.update(sid, teardown_tickets=tuple(pending))
        state_before = session.state
        failed = self._fail_work(session, cause.value)
        lost = target_lost(loss, code, at=self._clock.now(), failed=[t.ticket_id for t in failed])
        closed = await self._close_pane(session)
        worktree: dict[str, WorktreeAction] = {}
        tree = roster.sessions[sid].worktree
        if tree is not None:
            result = await release_worktree(self._worktrees, tree, cause, pane_closed=closed)
            worktree["worktree"] = result.action
            if result.action is WorktreeAction.PRESERVE:
                roster.update(sid, preserved=True)
                ahead = await self._commits_ahead(tree)
                session = roster.update(sid, commits_ahead=ahead)
                await self._write_manifest(session, cause, state_before, pending)
        if closed:
            await self._unmark(session)
        else:
            self._unclosed(session)  # counted and shown as an orphan until its pane is gone
        self._revoke(sid)
        now = self._clock.now()
        roster.update(sid, lost=lost, released_cause=cause.value)
        session = roster.apply(sid, SessionEvent.RELEASE, now)
        roster.retire(session, now)
        self._tasks.forget_target(sid)
        record_teardown(session, roster=roster, tasks=self._tasks)
        return ReleaseResult(session_id=session.session_id, cause=cause, **worktree)

    async def _close_pane(self, session: Session) -> bool:
        """Close the member's pane if it is still the member's (:mod:`~fleetd.bridge.panes`);
        True when nothing of the member runs any more."""
        sid, pane_id = session.session_id, session.pane_id
        if pane_id is None:
            return True
        try:
            await close_own_pane(self._control, session.name, pane_id)
        except TargetNotFoundError:
            pass  # already gone
        except HerdrError as exc:
            _log.warning(
                "session %s: herdr did not close its pane (%s): its agent may still run, "
                "so its worktree is kept and its mark stays for the next run to find",
                sid,
                exc.code,
            )
            return False  # it may still run: its mark stays for the next run to find
        return True

    async def _unmark(self, session: Session) -> None:
        sessions = self._manifest_root / SESSIONS_DIR
        try:
            await asyncio.to_thread(remove_mark, sessions, session.session_id)
        except FleetdError as exc:
            _log.warning("session %s: %s", session.session_id, exc)

    async def _commits_ahead(self, worktree: Worktree) -> int | None:
        """Work on the branch after its base, for WORK_PRODUCT_AT_RISK; None when git cannot say."""
        try:
            return await self._worktrees.commits_ahead(worktree)
        except FleetdError:
            return None

    async def _write_manifest(
        self,
        session: Session,
        cause: ReleaseCause,
        state_before: SessionState,
        pending: list[str],
    ) -> None:
        """Record a preserved worktree before the live session goes away."""
        worktree = session.worktree
        assert worktree is not None
        try:
            manifest = PreservedWorktree(
                session_id=session.session_id,
                owner=session.owner,
                role=session.role or "",
                profile=session.profile,
                repository=str(worktree.repo),
                path=str(worktree.path),
                branch=worktree.branch,
                base_commit=worktree.base_commit,
                cause=cause,
                released_at=self._clock.now(),
                state=state_before.value,
                pending_task_ids=tuple(pending),
            )
            await asyncio.to_thread(write_manifest, self._manifest_root, manifest)
        except (FleetdError, ValueError) as exc:
            self._on_failure(f"manifest:{session.session_id}")
            _log.warning("session %s: manifest not written: %s", session.session_id, exc)
        # A clean stop preserves every worktree by design (§5.3): said, but not as a warning.
        _log.log(
            logging.INFO if cause is ReleaseCause.SHUTDOWN else logging.WARNING,
            "session %s: worktree preserved at %s (%s)",
            session.session_id,
            worktree.path,
            cause.value,
        )
