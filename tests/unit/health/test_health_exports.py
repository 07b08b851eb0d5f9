"""The public surface of ``fleetd.health`` is pinned: additions and removals are deliberate."""

from __future__ import annotations

from enum import StrEnum

import fleetd.health

EXPECTED = {
    # decide and its state
    "decide",
    "Decision",
    "HealthState",
    "MemberEvidence",
    "LeadEvidence",
    "LinkEvidence",
    # the snapshot contract
    "FleetSnapshot",
    "LiveView",
    "LiveAgent",
    "LiveStatus",
    "MemberView",
    "OpenTurn",
    "SessionState",
    "WorktreeFacts",
    "TargetLoss",
    "LossCause",
    "BoundaryScreen",
    "LeadView",
    "InboxView",
    "InboxKind",
    "InboxFailureView",
    "ProbeResult",
    "ProbeSource",
    "ProfileCapacityInput",
    "RepairView",
    "HealthSettings",
    # classifications
    "MemberState",
    "LeadState",
    "ControlLinkState",
    "InboxState",
    "Severity",
    "Certainty",
    "Scope",
    # incidents
    "Incident",
    "IncidentKey",
    "ResolveReason",
    "incident_id",
    "suggested_tool_calls",
    # routing
    "route",
    "Routing",
    "LeadFacts",
    "lead_facts",
    "foreign_assignments",
    "Assignment",
    "Route",
    "RoutingReason",
    # effects
    "Effect",
    "OpenIncident",
    "UpdateIncident",
    "ResolveIncident",
    "PublishHealthRecord",
    "RouteToHuman",
    "SupersedeAssignment",
    "RetireLead",
    "RequestPaneProbe",
    "ProbeReason",
    "RequestTargetLookup",
    "FailTargetWork",
    "FailCause",
    "RequestLostBoundaryRepair",
    "CountMute",
    "RecordTransition",
    "RemoteLead",
    # capacity
    "CapacityRow",
    "CapacitySummary",
    "CountsTowardCapacity",
    "LongIdleMember",
    "capacity_rows",
    "capacity_summary",
    "holds_capacity",
    "idle_for_seconds",
    "is_reclaimable",
    "live_count",
}


def test_all_is_pinned() -> None:
    """``__all__`` lists exactly the public names other packages rely on."""
    assert set(fleetd.health.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    """Every name in ``__all__`` resolves."""
    for name in fleetd.health.__all__:
        assert getattr(fleetd.health, name) is not None


def test_state_values_keep_the_spec_spelling_and_other_enums_are_lowercase() -> None:
    """Health states keep the seed's spelling; severity, certainty and scope are lowercase."""
    enum: type[StrEnum]
    for enum in (
        fleetd.health.MemberState,
        fleetd.health.LeadState,
        fleetd.health.ControlLinkState,
    ):
        assert all(member.value == member.name for member in enum)
    for enum in (
        fleetd.health.Severity,
        fleetd.health.Certainty,
        fleetd.health.Scope,
        fleetd.health.Route,
        fleetd.health.RoutingReason,
    ):
        assert all(member.value == member.name.lower() for member in enum)
