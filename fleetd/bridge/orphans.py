"""Members a previous run left running: found at start, counted, shown, and stoppable.

Theory of operation
-------------------
When fleetd crashes, its members keep running in herdr with nobody managing them. At start fleetd
loads the marks other runs left (:mod:`fleetd.bridge.marks`) and, on the first ``agent.list``
that succeeds, matches them (:func:`match_marks`): a mark whose pane is still listed under the
same agent name is an **orphan**; a mark whose pane is not listed is a member that is gone.

An orphan

* holds a slot of its profile: placement and the capacity view count it with the one
  :func:`~fleetd.health.capacity.live_count`, so ``maxLoad`` holds across a crash;
* keeps its agent name: a new member cannot take it while herdr still has an agent of that name;
* is shown to its owning lead (and the operator) in ``fleet_list.members`` with state
  ``orphaned`` and the ``fleet_stop`` call that ends it;
* is never sent anything and never adopted: its tickets, waiters, token and baseline went with
  its run (M4 §8), and nothing is replayed.

``fleet_stop(paneId=...)`` or ``fleet_stop(sessionId=...)`` from the owning lead closes the pane
and preserves the worktree (cause LEAD_ABORT). A member found gone — at start, or an orphan that
a later check no longer lists — is forgotten with cause GONE. A member of this run whose pane herdr
did not close when it was released (:meth:`OrphanBook.watch`) is an orphan too, for the same
reasons: its agent may still run and hold a slot. Its release asked for its pane to close, so each
check asks herdr again until it closes (or herdr says it is gone): a pane with no agent in it — a
spawn rolled back before its agent started — is not in ``agent.list``, and would otherwise be
forgotten while its shell stays open. Either way a worktree gets a
preserved-worktree manifest (unless one exists already) so ``fleet_list.preservedWorktrees`` names
it, and the mark is removed. A check is one ``agent.list``, made only while there are marks to
match or orphans to watch; at most :data:`~fleetd.bridge.marks.MARKS_READ` marks are read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleetd.bridge.answers import ReleaseResult
from fleetd.bridge.manifests import PreservedWorktree, manifest_path, write_manifest
from fleetd.bridge.marks import SESSIONS_DIR, MemberMark, load_marks, remove_mark
from fleetd.bridge.panes import close_own_pane
from fleetd.bridge.release import ReleaseCause, WorktreeAction
from fleetd.clock import Clock
from fleetd.errors import FleetdError, HerdrError, TargetNotFoundError, UnavailableError
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo

__all__ = ["ORPHANED", "Matched", "Orphan", "OrphanBook", "match_marks"]

_log = logging.getLogger("fleetd.bridge")

ORPHANED = "orphaned"
"""The state an orphan shows in ``fleet_list`` (and what the capacity count reads)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Orphan:
    """A member of a previous run that herdr still lists."""

    mark: MemberMark
    found_at: datetime

    @property
    def profile(self) -> str:
        return self.mark.profile

    @property
    def session_state(self) -> str:
        return ORPHANED


@dataclass(frozen=True, slots=True, kw_only=True)
class Matched:
    """Marks split by one ``agent.list``: still running, or gone."""

    running: tuple[MemberMark, ...]
    gone: tuple[MemberMark, ...]


def match_marks(marks: Iterable[MemberMark], agents: Iterable[AgentInfo]) -> Matched:
    """A mark is running when herdr lists its pane under the same agent name."""
    listed = {(agent.pane_id, agent.name) for agent in agents}
    running: list[MemberMark] = []
    gone: list[MemberMark] = []
    for mark in marks:
        (running if (mark.pane_id, mark.name) in listed else gone).append(mark)
    return Matched(running=tuple(running), gone=tuple(gone))


