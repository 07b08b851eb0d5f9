"""Releasing a member: one teardown per session, worktree safety, manifests.

A release fails the target's work through the bridge's one idempotent target-wide failure
operation, stops the process, settles the worktree by its release cause (M4 §5.3 as corrected:
only SPAWN_ROLLBACK and a COMPLETED release of a clean worktree remove it; a dirty worktree, a
failed dirty-check and every abnormal cause preserve it), writes an atomic manifest for a
preserved worktree before the live session goes, removes the member's mark once its pane is
closed or known gone (a pane herdr could not close keeps its mark, so the next run finds the
member), revokes the member's token, records a target loss for health
(:mod:`fleetd.bridge.evidence`) and retires the session. A second release of the same session — a
retried stop, the poller, the monitor — joins the one under way instead of running again with a
different cause.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from fleetd.bridge.evidence import target_lost
from fleetd.bridge.manifests import PreservedWorktree, write_manifest
from fleetd.bridge.marks import SESSIONS_DIR, remove_mark
from fleetd.bridge.release import ReleaseCause, WorktreeAction
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.worktrees import Worktree, release_worktree
from fleetd.errors import FleetdError, HerdrError, TargetNotFoundError

if TYPE_CHECKING:
    from fleetd.bridge.service import Bridge

__all__ = ["Teardown"]

_log = logging.getLogger("fleetd.bridge")


class Teardown:
    """The releases of one bridge."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge
        self._releases: dict[str, asyncio.Task[dict[str, object]]] = {}

    def releasing(self, session_id: str) -> bool:
        """True while a release of this session is under way."""
        return session_id in self._releases

    async def release(
        self, session: Session, cause: ReleaseCause, *, code: str | None = None
    ) -> dict[str, object]:
        """Stop a member, settle its work and its worktree, and remove it from the live roster.

        One release per session: a second caller (a retried stop, the poller, the monitor) gets
        the outcome of the release already under way, whatever cause it asked for. A target loss
        (GONE, NEVER_READY; ``code`` says which evidence) is recorded on the session for health.
        """
        sid = session.session_id
        running = self._releases.get(sid)
        if running is None:
            if not session.live:
                return {"sessionId": sid, "cause": session.released_cause, "already": True}
            running = asyncio.ensure_future(self._release(session, cause, code))
            self._releases[sid] = running
            running.add_done_callback(lambda _task: self._releases.pop(sid, None))
        return await asyncio.shield(running)

    async def _release(
        self, session: Session, cause: ReleaseCause, code: str | None
    ) -> dict[str, object]:
        pending = [t.ticket_id for t in self._bridge.tasks.pending_for(session.session_id)]
        state_before = session.state
        failed = self._bridge.fail_target_work(session, reason=cause.value)
        lost = target_lost(
            cause, code, at=self._bridge.clock.now(), failed=[t.ticket_id for t in failed]
        )
        closed = True
        if session.pane_id is not None:
            try:
                await self._bridge.control.close_pane(session.pane_id)
            except TargetNotFoundError:
                pass  # already gone
            except HerdrError as exc:
                closed = False  # it may still run: its mark stays for the next run to find
                _log.info("session %s: close pane: %s", session.session_id, exc.code)
        outcome: dict[str, object] = {"sessionId": session.session_id, "cause": cause.value}
        if session.worktree is not None:
            result = await release_worktree(self._bridge.worktrees, session.worktree, cause)
            outcome["worktree"] = result.action.value
            if result.action is WorktreeAction.PRESERVE:
                session.preserved = True
                session.commits_ahead = await self._commits_ahead(session.worktree)
                await self._write_manifest(session, cause, state_before, pending)
        if closed:
            await self._unmark(session)
        self._bridge.revoke(session.session_id)
        session.lost = lost
        session.released_cause = cause.value
        session.apply(SessionEvent.RELEASE, self._bridge.clock.now())
        self._bridge.roster.retire(session)
        return outcome

    async def _unmark(self, session: Session) -> None:
        sessions = self._bridge.manifest_root / SESSIONS_DIR
        try:
            await asyncio.to_thread(remove_mark, sessions, session.session_id)
        except FleetdError as exc:
            _log.warning("session %s: %s", session.session_id, exc)

    async def _commits_ahead(self, worktree: Worktree) -> int | None:
        """Work on the branch after its base, for WORK_PRODUCT_AT_RISK; None when git cannot say."""
        try:
            return await self._bridge.worktrees.commits_ahead(worktree)
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
                released_at=self._bridge.clock.now(),
                state=state_before.value,
                pending_task_ids=tuple(pending),
            )
            await asyncio.to_thread(write_manifest, self._bridge.manifest_root, manifest)
        except (FleetdError, ValueError) as exc:
            self._bridge.teardown_failures.append(f"manifest:{session.session_id}")
            _log.warning("session %s: manifest not written: %s", session.session_id, exc)
        # A clean stop preserves every worktree by design (§5.3): said, but not as a warning.
        _log.log(
            logging.INFO if cause is ReleaseCause.SHUTDOWN else logging.WARNING,
            "session %s: worktree preserved at %s (%s)",
            session.session_id,
            worktree.path,
            cause.value,
        )
