"""Small rows of ``fleet_list`` that need no state of the builder: a lead's preserved worktrees,
an orphan of a previous run, an inbox decode failure (summarised, never its body). Each is built
as its model (:mod:`fleetd.runtime.fleet_models`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from fleetd.bridge.manifests import PreservedWorktree
from fleetd.bridge.orphans import ORPHANED, Orphan
from fleetd.inbox.failures import DecodeFailure
from fleetd.runtime.fleet_models import DecodeFailureRow, OrphanMember, PreservedWorktreeRow

__all__ = ["failure_row", "orphan_row", "preserved_rows"]


def preserved_rows(manifests: Iterable[PreservedWorktree]) -> dict[str, list[PreservedWorktreeRow]]:
    """Each owner's preserved worktrees (shown to that lead only)."""
    owned: dict[str, list[PreservedWorktreeRow]] = {}
    for m in manifests:
        owned.setdefault(m.owner, []).append(
            PreservedWorktreeRow.of(
                session_id=m.session_id,
                role=m.role,
                profile=m.profile,
                repository=m.repository,
                path=m.path,
                branch=m.branch,
                base_commit=m.base_commit,
                cause=m.cause,
                released_at=m.released_at.isoformat(),
                state=m.state,
                pending_task_ids=list(m.pending_task_ids),
            )
        )
    return owned


def orphan_row(orphan: Orphan, now: datetime, statuses: dict[str, str]) -> OrphanMember:
    """A member of a previous run that still runs: nothing to send it, only to stop it."""
    mark = orphan.mark
    branch = {} if mark.worktree is None else {"branch": mark.worktree.branch}
    return OrphanMember.of(
        session_id=mark.session_id,
        name=mark.name,
        profile=mark.profile,
        kind=mark.kind,
        role=mark.role,
        owner=mark.owner,
        pane_id=mark.pane_id,
        state=ORPHANED,
        run=mark.run,
        live_status=statuses.get(mark.name),
        orphaned_for_seconds=round((now - orphan.found_at).total_seconds(), 3),
        suggested_tool_calls=[f'fleet_stop(paneId="{mark.pane_id}")'],
        **branch,
    )


def failure_row(failure: DecodeFailure) -> DecodeFailureRow:
    """A decode failure, summarised: no body, no content."""
    return DecodeFailureRow.of(
        key=failure.key,
        reason=failure.reason,
        disposition=failure.disposition,
        message_id=failure.message_id,
        version=failure.version,
        occurrences=failure.occurrences,
        last_seen_epoch_millis=failure.last_seen_epoch_millis,
    )
