"""The release-cause policy of M4 §5.3 and the corrected Unit 2 criteria 15 and 16."""

from __future__ import annotations

import ast
import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.bridge import release
from fleetd.bridge.release import (
    PRESERVING_CAUSES,
    ReleaseCause,
    WorktreeAction,
    WorktreeReason,
    action_for,
    stop_cause,
    worktree_action,
    worktree_reason,
)

C = ReleaseCause
R = WorktreeReason
REMOVE = WorktreeAction.REMOVE
KEEP = WorktreeAction.PRESERVE

# cause -> (clean, dirty, dirty-check failed); every cause appears exactly once.
POLICY: dict[ReleaseCause, tuple[WorktreeReason, WorktreeReason, WorktreeReason]] = {
    C.SPAWN_ROLLBACK: (R.ROLLED_BACK, R.DIRTY, R.DIRTY_CHECK_FAILED),
    C.COMPLETED: (R.CLEAN, R.DIRTY, R.DIRTY_CHECK_FAILED),
    C.NEVER_READY: (R.PRESERVING_CAUSE,) * 3,
    C.GONE: (R.PRESERVING_CAUSE,) * 3,
    C.TURN_FAILED: (R.PRESERVING_CAUSE,) * 3,
    C.LEAD_ABORT: (R.PRESERVING_CAUSE,) * 3,
    C.RELEASE_WITH_PENDING_TASKS: (R.PRESERVING_CAUSE,) * 3,
    C.SHUTDOWN: (R.PRESERVING_CAUSE,) * 3,
}

CASES = [
    (cause, dirty, reasons[index])
    for cause, reasons in POLICY.items()
    for index, dirty in enumerate((False, True, None))
]


def test_policy_table_covers_every_cause() -> None:
    """The table below names every release cause, so a new cause cannot slip past it."""
    assert set(POLICY) == set(ReleaseCause)


def test_cause_values_are_stable_lowercase() -> None:
    """Cause values reach JSON and SQL, so they are the lowercase member names."""
    assert [c.value for c in ReleaseCause] == [c.name.lower() for c in ReleaseCause]


@pytest.mark.parametrize(("cause", "dirty", "reason"), CASES)
def test_worktree_policy_table(cause: ReleaseCause, dirty: bool | None, reason: R) -> None:
    """Each cause × dirty observation yields the reason and action of M4 §5.3 (criterion 15)."""
    assert worktree_reason(cause, dirty) is reason
    assert worktree_action(cause, dirty) is action_for(reason)


@pytest.mark.parametrize(
    ("cause", "dirty", "action"),
    [
        (C.SPAWN_ROLLBACK, False, REMOVE),
        (C.COMPLETED, False, REMOVE),
        (C.COMPLETED, True, KEEP),
        (C.COMPLETED, None, KEEP),
        (C.SPAWN_ROLLBACK, None, KEEP),
        (C.SHUTDOWN, False, KEEP),
        (C.NEVER_READY, False, KEEP),
    ],
)
def test_headline_cases(cause: ReleaseCause, dirty: bool | None, action: WorktreeAction) -> None:
    """Rollback and clean completion remove; dirty, unknown and abnormal causes preserve."""
    assert worktree_action(cause, dirty) is action


@given(cause=st.sampled_from(ReleaseCause), dirty=st.sampled_from([True, None]))
def test_dirty_or_unknown_never_removes(cause: ReleaseCause, dirty: bool | None) -> None:
    """No cause removes a worktree that is dirty or whose dirty-check failed (invariant 7)."""
    assert worktree_action(cause, dirty) is KEEP


@given(cause=st.sampled_from(sorted(PRESERVING_CAUSES)), dirty=st.sampled_from([True, False, None]))
def test_preserving_causes_never_remove(cause: ReleaseCause, dirty: bool | None) -> None:
    """Abnormal causes and shutdown preserve the worktree whatever its state."""
    assert worktree_action(cause, dirty) is KEEP


def test_only_rollback_and_completed_can_remove() -> None:
    """Exactly SPAWN_ROLLBACK and COMPLETED are outside the preserving set."""
    assert set(ReleaseCause) - PRESERVING_CAUSES == {C.SPAWN_ROLLBACK, C.COMPLETED}


def test_remove_failed_preserves() -> None:
    """A removal git refused leaves the worktree preserved."""
    assert action_for(R.REMOVE_FAILED) is KEEP


@pytest.mark.parametrize(
    ("state", "pending", "cause"),
    [
        ("ready", False, C.COMPLETED),
        ("done", False, C.COMPLETED),
        ("spawning", False, C.LEAD_ABORT),
        ("busy", False, C.LEAD_ABORT),
        ("failed", False, C.LEAD_ABORT),
        ("released", False, C.LEAD_ABORT),
        ("ready", True, C.RELEASE_WITH_PENDING_TASKS),
        ("done", True, C.RELEASE_WITH_PENDING_TASKS),
        ("spawning", True, C.RELEASE_WITH_PENDING_TASKS),
        ("busy", True, C.RELEASE_WITH_PENDING_TASKS),
        ("failed", True, C.RELEASE_WITH_PENDING_TASKS),
        ("READY", False, C.COMPLETED),
        ("no-such-state", False, C.LEAD_ABORT),
    ],
)
def test_stop_cause_is_state_aware(state: str, pending: bool, cause: ReleaseCause) -> None:
    """Explicit stop completes only an at-rest session without pending tasks (criterion 16)."""
    assert stop_cause(state, pending) is cause


@given(state=st.text(max_size=12), pending=st.booleans(), dirty=st.sampled_from([True, None]))
def test_stop_never_removes_unsafe_worktrees(state: str, pending: bool, dirty: bool | None) -> None:
    """Whatever the state, an explicit stop never removes a dirty or unchecked worktree."""
    assert worktree_action(stop_cause(state, pending), dirty) is KEEP


@given(state=st.text(max_size=12), dirty=st.sampled_from([True, False, None]))
def test_pending_tasks_always_preserve(state: str, dirty: bool | None) -> None:
    """A stop with any pending task preserves the worktree, even a clean one."""
    assert worktree_action(stop_cause(state, True), dirty) is KEEP


def test_policy_module_is_pure() -> None:
    """The policy imports nothing that could do I/O, read time or log."""
    tree = ast.parse(inspect.getsource(release))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "enum"}