class OrphanBook:
    """The orphans one bridge knows of, and the marks it has still to match."""

    def __init__(
        self,
        *,
        control: AgentControl,
        clock: Clock,
        manifest_root: Path,
        run: str,
        on_failure: Callable[[str], None],
        known: Callable[[str], bool] = lambda _session_id: False,
    ) -> None:
        """``run`` is this run's id (its own marks are not orphans); ``on_failure`` hears of a
        manifest that could not be written; ``known`` tells a session the state store gave back
        (adopted, never an orphan: only marks the store does not know are matched here)."""
        self._control = control
        self._clock = clock
        self._manifest_root = manifest_root
        self._run = run
        self._on_failure = on_failure
        self._known = known
        self._unmatched: tuple[MemberMark, ...] | None = None  # None: marks not loaded yet
        self._orphans: dict[str, Orphan] = {}
        self._closing: set[str] = set()  # orphans of this run whose pane is to close

    @property
    def _sessions(self) -> Path:
        return self._manifest_root / SESSIONS_DIR

    def members(self) -> list[Orphan]:
        """Every orphan, oldest spawn first."""
        return sorted(self._orphans.values(), key=lambda o: (o.mark.created_at, o.mark.session_id))

    def find(self, target: str) -> Orphan | None:
        """An orphan by session id, agent name or pane id."""
        for orphan in self._orphans.values():
            if target in (orphan.mark.session_id, orphan.mark.name, orphan.mark.pane_id):
                return orphan
        return None

    def name_taken(self, name: str) -> bool:
        """True while an orphan, or a mark not matched yet, holds the agent name."""
        pending = self._unmatched or ()
        return any(m.name == name for m in (*pending, *(o.mark for o in self._orphans.values())))

    async def check(self) -> None:
        """Load the marks of earlier runs once, then match them and the orphans with one list."""
        if self._unmatched is None:
            marks = await asyncio.to_thread(load_marks, self._sessions)
            current = self._run
            self._unmatched = tuple(
                m for m in marks if m.run != current and not self._known(m.session_id)
            )
        if not self._unmatched and not self._orphans:
            return
        for session_id in sorted(self._closing):
            await self._close_again(self._orphans[session_id])
        if not self._unmatched and not self._orphans:
            return
        try:
            agents = await self._control.list_agents()
        except HerdrError:
            return  # nothing is decided without a list; the next check tries again
        watched = (*self._unmatched, *(o.mark for o in self._orphans.values()))
        matched = match_marks(watched, agents)
        self._unmatched = ()
        now = self._clock.now()
        for mark in matched.running:
            if mark.session_id not in self._orphans:
                self._orphans[mark.session_id] = Orphan(mark=mark, found_at=now)
                _log.warning(
                    "member %s (%s) of a previous run still runs in pane %s: orphaned",
                    mark.session_id,
                    mark.name,
                    mark.pane_id,
                )
        for mark in matched.gone:
            if mark.session_id not in self._closing:  # those go once herdr closes them
                await self._forget(mark, ReleaseCause.GONE)

    def watch(self, mark: MemberMark) -> None:
        """Take a member of this run whose pane herdr did not close at its release: it may still
        run, so it is an orphan like those of a previous run (counted, shown, stoppable) until a
        check no longer lists its pane."""
        self._orphans[mark.session_id] = Orphan(mark=mark, found_at=self._clock.now())
        self._closing.add(mark.session_id)
        _log.warning(
            "member %s (%s) may still run in pane %s herdr did not close: orphaned until it closes",
            mark.session_id,
            mark.name,
            mark.pane_id,
        )

    async def stop(self, orphan: Orphan) -> ReleaseResult:
        """Close an orphan's pane and preserve its worktree; nothing of its run is replayed."""
        try:
            await close_own_pane(self._control, orphan.mark.name, orphan.mark.pane_id)
        except TargetNotFoundError:
            pass  # already gone: nothing left to close
        except HerdrError as exc:
            raise UnavailableError(
                "herdr cannot be reached; the orphaned member still runs",
                hint={"retry": f'fleet_stop(paneId="{orphan.mark.pane_id}")'},
            ) from exc
        return await self._forget(orphan.mark, ReleaseCause.LEAD_ABORT)

    async def _close_again(self, orphan: Orphan) -> None:
        """Ask herdr once more to close the pane a release of this run could not close."""
        try:
            await close_own_pane(self._control, orphan.mark.name, orphan.mark.pane_id)
        except TargetNotFoundError:
            pass  # gone meanwhile
        except HerdrError:
            return  # still open, or herdr cannot say: asked again at the next check
        _log.info(
            "member %s (%s): pane %s closed at last",
            orphan.mark.session_id,
            orphan.mark.name,
            orphan.mark.pane_id,
        )
        await self._forget(orphan.mark, ReleaseCause.GONE)

    async def _forget(self, mark: MemberMark, cause: ReleaseCause) -> ReleaseResult:
        self._orphans.pop(mark.session_id, None)
        self._closing.discard(mark.session_id)
        kept: dict[str, WorktreeAction] = {}
        if mark.worktree is not None:
            kept["worktree"] = WorktreeAction.PRESERVE
            await self._preserve(mark, cause)
        try:
            await asyncio.to_thread(remove_mark, self._sessions, mark.session_id)
        except FleetdError as exc:
            _log.warning("session %s: %s", mark.session_id, exc)
        return ReleaseResult(session_id=mark.session_id, cause=cause, orphaned=True, **kept)

    async def _preserve(self, mark: MemberMark, cause: ReleaseCause) -> None:
        """Write a manifest for the worktree, unless its release already wrote one."""
        tree = mark.worktree
        assert tree is not None
        root = self._manifest_root
        if await asyncio.to_thread(manifest_path(root, mark.session_id).exists):
            return  # its release already recorded it
        if not await asyncio.to_thread(tree.path.exists):
            return  # its release removed it (the pane was what could not be closed)
        try:
            manifest = PreservedWorktree(
                session_id=mark.session_id,
                owner=mark.owner,
                role=mark.role or "",
                profile=mark.profile,
                repository=str(tree.repo),
                path=str(tree.path),
                branch=tree.branch,
                base_commit=tree.base_commit,
                cause=cause,
                released_at=self._clock.now(),
                state=ORPHANED,
            )
            await asyncio.to_thread(write_manifest, root, manifest)
        except (FleetdError, ValueError) as exc:
            self._on_failure(f"manifest:{mark.session_id}")
            _log.warning("session %s: manifest not written: %s", mark.session_id, exc)
        _log.warning(
            "session %s of a previous run: worktree preserved at %s (%s)",
            mark.session_id,
            tree.path,
            cause.value,
        )
