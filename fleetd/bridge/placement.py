"""Placement: may one more member of a profile start?

The live count here is the only one: the capacity view in ``fleet_list`` imports the same function,
so the view can never show a free slot that placement then refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetd.bridge.sessions import Session
from fleetd.errors import CapacityError
from fleetd.health.capacity import live_count

__all__ = ["admit"]


def admit(profile: str, max_load: int | None, sessions: Iterable[Session]) -> None:
    """Raise :class:`CapacityError` when ``profile`` is already at ``max_load``."""
    if max_load is None:
        return
    live = live_count(profile, sessions)
    if live >= max_load:
        raise CapacityError(
            f"profile {profile!r} is at its maxLoad of {max_load} live members",
            hint={"profile": profile, "maxLoad": max_load, "live": live},
        )
