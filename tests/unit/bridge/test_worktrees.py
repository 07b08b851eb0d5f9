"""Member worktrees on real git and on the fake, and the release policy applied to them."""

from __future__ import annotations

import ast
import inspect
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import fleetd.bridge.git_worktrees as adapter
import fleetd.bridge.worktrees as port
from fleetd.bridge.git_worktrees import GitWorktrees
from fleetd.bridge.release import ReleaseCause, WorktreeAction, WorktreeReason, worktree_action
from fleetd.bridge.worktrees import (
    FakeWorktrees,
    Worktree,
    Worktrees,
    release_worktree,
)
from fleetd.errors import WorktreeError

C = ReleaseCause


@pytest.fixture(autouse=True)
def hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Run every git in these tests with no user or system config and a fixed identity."""
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "fleetd tests")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "tests@fleetd.invalid")


def git(cwd: Path, *args: str) -> str:
    """Run git synchronously for test setup and inspection."""
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    """A repository on branch main with one commit holding README and .gitignore."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    (path / "README").write_text("hello\n")
    (path / ".gitignore").write_text("build/\n")
    git(path, "add", "README", ".gitignore")
    git(path, "commit", "--quiet", "-m", "init")
    return path


def commit_file(where: Path, name: str = "work.txt") -> None:
    """Commit one new file in the repository or worktree at ``where``."""
    (where / name).write_text("work\n")
    git(where, "add", name)
    git(where, "commit", "--quiet", "-m", f"add {name}")


@dataclass
class Harness:
    """One backend plus the ways a test changes a worktree behind its back."""

    worktrees: Worktrees
    repo: Path
    root: Path
    make_dirty: Callable[[Worktree], None]
    add_commit: Callable[[Worktree], None]
    break_check: Callable[[Worktree], None]
    branch_exists: Callable[[Worktree], bool]


def _git_harness(tmp_path: Path) -> Harness:
    def branch_exists(wt: Worktree) -> bool:
        return bool(git(wt.repo, "branch", "--list", wt.branch))

    def make_dirty(wt: Worktree) -> None:
        (wt.path / "scratch.txt").write_text("x")

    def add_commit(wt: Worktree) -> None:
        commit_file(wt.path, f"work{len(list(wt.path.glob('work*')))}.txt")

    return Harness(
        worktrees=GitWorktrees(),
        repo=make_repo(tmp_path / "repo"),
        root=tmp_path / "worktrees",
        make_dirty=make_dirty,
        add_commit=add_commit,
        break_check=lambda wt: (wt.path / ".git").unlink(),
        branch_exists=branch_exists,
    )


def _fake_harness(tmp_path: Path) -> Harness:
    fake = FakeWorktrees()
    return Harness(
        worktrees=fake,
        repo=tmp_path / "repo",
        root=tmp_path / "worktrees",
        make_dirty=lambda wt: fake.mark_dirty(wt.path),
        add_commit=fake.add_commits,
        break_check=lambda wt: fake.fail_dirty_check(wt.path),
        branch_exists=lambda wt: (wt.repo, wt.branch) in fake.branches,
    )


