"""Compiled limits that configuration can never loosen.

M4 §11 lets operators tune the health cadence, but some guarantees are properties of the design
rather than settings: a lost boundary, a vanished lead and a dead control link each need two
consecutive snapshots; a fleet tick reads at most two panes; a pane is probed at most once a
minute; a working pane is left alone for five minutes before its first probe. The health design's
own limits are owned by :mod:`fleetd.health.floors` (health imports nothing outside itself); this
module re-exports the ones callers read and adds the floors of keys health does not own. A
journal operation gets at least a second (PostgreSQL's connect timeout counts whole seconds), and
a resolved incident is kept at least a day, the span the operator's incident list shows.

:data:`FLOORS` lists every configurable key that has a compiled floor, by its dotted YAML name.
The config model raises a lower value to the floor (with one warning naming the key); it never
lowers a value. It imports only the standard library and the pure health and resilience floors
(the model catalog is read at most once per provider per :data:`~fleetd.resilience.PROBE_FLOOR`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Final

from fleetd.health.floors import (
    FIRST_PROBE_FLOOR,
    LEAD_UNRESPONSIVE_FLOOR,
    LONG_IDLE_FLOOR,
    MAX_PANE_READS_PER_TICK,
    PANE_COOLDOWN_FLOOR,
    READINESS_GRACE_FLOOR,
    TWO_SNAPSHOTS,
)
from fleetd.resilience.models import PROBE_FLOOR

__all__ = [
    "FIRST_PROBE_FLOOR",
    "FLOORS",
    "MAX_PANE_READS_PER_TICK",
    "PANE_COOLDOWN_FLOOR",
    "TWO_SNAPSHOTS",
]


def _seconds(floor: timedelta) -> int:
    return int(floor.total_seconds())


FLOORS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "health.snapshotIntervalSeconds": 15,
        "health.workingSuspectAfterSeconds": _seconds(FIRST_PROBE_FLOOR),
        "health.paneProbeIntervalSeconds": _seconds(PANE_COOLDOWN_FLOOR),
        "health.leadUnresponsiveAfterSeconds": _seconds(LEAD_UNRESPONSIVE_FLOOR),
        "health.humanRepeatSeconds": 900,
        "health.capacityLongIdleAfterSeconds": _seconds(LONG_IDLE_FLOOR),
        "bridge.readinessGraceSeconds": _seconds(READINESS_GRACE_FLOOR),
        "bridge.ticketRetentionSeconds": 600,
        "bridge.ticketsKept": 1000,
        "bridge.push.maxNudgesPerItem": 1,
        "bridge.push.heartbeatIntervalSeconds": 60,
        "modelHealth.probeIntervalSeconds": _seconds(PROBE_FLOOR),
        "journal.operationTimeoutMs": 1000,
        "journal.retentionDays": 1,
    }
)
"""Dotted config key -> the lowest value fleetd will run with."""
