"""Placement: may one more member of a profile start?

Placement reads the very row the capacity view shows (:func:`~fleetd.health.capacity.capacity_row`,
from the same live count and the same model bench), so ``fleet_list`` and the idle-lead heartbeat
can never show a free slot that placement then refuses. A benched profile has no free slot: it is
refused with ``profile_benched``, whose hint names the profiles that can take the work; a full
one with ``capacity_exceeded``.

The bench is read through :class:`ModelBench` (the catalog probe's
:class:`~fleetd.catalog.tracker.ModelHealth` in ``fleetd serve``; :data:`NO_BENCH` where no probe
runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Final, Protocol

from fleetd.errors import CapacityError, ProfileBenchedError
from fleetd.health.capacity import CapacityRow, CountsTowardCapacity, capacity_row, live_count
from fleetd.health.snapshot import ProfileCapacityInput

__all__ = ["NO_BENCH", "ModelBench", "NoBench", "admit"]

FreeSlots = Callable[[], Mapping[str, int | None]]
"""Each profile's free slots (``None``: no cap), read only for a refusal's hint."""


class ModelBench(Protocol):
    """Which profiles' models are benched, and the refusal that says where work can go."""

    def benched(self, now: datetime) -> Iterable[tuple[str, datetime]]:
        """Every benched profile and when its bench ends."""
        ...

    def benched_until(self, profile: str, now: datetime) -> datetime | None:
        """When ``profile``'s bench ends, or ``None`` while it is not benched."""
        ...

    def refusal(self, profile: str, free: FreeSlots, now: datetime) -> ProfileBenchedError | None:
        """The ``profile_benched`` error for a benched ``profile``, else ``None``."""
        ...


class NoBench:
    """No catalog probe: nothing is ever benched."""

    def benched(self, now: datetime) -> Iterable[tuple[str, datetime]]:
        return ()

    def benched_until(self, profile: str, now: datetime) -> datetime | None:
        return None

    def refusal(self, profile: str, free: FreeSlots, now: datetime) -> ProfileBenchedError | None:
        return None


NO_BENCH: Final = NoBench()


def admit(
    profile: str,
    max_load: int | None,
    sessions: Iterable[CountsTowardCapacity],
    *,
    bench: ModelBench,
    now: datetime,
    free: FreeSlots,
) -> CapacityRow:
    """The profile's capacity row when one more member may start; otherwise raise
    :class:`ProfileBenchedError` (its model is benched) or :class:`CapacityError` (at
    ``max_load``).

    ``sessions`` are the live sessions and the orphans of a previous run: both hold a slot.
    """
    until = bench.benched_until(profile, now)
    inputs = ProfileCapacityInput(profile=profile, max_load=max_load, benched_until=until)
    row = capacity_row(inputs, live_count(profile, sessions))
    if row.free is None or row.free > 0:
        return row
    refusal = bench.refusal(profile, free, now) if row.benched else None
    if refusal is not None:
        raise refusal
    raise CapacityError(
        f"profile {profile!r} is at its maxLoad of {max_load} live members",
        hint={"profile": profile, "maxLoad": max_load, "live": row.live},
    )
