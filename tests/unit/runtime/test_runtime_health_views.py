"""The health views: routing on each incident, foreign holdings on lead rows, honest coverage."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetd.bridge.answers import wire
from fleetd.config import HealthConfig
from fleetd.health.evidence import HealthState, LeadEvidence
from fleetd.health.incidents import Assignment, Incident, IncidentKey, Route, RoutingReason
from fleetd.health.states import Certainty, LeadState, MemberState, Scope, Severity
from fleetd.runtime.dispatch import PASSIVE_NO_SINK, RoutingNote
from fleetd.runtime.health_views import FOREIGN_SHOWN, coverage, lead_health, open_incident

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(minutes=2)
ON = HealthConfig(enabled=True)


def incident(subject: str = "s-1", assignment: Assignment | None = None) -> Incident:
    return Incident(
        id=f"inc_{subject}",
        key=IncidentKey(scope=Scope.MEMBER, subject=subject, state=MemberState.GONE, cause="c"),
        generation=1,
        target=None,
        severity=Severity.CRITICAL,
        certainty=Certainty.CERTAIN,
        opened_at=T0,
        owner_lead="lead-a",
        assignment=assignment,
    )


PEER = Assignment(
    route=Route.LEAD,
    recipient="lead-b",
    reason=RoutingReason.PEER_OWNER_UNHEALTHY,
    generation=2,
    on_behalf_of="lead-a",
)
HUMAN = Assignment(
    route=Route.HUMAN,
    recipient=None,
    reason=RoutingReason.HUMAN_NO_HEALTHY_LEAD,
    generation=3,
    on_behalf_of="lead-a",
)


def test_peer_routing_is_available_only_with_a_second_lead() -> None:
    """Two leads: peers exist; one lead: no peer, and its failure has no active recovery."""
    assert coverage(ON, leads=2).peer_routing == "available"
    sole = coverage(ON, leads=1)
    assert (sole.peer_routing, sole.status) == ("no_peer", "partial")
    assert "single lead" in str(sole.reason)
    assert "single lead" not in str(coverage(ON, leads=2).reason)
    assert "peerRouting" not in wire(coverage(HealthConfig(), leads=2))


def test_an_incident_row_shows_owner_recipient_and_its_routing() -> None:
    """Routed to a peer: recipient, route, reason, generation and on whose behalf."""
    row = wire(open_incident(incident(assignment=PEER), now=NOW, note=None))
    assert (row["owner"], row["recipient"]) == ("lead-a", "lead-b")
    assert row["routing"] == {
        "route": "lead",
        "reason": "peer_owner_unhealthy",
        "generation": 2,
        "onBehalfOf": "lead-a",
    }
    note = RoutingNote(reason=HUMAN.reason.value, outcome=PASSIVE_NO_SINK)
    human = wire(open_incident(incident(assignment=HUMAN), now=NOW, note=note))
    assert human["recipient"] is None
    assert human["routing"]["route"] == "human"
    assert human["routing"]["outcome"] == "passive_no_sink"
    assert "routing" not in wire(open_incident(incident(), now=NOW, note=None))


def test_a_lead_row_counts_and_lists_a_bounded_set_of_foreign_incidents() -> None:
    """The holder shows how many it holds for others and at most a few of them."""
    held = {i.key: i for i in (incident(f"s-{n:02}", PEER) for n in range(FOREIGN_SHOWN + 3))}
    own = incident("s-own", replace(PEER, recipient="lead-a", reason=RoutingReason.OWNER))
    leads = {
        name: LeadEvidence(
            name=name,
            agent_name=name,
            terminal_id=None,
            configured=True,
            discovered=False,
            state=LeadState.LEAD_IDLE,
            cause="at_prompt",
            since=T0,
        )
        for name in ("lead-a", "lead-b")
    }
    state = HealthState(leads=leads, incidents={**held, own.key: own})
    health = lead_health(state, "lead-b", now=NOW)
    assert health is not None
    row = wire(health)
    assert row["assignedForeignIncidents"] == FOREIGN_SHOWN + 3
    assert len(row["foreignIncidents"]) == FOREIGN_SHOWN
    assert row["foreignIncidents"][0] == {
        "id": "inc_s-00",
        "subject": "s-00",
        "state": "GONE",
        "severity": "critical",
        "ageSeconds": 120.0,
        "routingGeneration": 2,
    }
    kept = lead_health(state, "lead-a", now=NOW)
    assert kept is not None
    mine = wire(kept)
    assert (mine["assignedForeignIncidents"], mine["foreignIncidents"]) == (0, [])
