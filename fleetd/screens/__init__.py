"""Reading agent screens: assistant blocks, fatal signatures and progress digests.

Everything here is pure: it takes the text of a pane read and returns values. The bridge uses it
for the completion fallback and the delivery baseline, health for ERROR_ON_SCREEN signatures and
STALL_SUSPECTED digests, and the herdr simulator draws its fake screens with :mod:`.compose`.
"""

from __future__ import annotations

from fleetd.screens.kinds import AgentKind, parse_agent_kind

__all__ = ["AgentKind", "parse_agent_kind"]
