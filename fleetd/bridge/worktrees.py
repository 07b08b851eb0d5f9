"""Member worktrees: the port, its value types and double, and the release policy applied to them.

Each member works in its own git worktree on a new branch cut from a base ref. Provisioning records
the base *commit*, not just the ref, so "commits after base" (WORK_PRODUCT_AT_RISK, M4 §4.2) stays
meaningful after the base ref moves on.

The :class:`Worktrees` port has a real adapter in its own module,
:class:`~fleetd.bridge.git_worktrees.GitWorktrees` (asyncio subprocesses running git; no business
branching), and a double here, :class:`FakeWorktrees`, that behaves the same way in memory. Both
refuse to remove a dirty worktree — git itself does unless ``--force`` is given, and fleetd never
gives it — so a worktree that turns dirty between the check and the removal survives.

:func:`release_worktree` is the one place that turns a release into a worktree effect: it checks
dirtiness, asks :mod:`fleetd.bridge.release` for the action, and removes only on REMOVE. Any failure
of the dirty-check is "could not tell" and preserves (invariant 7). A removed worktree's branch is
dropped only while it still points at the recorded base commit, so committed work is never deleted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fleetd.bridge.release import ReleaseCause, WorktreeAction, WorktreeReason, action_for
from fleetd.bridge.release import worktree_reason as _policy_reason
from fleetd.errors import WorktreeError
from fleetd.text import git_name

__all__ = [
    "FakeWorktrees",
    "Worktree",
    "WorktreeOutcome",
    "Worktrees",
    "check_arguments",
    "check_source",
    "release_worktree",
]

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Worktree:
    """A provisioned member worktree and the commit its branch started from."""

    repo: Path
    path: Path
    branch: str
    base_ref: str
    base_commit: str

    def __post_init__(self) -> None:
        if not self.branch or self.branch.startswith("-"):
            raise ValueError("branch must be a non-empty name not starting with '-'")
        if not _COMMIT.fullmatch(self.base_commit):
            raise ValueError("base_commit must be a full lowercase hex object id")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorktreeOutcome:
    """What release did with a worktree; ``dirty`` is None when the dirty-check failed."""

    action: WorktreeAction
    dirty: bool | None
    reason: WorktreeReason
    error: Exception | None = field(default=None, compare=False, repr=False)
    """The failure behind DIRTY_CHECK_FAILED or REMOVE_FAILED, for local logs only."""


class Worktrees(Protocol):
    """Port: the git operations the bridge needs on member worktrees."""

    async def provision(self, *, repo: Path, base: str, branch: str, path: Path) -> Worktree:
        """Create ``branch`` from ``base`` and check it out at ``path``."""
        ...

    async def is_dirty(self, worktree: Worktree) -> bool:
        """True when the worktree has uncommitted changes or untracked (not ignored) files."""
        ...

    async def commits_ahead(self, worktree: Worktree) -> int:
        """How many commits the branch holds after the recorded base commit."""
        ...

    async def remove(self, worktree: Worktree, *, delete_branch: bool = False) -> None:
        """Remove a clean worktree; with ``delete_branch``, drop the branch if still at base."""
        ...


async def release_worktree(
    worktrees: Worktrees, worktree: Worktree, cause: ReleaseCause, *, pane_closed: bool = True
) -> WorktreeOutcome:
    """Apply the release policy: check dirtiness, then remove only when the policy says REMOVE.
    A worktree whose member's pane herdr did not close is kept (its agent may still run)."""
    if not pane_closed:
        return WorktreeOutcome(
            action=WorktreeAction.PRESERVE, dirty=None, reason=WorktreeReason.PANE_OPEN
        )
    error: Exception | None = None
    dirty: bool | None
    try:
        dirty = await worktrees.is_dirty(worktree)
    # Any failure of the check means "could not tell", which must preserve (invariant 7).
    except Exception as exc:  # noqa: BLE001
        dirty, error = None, exc
    reason = _policy_reason(cause, dirty)
    if action_for(reason) is WorktreeAction.PRESERVE:
        return WorktreeOutcome(
            action=WorktreeAction.PRESERVE, dirty=dirty, reason=reason, error=error
        )
    try:
        await worktrees.remove(worktree, delete_branch=True)
    # Whatever went wrong, the worktree may still be on disk, so it is reported as preserved.
    except Exception as exc:  # noqa: BLE001
        return WorktreeOutcome(
            action=WorktreeAction.PRESERVE,
            dirty=dirty,
            reason=WorktreeReason.REMOVE_FAILED,
            error=exc,
        )
    return WorktreeOutcome(action=WorktreeAction.REMOVE, dirty=dirty, reason=reason)