@pytest.fixture(params=["git", "fake"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    """Each contract test runs once on real git and once on the fake."""
    build = _git_harness if request.param == "git" else _fake_harness
    return build(tmp_path)


async def provision(h: Harness, name: str = "m1") -> Worktree:
    return await h.worktrees.provision(
        repo=h.repo, base="main", branch=f"fleet/{name}", path=h.root / name
    )


# --- the port contract, on both backends ------------------------------------------------------


async def test_provision_records_base(harness: Harness) -> None:
    """Provision cuts a new branch and records the base ref and a full commit id."""
    wt = await provision(harness)
    assert (wt.repo, wt.path, wt.branch, wt.base_ref) == (
        harness.repo,
        harness.root / "m1",
        "fleet/m1",
        "main",
    )
    assert len(wt.base_commit) == 40
    assert harness.branch_exists(wt)


async def test_fresh_worktree_is_clean_with_nothing_ahead(harness: Harness) -> None:
    """A just-provisioned worktree is clean and its branch holds no commits after base."""
    wt = await provision(harness)
    assert await harness.worktrees.is_dirty(wt) is False
    assert await harness.worktrees.commits_ahead(wt) == 0


async def test_dirty_worktree_reported(harness: Harness) -> None:
    """Uncommitted work makes the worktree dirty."""
    wt = await provision(harness)
    harness.make_dirty(wt)
    assert await harness.worktrees.is_dirty(wt) is True


async def test_commits_ahead_counts_branch_commits(harness: Harness) -> None:
    """Each commit on the member branch counts as one commit after base."""
    wt = await provision(harness)
    harness.add_commit(wt)
    harness.add_commit(wt)
    assert await harness.worktrees.commits_ahead(wt) == 2
    assert await harness.worktrees.is_dirty(wt) is False


async def test_remove_clean_drops_branch_still_at_base(harness: Harness) -> None:
    """Removing a clean worktree with delete_branch drops a branch that never moved."""
    wt = await provision(harness)
    await harness.worktrees.remove(wt, delete_branch=True)
    assert not harness.branch_exists(wt)
    if isinstance(harness.worktrees, GitWorktrees):
        assert not wt.path.exists()
        assert str(wt.path) not in git(harness.repo, "worktree", "list")


async def test_remove_keeps_branch_with_commits(harness: Harness) -> None:
    """A branch holding commits after base survives removal even when deletion is asked."""
    wt = await provision(harness)
    harness.add_commit(wt)
    await harness.worktrees.remove(wt, delete_branch=True)
    assert harness.branch_exists(wt)
    assert await harness.worktrees.commits_ahead(wt) == 1


async def test_remove_keeps_branch_unless_asked(harness: Harness) -> None:
    """Without delete_branch the branch stays, even at base."""
    wt = await provision(harness)
    await harness.worktrees.remove(wt)
    assert harness.branch_exists(wt)


async def test_remove_refuses_dirty_worktree(harness: Harness) -> None:
    """Remove never forces: a dirty worktree is refused and left in place."""
    wt = await provision(harness)
    harness.make_dirty(wt)
    with pytest.raises(WorktreeError) as caught:
        await harness.worktrees.remove(wt, delete_branch=True)
    assert (caught.value.operation, caught.value.reason) == ("remove", "git_failed")
    assert await harness.worktrees.is_dirty(wt) is True
    assert harness.branch_exists(wt)


async def test_broken_dirty_check_raises(harness: Harness) -> None:
    """A worktree git cannot read raises WorktreeError rather than claiming clean."""
    wt = await provision(harness)
    harness.break_check(wt)
    with pytest.raises(WorktreeError):
        await harness.worktrees.is_dirty(wt)


async def test_provision_refuses_taken_branch_or_path(harness: Harness) -> None:
    """An existing branch or an occupied path is refused."""
    wt = await provision(harness)
    with pytest.raises(WorktreeError):
        await harness.worktrees.provision(
            repo=harness.repo, base="main", branch=wt.branch, path=harness.root / "other"
        )
    with pytest.raises(WorktreeError):
        await harness.worktrees.provision(
            repo=harness.repo, base="main", branch="fleet/other", path=wt.path
        )


@pytest.mark.parametrize(
    ("base", "branch", "relative"),
    [("-x", "fleet/a", False), ("main", "--force", False), ("", "b", False), ("main", "b", True)],
)
async def test_provision_refuses_bad_arguments(
    harness: Harness, base: str, branch: str, relative: bool
) -> None:
    """Names that git would read as options, empty names and relative paths are refused."""
    path = Path("rel/wt") if relative else harness.root / "x"
    with pytest.raises(WorktreeError) as caught:
        await harness.worktrees.provision(repo=harness.repo, base=base, branch=branch, path=path)
    assert caught.value.reason == "invalid_argument"


# --- real git only ------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


async def test_base_commit_is_resolved_sha(repo: Path, tmp_path: Path) -> None:
    """The recorded base commit is the sha the base ref named at provision time."""
    expected = git(repo, "rev-parse", "main")
    wt = await GitWorktrees().provision(
        repo=repo, base="main", branch="fleet/m1", path=tmp_path / "wt" / "m1"
    )
    assert wt.base_commit == expected
    assert git(wt.path, "rev-parse", "HEAD") == expected


async def test_base_commit_survives_base_moving(repo: Path, tmp_path: Path) -> None:
    """Commits landing on the base ref later do not count as member work."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    commit_file(repo, "later.txt")
    assert await worktrees.commits_ahead(wt) == 0
    assert wt.base_commit != git(repo, "rev-parse", "main")


@pytest.mark.parametrize("change", ["untracked", "modified", "staged", "deleted"])
async def test_each_kind_of_change_is_dirty(repo: Path, tmp_path: Path, change: str) -> None:
    """Untracked, modified, staged and deleted files all make a worktree dirty."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    if change == "untracked":
        (wt.path / "new.txt").write_text("x")
    elif change == "modified":
        (wt.path / "README").write_text("changed\n")
    elif change == "staged":
        (wt.path / "new.txt").write_text("x")
        git(wt.path, "add", "new.txt")
    else:
        (wt.path / "README").unlink()
    assert await worktrees.is_dirty(wt) is True


async def test_ignored_files_are_not_dirty(repo: Path, tmp_path: Path) -> None:
    """Files the repository ignores (build output) do not make the worktree dirty."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    (wt.path / "build").mkdir()
    (wt.path / "build" / "out.o").write_text("x")
    assert await worktrees.is_dirty(wt) is False


async def test_broken_worktree_inside_repo_does_not_read_enclosing_repo(repo: Path) -> None:
    """A worktree nested in another repository never borrows that repository's status."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(
        repo=repo, base="main", branch="fleet/m1", path=repo / ".worktrees" / "m1"
    )
    (wt.path / ".git").unlink()
    with pytest.raises(WorktreeError) as caught:
        await worktrees.is_dirty(wt)
    assert caught.value.operation == "is_dirty"


async def test_error_text_carries_no_git_output(repo: Path, tmp_path: Path) -> None:
    """git's stderr stays in ``detail`` for local logs; the error text is bounded words only."""
    with pytest.raises(WorktreeError) as caught:
        await GitWorktrees().provision(
            repo=repo, base="no-such-ref", branch="fleet/m1", path=tmp_path / "m1"
        )
    assert str(caught.value) == "provision: git_failed"
    assert caught.value.returncode not in (None, 0)
    assert not (tmp_path / "m1").exists()


async def test_missing_git_is_worktree_error(repo: Path, tmp_path: Path) -> None:
    """A git binary that cannot be started is a WorktreeError, not an OSError."""
    worktrees = GitWorktrees(git=str(tmp_path / "no-such-git"))
    with pytest.raises(WorktreeError) as caught:
        await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    assert caught.value.reason == "git_unavailable"


async def test_hung_git_times_out(repo: Path, tmp_path: Path) -> None:
    """A git that never answers is killed at the timeout and reported as such."""
    hung = tmp_path / "hung-git"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    worktrees = GitWorktrees(git=str(hung), timeout_seconds=0.2)
    with pytest.raises(WorktreeError) as caught:
        await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    assert caught.value.reason == "timeout"


def test_worktree_value_validates() -> None:
    """A Worktree needs a full hex base commit and a branch that is not an option."""
    ok: dict[str, Any] = {"repo": Path("/r"), "path": Path("/w"), "branch": "b", "base_ref": "main"}
    Worktree(**ok, base_commit="a" * 40)
    with pytest.raises(ValueError, match="base_commit"):
        Worktree(**ok, base_commit="abc")
    with pytest.raises(ValueError, match="branch"):
        Worktree(**{**ok, "branch": "-b"}, base_commit="a" * 40)


# --- the release policy applied -----------------------------------------------------------------


@pytest.mark.parametrize("cause", list(ReleaseCause))
@pytest.mark.parametrize("dirty", [False, True, None])
async def test_release_follows_policy_on_fake(
    tmp_path: Path, cause: ReleaseCause, dirty: bool | None
) -> None:
    """For every cause × dirty observation, release removes exactly when the policy says so."""
    fake = FakeWorktrees()
    wt = await fake.provision(repo=tmp_path, base="main", branch="fleet/m1", path=tmp_path / "m1")
    if dirty is None:
        fake.fail_dirty_check(wt.path)
    elif dirty:
        fake.mark_dirty(wt.path)
    outcome = await release_worktree(fake, wt, cause)
    assert outcome.action is worktree_action(cause, dirty)
    assert outcome.dirty is dirty
    assert (wt.path in fake.live) is (outcome.action is WorktreeAction.PRESERVE)


async def test_spawn_rollback_removes_clean_worktree_and_branch(repo: Path, tmp_path: Path) -> None:
    """SPAWN_ROLLBACK removes the clean worktree and its untouched branch."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    outcome = await release_worktree(worktrees, wt, C.SPAWN_ROLLBACK)
    assert (outcome.action, outcome.reason, outcome.dirty) == (
        WorktreeAction.REMOVE,
        WorktreeReason.ROLLED_BACK,
        False,
    )
    assert not wt.path.exists()
    assert not git(repo, "branch", "--list", "fleet/m1")


async def test_completed_clean_removes_worktree_keeps_commits(repo: Path, tmp_path: Path) -> None:
    """COMPLETED on a clean worktree removes it; the branch and its commits stay in the repo."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    commit_file(wt.path)
    outcome = await release_worktree(worktrees, wt, C.COMPLETED)
    assert (outcome.action, outcome.reason) == (WorktreeAction.REMOVE, WorktreeReason.CLEAN)
    assert not wt.path.exists()
    assert git(repo, "rev-list", "--count", f"{wt.base_commit}..fleet/m1") == "1"


async def test_completed_dirty_preserves(repo: Path, tmp_path: Path) -> None:
    """COMPLETED on a dirty worktree preserves it with its uncommitted work (CB-576)."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    (wt.path / "unsaved.txt").write_text("precious")
    outcome = await release_worktree(worktrees, wt, C.COMPLETED)
    assert (outcome.action, outcome.reason, outcome.dirty) == (
        WorktreeAction.PRESERVE,
        WorktreeReason.DIRTY,
        True,
    )
    assert (wt.path / "unsaved.txt").read_text() == "precious"


@pytest.mark.parametrize("cause", [C.COMPLETED, C.SPAWN_ROLLBACK])
async def test_failed_dirty_check_preserves(
    repo: Path, tmp_path: Path, cause: ReleaseCause
) -> None:
    """When git cannot tell whether the worktree is dirty, it is preserved (CB-581)."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    (wt.path / ".git").unlink()
    outcome = await release_worktree(worktrees, wt, cause)
    assert (outcome.action, outcome.reason, outcome.dirty) == (
        WorktreeAction.PRESERVE,
        WorktreeReason.DIRTY_CHECK_FAILED,
        None,
    )
    assert isinstance(outcome.error, WorktreeError)
    assert (wt.path / "README").exists()


async def test_shutdown_preserves_clean_worktree(repo: Path, tmp_path: Path) -> None:
    """SHUTDOWN preserves even a clean worktree."""
    worktrees = GitWorktrees()
    wt = await worktrees.provision(repo=repo, base="main", branch="fleet/m1", path=tmp_path / "m1")
    outcome = await release_worktree(worktrees, wt, C.SHUTDOWN)
    assert (outcome.action, outcome.reason) == (
        WorktreeAction.PRESERVE,
        WorktreeReason.PRESERVING_CAUSE,
    )
    assert wt.path.is_dir()


async def test_refused_removal_is_reported_preserved(tmp_path: Path) -> None:
    """If removal fails after a clean check, the outcome says the worktree is still there."""
    fake = FakeWorktrees()
    wt = await fake.provision(repo=tmp_path, base="main", branch="b", path=tmp_path / "m1")
    fake.fail_remove(wt.path)
    outcome = await release_worktree(fake, wt, C.COMPLETED)
    assert (outcome.action, outcome.reason, outcome.dirty) == (
        WorktreeAction.PRESERVE,
        WorktreeReason.REMOVE_FAILED,
        False,
    )
    assert wt.path in fake.live


class ExplodingCheck(FakeWorktrees):
    """A port whose dirty-check fails with something other than WorktreeError."""

    async def is_dirty(self, worktree: Worktree) -> bool:
        raise RuntimeError("unexpected")


async def test_any_dirty_check_failure_preserves(tmp_path: Path) -> None:
    """Even an unexpected exception from the dirty-check means preserve, never remove."""
    fake = ExplodingCheck()
    wt = await fake.provision(repo=tmp_path, base="main", branch="b", path=tmp_path / "m1")
    outcome = await release_worktree(fake, wt, C.SPAWN_ROLLBACK)
    assert (outcome.action, outcome.dirty) == (WorktreeAction.PRESERVE, None)
    assert isinstance(outcome.error, RuntimeError)
    assert fake.removed == []


def test_the_port_module_holds_no_git_adapter() -> None:
    """The port, its double and the release policy run no process; git lives in its own adapter."""

    def imported(module: ModuleType) -> set[str]:
        tree = ast.parse(inspect.getsource(module))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        return names | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}

    assert not imported(port) & {"asyncio", "os", "subprocess"}
    assert not hasattr(port, "GitWorktrees")
    assert {"asyncio", "fleetd.bridge.worktrees"} <= imported(adapter)
    assert adapter.GitWorktrees.__module__ == "fleetd.bridge.git_worktrees"
