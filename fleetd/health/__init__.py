"""Fleet health: the pure core of M4.

``decide(snapshot, prior, now)`` joins herdr's live view with the bridge's view, classifies every
member, lead and the control link, and returns the next :class:`HealthState` plus effects for the
runtime to dispatch. This package does no I/O, reads no clock, logs nothing and draws no random
numbers; it imports nothing from the adapters (herdr, inbox, journal, notify, api, runtime, sim).
"""

from __future__ import annotations

from fleetd.health.capacity import (
    CapacityRow,
    CapacitySummary,
    CountsTowardCapacity,
    LongIdleMember,
    capacity_rows,
    capacity_summary,
    holds_capacity,
    idle_for_seconds,
    is_reclaimable,
    live_count,
)
from fleetd.health.decide import Decision, decide
from fleetd.health.effects import (
    CountMute,
    Effect,
    FailCause,
    FailTargetWork,
    OpenIncident,
    PublishHealthRecord,
    RecordTransition,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RequestRouting,
    RequestTargetLookup,
    ResolveIncident,
    RoutingReason,
    UpdateIncident,
)
from fleetd.health.evidence import HealthState, LeadEvidence, LinkEvidence, MemberEvidence
from fleetd.health.incidents import (
    Incident,
    IncidentKey,
    ResolveReason,
    incident_id,
    suggested_tool_calls,
)
from fleetd.health.pane_budget import ProbeReason
from fleetd.health.settings import HealthSettings
from fleetd.health.snapshot import (
    FleetSnapshot,
    InboxFailureView,
    InboxKind,
    InboxView,
    LeadView,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberView,
    OpenTurn,
    ProbeResult,
    ProbeSource,
    ProfileCapacityInput,
    SessionState,
    WorktreeFacts,
)
from fleetd.health.states import (
    Certainty,
    ControlLinkState,
    InboxState,
    LeadState,
    MemberState,
    Scope,
    Severity,
)

__all__ = [
    "CapacityRow",
    "CapacitySummary",
    "Certainty",
    "ControlLinkState",
    "CountMute",
    "CountsTowardCapacity",
    "Decision",
    "Effect",
    "FailCause",
    "FailTargetWork",
    "FleetSnapshot",
    "HealthSettings",
    "HealthState",
    "InboxFailureView",
    "InboxKind",
    "InboxState",
    "InboxView",
    "Incident",
    "IncidentKey",
    "LeadEvidence",
    "LeadState",
    "LeadView",
    "LinkEvidence",
    "LiveAgent",
    "LiveStatus",
    "LiveView",
    "LongIdleMember",
    "MemberEvidence",
    "MemberState",
    "MemberView",
    "OpenIncident",
    "OpenTurn",
    "ProbeReason",
    "ProbeResult",
    "ProbeSource",
    "ProfileCapacityInput",
    "PublishHealthRecord",
    "RecordTransition",
    "RequestLostBoundaryRepair",
    "RequestPaneProbe",
    "RequestRouting",
    "RequestTargetLookup",
    "ResolveIncident",
    "ResolveReason",
    "RoutingReason",
    "Scope",
    "SessionState",
    "Severity",
    "UpdateIncident",
    "WorktreeFacts",
    "capacity_rows",
    "capacity_summary",
    "decide",
    "holds_capacity",
    "idle_for_seconds",
    "incident_id",
    "is_reclaimable",
    "live_count",
    "suggested_tool_calls",
]
