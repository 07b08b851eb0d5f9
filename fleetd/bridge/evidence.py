"""Facts the bridge's own failure paths hand to health (M4 §6: "existing failure paths publish
structured evidence to the monitor"; the monitor never infers events from log text).

The bridge handles some faults itself, faster than any fleet tick: the 250 ms poller fails a
target's tickets and releases a member that never became ready or whose pane vanished mid-turn,
and the completion fallback resolves a turn whose screen ended on a fatal error (herdr shows those
as ``idle``). By the next tick the monitor would see only RELEASED, or an idle DONE member. So
each of those paths records one fact on the session it concerns — at most one of each kind per
session, and released sessions are themselves a bounded trail in the roster — and
:func:`fleetd.bridge.view.member_view` hands it to ``decide`` as part of the member's snapshot.

This module is pure: values only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from fleetd.bridge.release import ReleaseCause

__all__ = ["LOSS_CAUSES", "FatalScreenSeen", "TargetLost", "target_lost"]

LOSS_CAUSES: Final = {
    ReleaseCause.GONE: "target_not_found",
    ReleaseCause.NEVER_READY: "readiness_grace_expired",
}
"""Release causes that are a target loss, with the code used when the caller names none."""

_TICKET_IDS_KEPT: Final = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetLost:
    """The bridge released a member for a target loss and failed its tickets (once).

    ``code`` is a stable code: a herdr ``*_not_found`` code, ``readiness_grace_expired`` or
    ``launch_failed``. ``failed_tickets`` keeps the first few ids; ``tickets_failed`` counts all.
    """

    cause: ReleaseCause
    code: str
    at: datetime
    tickets_failed: int
    failed_tickets: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FatalScreenSeen:
    """The completion fallback's boundary read of turn ``turn`` matched a tested fatal signature."""

    signature_id: str
    ticket: str
    turn: int


def target_lost(
    cause: ReleaseCause, code: str | None, *, at: datetime, failed: Sequence[str]
) -> TargetLost | None:
    """The fact a release records, or ``None`` when ``cause`` is not a target loss."""
    default = LOSS_CAUSES.get(cause)
    if default is None:
        return None
    return TargetLost(
        cause=cause,
        code=code or default,
        at=at,
        tickets_failed=len(failed),
        failed_tickets=tuple(failed[:_TICKET_IDS_KEPT]),
    )
