"""Why a member was released, and what that means for its worktree (M4 §5.3).

Theory of operation
-------------------
Every release names a :class:`ReleaseCause`. The cause and one observation — whether the worktree
holds uncommitted or untracked work — decide whether the worktree is removed or preserved:

=========================  ===========  ===========  =====================
cause                      clean        dirty        dirty-check failed
=========================  ===========  ===========  =====================
SPAWN_ROLLBACK             remove       preserve     preserve
COMPLETED                  remove       preserve     preserve
any other cause            preserve     preserve     preserve
=========================  ===========  ===========  =====================

The table is the corrected acceptance criterion 15 of M4 Unit 2: a COMPLETED release removes a
worktree only when it is clean (CB-576), and a failed dirty-check counts as "could not tell", never
as "clean" (CB-581). SPAWN_ROLLBACK follows the same rule: nothing was delivered, so the worktree
should be clean, but if it is not, deleting it is the one mistake that cannot be undone.

Explicit stop is state-aware (criterion 16): :func:`stop_cause` picks COMPLETED only for a session
at rest (READY or DONE) with no pending task; everything else — including a state this module does
not know — gets a preserving cause.

This module is pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "PRESERVING_CAUSES",
    "ReleaseCause",
    "WorktreeAction",
    "WorktreeReason",
    "action_for",
    "stop_cause",
    "worktree_action",
    "worktree_reason",
]


class ReleaseCause(StrEnum):
    """Why a member session was released."""

    SPAWN_ROLLBACK = "spawn_rollback"
    COMPLETED = "completed"
    NEVER_READY = "never_ready"
    GONE = "gone"
    TURN_FAILED = "turn_failed"
    LEAD_ABORT = "lead_abort"
    RELEASE_WITH_PENDING_TASKS = "release_with_pending_tasks"
    SHUTDOWN = "shutdown"


class WorktreeAction(StrEnum):
    """What release does with a provisioned worktree."""

    REMOVE = "remove"
    PRESERVE = "preserve"


class WorktreeReason(StrEnum):
    """Why the worktree got its action; bounded, safe for logs, metrics labels and tool output."""

    ROLLED_BACK = "rolled_back"
    CLEAN = "clean"
    DIRTY = "dirty"
    DIRTY_CHECK_FAILED = "dirty_check_failed"
    PRESERVING_CAUSE = "preserving_cause"
    REMOVE_FAILED = "remove_failed"
    """Not a policy result: the policy said remove, git refused, and the worktree is still there."""
    PANE_OPEN = "pane_open"
    """Not a policy result: herdr did not close the member's pane, so its agent may still work in
    the worktree; it is kept whatever the cause."""


PRESERVING_CAUSES: frozenset[ReleaseCause] = frozenset(ReleaseCause) - {
    ReleaseCause.SPAWN_ROLLBACK,
    ReleaseCause.COMPLETED,
}
"""Causes that preserve the worktree whatever its state."""

_CLEAN_REASON: dict[ReleaseCause, WorktreeReason] = {
    ReleaseCause.SPAWN_ROLLBACK: WorktreeReason.ROLLED_BACK,
    ReleaseCause.COMPLETED: WorktreeReason.CLEAN,
}

_ACTION: dict[WorktreeReason, WorktreeAction] = {
    WorktreeReason.ROLLED_BACK: WorktreeAction.REMOVE,
    WorktreeReason.CLEAN: WorktreeAction.REMOVE,
    WorktreeReason.DIRTY: WorktreeAction.PRESERVE,
    WorktreeReason.DIRTY_CHECK_FAILED: WorktreeAction.PRESERVE,
    WorktreeReason.PRESERVING_CAUSE: WorktreeAction.PRESERVE,
    WorktreeReason.REMOVE_FAILED: WorktreeAction.PRESERVE,
    WorktreeReason.PANE_OPEN: WorktreeAction.PRESERVE,
}

# Session states (lowercase values of the session FSM's enum) in which a stop is a normal
# completion. Every other state, known or not, gets a preserving cause.
_AT_REST = frozenset({"ready", "done"})


def worktree_reason(cause: ReleaseCause, dirty: bool | None) -> WorktreeReason:
    """The rule of the table above that applies; ``dirty=None`` means the dirty-check failed."""
    if cause in PRESERVING_CAUSES:
        return WorktreeReason.PRESERVING_CAUSE
    if dirty is None:
        return WorktreeReason.DIRTY_CHECK_FAILED
    if dirty:
        return WorktreeReason.DIRTY
    return _CLEAN_REASON[cause]


def worktree_action(cause: ReleaseCause, dirty: bool | None) -> WorktreeAction:
    """REMOVE only for SPAWN_ROLLBACK or COMPLETED on a worktree known to be clean."""
    return _ACTION[worktree_reason(cause, dirty)]


def action_for(reason: WorktreeReason) -> WorktreeAction:
    """The action a reason stands for."""
    return _ACTION[reason]


def stop_cause(session_state: str, has_pending_tasks: bool) -> ReleaseCause:
    """The cause of an explicit ``fleet_stop``.

    Pending tasks always win (RELEASE_WITH_PENDING_TASKS). A session at rest (READY or DONE) is a
    normal COMPLETED release. SPAWNING, BUSY, FAILED, RELEASED or any unknown state is a LEAD_ABORT,
    which preserves the worktree.
    """
    if has_pending_tasks:
        return ReleaseCause.RELEASE_WITH_PENDING_TASKS
    if session_state.lower() in _AT_REST:
        return ReleaseCause.COMPLETED
    return ReleaseCause.LEAD_ABORT
