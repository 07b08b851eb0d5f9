"""Small rows of ``fleet_list`` that need no state of the builder: a lead's preserved worktrees,
an orphan of a previous run, an inbox decode failure (summarised, never its body)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from fleetd.bridge.manifests import PreservedWorktree
from fleetd.bridge.orphans import ORPHANED, Orphan
from fleetd.inbox.failures import DecodeFailure

__all__ = ["failure_row", "orphan_row", "preserved_rows"]


def preserved_rows(manifests: Iterable[PreservedWorktree]) -> dict[str, list[dict[str, Any]]]:
    """Each owner's preserved worktrees (shown to that lead only)."""
    owned: dict[str, list[dict[str, Any]]] = {}
    for m in manifests:
        owned.setdefault(m.owner, []).append(
            {
                "sessionId": m.session_id,
                "role": m.role,
                "profile": m.profile,
                "repository": m.repository,
                "path": m.path,
                "branch": m.branch,
                "baseCommit": m.base_commit,
                "cause": m.cause.value,
                "releasedAt": m.released_at.isoformat(),
                "state": m.state,
                "pendingTaskIds": list(m.pending_task_ids),
            }
        )
    return owned


def orphan_row(orphan: Orphan, now: datetime, statuses: dict[str, str]) -> dict[str, Any]:
    """A member of a previous run that still runs: nothing to send it, only to stop it."""
    mark = orphan.mark
    row: dict[str, Any] = {
        "sessionId": mark.session_id,
        "name": mark.name,
        "profile": mark.profile,
        "kind": mark.kind,
        "role": mark.role,
        "owner": mark.owner,
        "paneId": mark.pane_id,
        "state": ORPHANED,
        "run": mark.run,
        "liveStatus": statuses.get(mark.name),
        "orphanedForSeconds": round((now - orphan.found_at).total_seconds(), 3),
        "suggestedToolCalls": [f'fleet_stop(paneId="{mark.pane_id}")'],
    }
    if mark.worktree is not None:
        row["branch"] = mark.worktree.branch
    return row


def failure_row(failure: DecodeFailure) -> dict[str, Any]:
    """A decode failure, summarised: no body, no content."""
    return {
        "key": failure.key,
        "reason": failure.reason.value,
        "disposition": failure.disposition.value,
        "messageId": failure.message_id,
        "version": failure.version,
        "occurrences": failure.occurrences,
        "lastSeenEpochMillis": failure.last_seen_epoch_millis,
    }
