"""Compiled limits of the health design that configuration can never loosen.

M4 §11 lets operators tune the health cadence, but some guarantees are properties of the design
rather than settings: a lost boundary, a vanished lead and a dead control link each need two
consecutive snapshots; a fleet tick reads at most two panes; a pane is probed at most once a
minute; a working pane is left alone for five minutes before its first probe; a lead is not called
unresponsive, nor a member long idle, sooner than the design allows.

Health owns these constants and reads them from here; :mod:`fleetd.config.floors` builds its table
of clamped config keys from them, so config depends on health's numbers and never the reverse.
Standard library only, like the rest of ``fleetd.health``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

__all__ = [
    "FIRST_PROBE_FLOOR",
    "LEAD_UNRESPONSIVE_FLOOR",
    "LONG_IDLE_FLOOR",
    "MAX_PANE_READS_PER_TICK",
    "PANE_COOLDOWN_FLOOR",
    "READINESS_GRACE_FLOOR",
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

LEAD_UNRESPONSIVE_FLOOR: Final = timedelta(seconds=120)
"""Shortest wait before a lead counts as unresponsive (``health.leadUnresponsiveAfterSeconds``)."""

LONG_IDLE_FLOOR: Final = timedelta(seconds=300)
"""Shortest idle time before a member is long idle (``health.capacityLongIdleAfterSeconds``)."""

READINESS_GRACE_FLOOR: Final = timedelta(seconds=10)
"""Shortest grace for a new member to become ready (``bridge.readinessGraceSeconds``)."""
