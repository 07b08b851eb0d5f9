"""The hot health settings ``decide`` reads on each tick, and the floors config cannot loosen.

The runtime copies the current ``health`` config block into a :class:`HealthSettings` value for
every snapshot, so a reload takes effect on the next tick without any state here. The compiled
floors come from :mod:`fleetd.health.floors` (health owns them; config reads them) and are applied
again in :class:`Effective`: even a settings value built by hand, below what the config loader
would accept, cannot make health probe sooner, read more panes or give up on a lead faster than
the design allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from fleetd.health.floors import (
    FIRST_PROBE_FLOOR,
    LEAD_UNRESPONSIVE_FLOOR,
    LONG_IDLE_FLOOR,
    PANE_COOLDOWN_FLOOR,
    READINESS_GRACE_FLOOR,
)

__all__ = [
    "LEAD_UNRESPONSIVE_FLOOR",
    "LONG_IDLE_FLOOR",
    "READINESS_GRACE_FLOOR",
    "TEARDOWN_GRACE",
    "Effective",
    "HealthSettings",
]

NEVER: Final = datetime.max.replace(tzinfo=UTC)
"""The ``recheck_at`` of member evidence that no timer rule can change."""

TEARDOWN_GRACE: Final = timedelta(seconds=60)
"""Reconciliation grace after a terminal edge before surviving tasks count as orphaned (§4.2).

Compiled, not configured: CB-568's target-wide failure runs synchronously with teardown, so a
task still pending a minute later is an invariant failure, not slowness."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthSettings:
    """The hot ``health`` values for one tick (M4 §11), plus the bridge's readiness grace."""

    snapshot_interval: timedelta = timedelta(seconds=30)
    working_suspect_after: timedelta = timedelta(seconds=600)
    pane_probe_interval: timedelta = timedelta(seconds=60)
    lead_unresponsive_after: timedelta = timedelta(seconds=300)
    capacity_long_idle_after: timedelta = timedelta(seconds=900)
    readiness_grace: timedelta = timedelta(seconds=120)

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < timedelta(0):
                raise ValueError(f"HealthSettings.{name} must not be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class Effective:
    """Settings after the compiled floors: what ``decide`` actually uses."""

    pane_cooldown: timedelta
    working_suspect_after: timedelta
    lead_unresponsive_after: timedelta
    long_idle_after: timedelta
    readiness_grace: timedelta

    def member_timers(self) -> tuple[timedelta, timedelta, timedelta]:
        """The values member timer deadlines depend on (a change re-evaluates every member)."""
        return (self.working_suspect_after, self.long_idle_after, self.readiness_grace)

    @classmethod
    def of(cls, settings: HealthSettings) -> Effective:
        """Apply every floor to ``settings``; a value is only ever raised, never lowered."""
        return cls(
            pane_cooldown=max(settings.pane_probe_interval, PANE_COOLDOWN_FLOOR),
            working_suspect_after=max(settings.working_suspect_after, FIRST_PROBE_FLOOR),
            lead_unresponsive_after=max(settings.lead_unresponsive_after, LEAD_UNRESPONSIVE_FLOOR),
            long_idle_after=max(settings.capacity_long_idle_after, LONG_IDLE_FLOOR),
            readiness_grace=max(settings.readiness_grace, READINESS_GRACE_FLOOR),
        )
