"""Placement: may one more member of a profile start?

The live count here is the only one: the capacity view in ``fleet_list`` imports the same function,
so the view can never show a free slot that placement then refuses.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetd.errors import CapacityError
from fleetd.health.capacity import CountsTowardCapacity, live_count

__all__ = ["admit"]


def admit(profile: str, max_load: int | None, sessions: Iterable[CountsTowardCapacity]) -> None:
    """Raise :class:`CapacityError` when ``profile`` is already at ``max_load``.

    ``sessions`` are the live sessions and the orphans of a previous run: both hold a slot.
    """
    if max_load is None:
        return
    live = live_count(profile, sessions)
    if live >= max_load:
        raise CapacityError(
            f"profile {profile!r} is at its maxLoad of {max_load} live members",
            hint={"profile": profile, "maxLoad": max_load, "live": live},
        )
