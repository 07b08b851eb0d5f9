"""The git adapter of the :class:`~fleetd.bridge.worktrees.Worktrees` port.

One ``git`` subprocess per call (asyncio), bounded by a timeout, with no business branching: the
release policy lives beside the port in :mod:`fleetd.bridge.worktrees`. Git itself refuses to
remove a dirty worktree unless ``--force`` is given, and this adapter never gives it.

Git's stderr may name paths; it is kept in ``WorktreeError.detail`` for local logs and never enters
the error's text, which carries only a bounded operation and reason.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from fleetd.bridge.worktrees import Worktree, check_arguments
from fleetd.errors import WorktreeError

__all__ = ["GitWorktrees"]

# Variables that would point git at another repository than the one we name.
_GIT_LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CEILING_DIRECTORIES",
)


class GitWorktrees:
    """The real adapter: one ``git`` subprocess per call, bounded by ``timeout_seconds``."""

    def __init__(self, *, git: str = "git", timeout_seconds: float = 60.0) -> None:
        self._git = git
        self._timeout = timeout_seconds

    async def provision(self, *, repo: Path, base: str, branch: str, path: Path) -> Worktree:
        op = "provision"
        check_arguments(repo=repo, base=base, branch=branch, path=path)
        out = await self._run(op, repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
        commit = out.strip()
        await self._run(
            op, repo, "worktree", "add", "--quiet", "-b", branch, "--", str(path), commit
        )
        return Worktree(repo=repo, path=path, branch=branch, base_ref=base, base_commit=commit)

    async def is_dirty(self, worktree: Worktree) -> bool:
        out = await self._run(
            "is_dirty",
            worktree.path,
            "status",
            "--porcelain=v1",
            "--untracked-files=normal",
            "--ignore-submodules=none",
            ceiling=worktree.path.parent,
        )
        return bool(out.strip())

    async def commits_ahead(self, worktree: Worktree) -> int:
        span = f"{worktree.base_commit}..refs/heads/{worktree.branch}"
        out = await self._run("commits_ahead", worktree.repo, "rev-list", "--count", span)
        return int(out.strip())

    async def remove(self, worktree: Worktree, *, delete_branch: bool = False) -> None:
        op, repo, ref = "remove", worktree.repo, f"refs/heads/{worktree.branch}"
        await self._run(op, repo, "worktree", "remove", "--", str(worktree.path))
        if not delete_branch:
            return
        out = await self._run(op, repo, "for-each-ref", "--format=%(refname) %(objectname)", ref)
        if f"{ref} {worktree.base_commit}" in out.splitlines():
            # The old-value argument makes git refuse if the branch moved since we looked.
            await self._run(op, repo, "update-ref", "-d", ref, worktree.base_commit)

    async def _run(self, operation: str, cwd: Path, *args: str, ceiling: Path | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
        env |= {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        if ceiling is not None:
            # Stop git from walking up into an enclosing repository when cwd is not a worktree.
            env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
        try:
            proc = await asyncio.create_subprocess_exec(
                self._git,
                "-C",
                str(cwd),
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise WorktreeError(operation, "git_unavailable", detail=str(exc)) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise WorktreeError(operation, "timeout") from None
        if proc.returncode != 0:
            detail = err.decode("utf-8", "replace").strip()
            raise WorktreeError(operation, "git_failed", detail=detail, returncode=proc.returncode)
        return out.decode("utf-8", "replace")
