"""Compiled limits that configuration can never loosen.

M4 §11 lets operators tune the health cadence, but some guarantees are properties of the design
rather than settings: a lost boundary, a vanished lead and a dead control link each need two
consecutive snapshots; a fleet tick reads at most two panes; a pane is probed at most once a
minute; a working pane is left alone for five minutes before its first probe. Those live here as
constants, and the health code imports them from here instead of reading them from config.

:data:`FLOORS` lists every configurable key that has a compiled floor, by its dotted YAML name.
The config model raises a lower value to the floor (with one warning naming the key); it never
lowers a value. This module has no imports beyond the standard library so pure code may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Final

__all__ = [
    "FIRST_PROBE_FLOOR",
    "FLOORS",
    "MAX_PANE_READS_PER_TICK",
    "PANE_COOLDOWN_FLOOR",
    "TWO_SNAPSHOTS",
]

TWO_SNAPSHOTS: Final = 2
"""Consecutive snapshots needed for TURN_BOUNDARY_LOST, LEAD_UNREACHABLE and CONTROL_LINK_DOWN."""

MAX_PANE_READS_PER_TICK: Final = 2
"""Pane reads the whole fleet may spend in one monitor tick."""

PANE_COOLDOWN_FLOOR: Final = timedelta(seconds=60)
"""Shortest time between two probes of the same pane (``health.paneProbeIntervalSeconds``)."""

FIRST_PROBE_FLOOR: Final = timedelta(seconds=300)
"""Shortest working age before a pane is first probed (``health.workingSuspectAfterSeconds``)."""

FLOORS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "health.snapshotIntervalSeconds": 15,
        "health.workingSuspectAfterSeconds": int(FIRST_PROBE_FLOOR.total_seconds()),
        "health.paneProbeIntervalSeconds": int(PANE_COOLDOWN_FLOOR.total_seconds()),
        "health.leadUnresponsiveAfterSeconds": 120,
        "health.humanRepeatSeconds": 900,
        "health.capacityLongIdleAfterSeconds": 300,
        "bridge.readinessGraceSeconds": 10,
        "bridge.push.maxNudgesPerItem": 1,
        "bridge.push.heartbeatIntervalSeconds": 60,
    }
)
"""Dotted config key -> the lowest value fleetd will run with."""
