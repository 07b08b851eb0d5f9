"""MUTE: a completion-fallback resolution is a metric first and an incident only at a rate.

A turn that resolves through completion fallback instead of ``fleet_reply`` proves that no
structured reply won; it does not prove an MCP failure (§4.2, §4.5). One event is therefore
only counted (:class:`~fleetd.health.effects.CountMute`). An incident opens only when a target
or a profile reaches :data:`MUTE_RATE_COUNT` events within :data:`MUTE_RATE_WINDOW` — a small
fixed rate, compiled — or when a member's mute coincides with another open fault.

Only the most recent :data:`MUTE_RATE_COUNT` event times inside the window are kept, so the
retained evidence per target or profile is bounded.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

__all__ = ["MUTE_RATE_COUNT", "MUTE_RATE_WINDOW", "rate_exceeded", "record_mutes"]

MUTE_RATE_COUNT: Final = 3
MUTE_RATE_WINDOW: Final = timedelta(hours=1)


def record_mutes(times: tuple[datetime, ...], count: int, now: datetime) -> tuple[datetime, ...]:
    """Add ``count`` events at ``now`` and drop the ones that left the window."""
    kept = tuple(t for t in times if now - t < MUTE_RATE_WINDOW)
    if count > 0:
        kept = (kept + (now,) * min(count, MUTE_RATE_COUNT))[-MUTE_RATE_COUNT:]
    return kept


def rate_exceeded(times: tuple[datetime, ...]) -> bool:
    """True when the window holds the threshold number of events."""
    return len(times) >= MUTE_RATE_COUNT