def check_arguments(*, repo: Path, base: str, branch: str, path: Path) -> None:
    """Refuse relative paths, names git would read as options, and NUL (no argument of a
    process can hold one)."""
    check_source(repo=repo, base=base)
    if not git_name(branch):
        raise WorktreeError("provision", "invalid_argument")
    if not path.is_absolute() or "\0" in str(path):
        raise WorktreeError("provision", "invalid_argument")


def check_source(*, repo: Path, base: str) -> None:
    """Refuse a repository and base ref a spawn may not ask for: a relative path, a ref git
    would read as an option, NUL anywhere. A spawn asks this before it holds a slot."""
    if not git_name(base):
        raise WorktreeError("provision", "invalid_argument")
    if not repo.is_absolute() or "\0" in str(repo):
        raise WorktreeError("provision", "invalid_argument")


class FakeWorktrees:
    """In-memory :class:`Worktrees` for unit tests of the core; tests steer it with its methods."""

    def __init__(self) -> None:
        self.live: dict[Path, Worktree] = {}
        self.branches: dict[tuple[Path, str], int] = {}
        """Commits after base per (repo, branch), for every branch not deleted."""
        self.removed: list[Path] = []
        self.deleted_branches: list[str] = []
        self._dirty: set[Path] = set()
        self._check_fails: set[Path] = set()
        self._remove_fails: set[Path] = set()

    def mark_dirty(self, path: Path, dirty: bool = True) -> None:
        """Make the worktree at ``path`` report uncommitted work (or stop doing so)."""
        (self._dirty.add if dirty else self._dirty.discard)(path)

    def fail_dirty_check(self, path: Path, failing: bool = True) -> None:
        """Make ``is_dirty`` raise for ``path``, as when git cannot read the worktree."""
        (self._check_fails.add if failing else self._check_fails.discard)(path)

    def fail_remove(self, path: Path, failing: bool = True) -> None:
        """Make ``remove`` raise for ``path``."""
        (self._remove_fails.add if failing else self._remove_fails.discard)(path)

    def add_commits(self, worktree: Worktree, count: int = 1) -> None:
        """Record ``count`` new commits on the worktree's branch."""
        self.branches[(worktree.repo, worktree.branch)] += count

    async def provision(self, *, repo: Path, base: str, branch: str, path: Path) -> Worktree:
        check_arguments(repo=repo, base=base, branch=branch, path=path)
        if path in self.live or (repo, branch) in self.branches:
            raise WorktreeError("provision", "git_failed", returncode=128)
        commit = hashlib.sha1(f"{repo}\0{base}".encode(), usedforsecurity=False).hexdigest()
        worktree = Worktree(repo=repo, path=path, branch=branch, base_ref=base, base_commit=commit)
        self.live[path] = worktree
        self.branches[(repo, branch)] = 0
        return worktree

    async def is_dirty(self, worktree: Worktree) -> bool:
        if worktree.path in self._check_fails or worktree.path not in self.live:
            raise WorktreeError("is_dirty", "git_failed", returncode=128)
        return worktree.path in self._dirty

    async def commits_ahead(self, worktree: Worktree) -> int:
        try:
            return self.branches[(worktree.repo, worktree.branch)]
        except KeyError:
            raise WorktreeError("commits_ahead", "git_failed", returncode=128) from None

    async def remove(self, worktree: Worktree, *, delete_branch: bool = False) -> None:
        path = worktree.path
        if path in self._remove_fails or path not in self.live or path in self._dirty:
            raise WorktreeError("remove", "git_failed", returncode=128)
        del self.live[path]
        self.removed.append(path)
        key = (worktree.repo, worktree.branch)
        if delete_branch and self.branches.get(key) == 0:
            del self.branches[key]
            self.deleted_branches.append(worktree.branch)
