"""The runtime: the scheduler and its loops, the control link, the health monitor and fleet views.

The names other fleetd packages build on are re-exported here; everything else in the package is
internal to it.
"""

from fleetd.runtime.dependencies import DependencyCollector, DependencyView
from fleetd.runtime.escalation import instance_name
from fleetd.runtime.fleet_all import FleetAcross, FleetAllResult, FleetInstancePart
from fleetd.runtime.fleet_models import (
    ControlLink,
    DependenciesBlock,
    DependencyReadiness,
    FleetHealthBlock,
    FleetListResult,
    FleetMember,
    HealthCoverage,
    LeadRow,
    LiveAgent,
    OrphanMember,
)
from fleetd.runtime.fleet_summary import InstanceSummary, summarize
from fleetd.runtime.fleet_versions import FleetViews
from fleetd.runtime.fleet_view import FleetViewBuilder, InboxComponent
from fleetd.runtime.health_views import FleetHealthComponent
from fleetd.runtime.heap import freeze_startup_heap
from fleetd.runtime.instances import InstanceWatch, RemotePeers
from fleetd.runtime.link import LinkObserver, LinkState
from fleetd.runtime.live_agents import LiveAgents
from fleetd.runtime.monitor import FleetHealthMonitor
from fleetd.runtime.scheduler import STALL_FLOOR_SECONDS, Loop, Scheduler

__all__ = [
    "STALL_FLOOR_SECONDS",
    "ControlLink",
    "DependenciesBlock",
    "DependencyCollector",
    "DependencyReadiness",
    "DependencyView",
    "FleetAcross",
    "FleetAllResult",
    "FleetHealthBlock",
    "FleetHealthComponent",
    "FleetHealthMonitor",
    "FleetInstancePart",
    "FleetListResult",
    "FleetMember",
    "FleetViewBuilder",
    "FleetViews",
    "HealthCoverage",
    "InboxComponent",
    "InstanceSummary",
    "InstanceWatch",
    "LeadRow",
    "LinkObserver",
    "LinkState",
    "LiveAgent",
    "LiveAgents",
    "Loop",
    "OrphanMember",
    "RemotePeers",
    "Scheduler",
    "freeze_startup_heap",
    "instance_name",
    "summarize",
]
