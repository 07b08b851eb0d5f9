"""Values the journal suites share: a fixed time and core incidents as ``decide`` opens them."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetd.health.incidents import Incident, IncidentKey, incident_id
from fleetd.health.states import HealthStateName, MemberState, Scope, spec_of

T0 = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)


def make_incident(
    subject: str = "sess_1",
    *,
    state: HealthStateName = MemberState.GONE,
    cause: str = "agent_not_found",
    generation: int = 1,
    opened_at: datetime = T0,
    target: str | None = "term_m1",
    owner: str | None = "lead",
    scope: Scope = Scope.MEMBER,
) -> Incident:
    """A core incident as ``decide`` would open it."""
    key = IncidentKey(scope=scope, subject=subject, state=state, cause=cause)
    spec = spec_of(state)
    return Incident(
        id=incident_id(key, generation),
        key=key,
        generation=generation,
        target=target,
        severity=spec.severity,
        certainty=spec.certainty,
        opened_at=opened_at,
        owner_lead=owner,
    )
