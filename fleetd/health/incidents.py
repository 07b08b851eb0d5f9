"""Incidents: one open record per key, new generation on recurrence.

M4 §10.3 keys an open incident by ``(scope, subject_stable_id, state, cause_fingerprint)``. The
fingerprint holds stable codes only — an error code, a signature id, an invariant name — never a
time, an age, a count, pane text or a digest, so an incident does not "change identity" while its
evidence ages. A key has at most one open incident. When it resolves and the same condition comes
back, the key's generation goes up by one and the new incident gets a new id.

Ids are deterministic (a hash of key and generation) because the pure core has no randomness.
After a restart the runtime seeds :attr:`IncidentBook.generations` and its ``floor`` from the
journal so a recurrence cannot reuse a stored generation: a new one is above both the key's last
generation and the floor (at least every generation the journal keeps, whose resolved history
is not read back key by key).

Each open incident carries its :class:`Assignment`: where :func:`~fleetd.health.routing.route`
sent it (a lead or a person), why, and the routing generation, which starts at 1 and goes up by
one on every reassignment. The incident generation above counts recurrences of a key; the routing
generation counts recipients of one incident.

:class:`IncidentBook` is the working copy ``decide`` mutates during one tick; it starts from the
prior state's mappings and never mutates them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from fleetd.health.fact import fact
from fleetd.health.states import Certainty, HealthStateName, Scope, Severity, spec_of

__all__ = [
    "INCIDENT_ID_PATTERN",
    "Assignment",
    "Evidence",
    "Incident",
    "IncidentBook",
    "IncidentKey",
    "ResolveReason",
    "Route",
    "RoutingReason",
    "incident_id",
    "suggested_tool_calls",
]

Evidence = tuple[tuple[str, str], ...]
"""Structured evidence: ``(name, value)`` pairs of stable codes and counts, never free text."""


class ResolveReason(StrEnum):
    """Why an incident closed."""

    CLEARED = "cleared"  # its condition ended
    SUPERSEDED = "superseded"  # another state of the same subject replaced it
    SUBJECT_RETIRED = "subject_retired"  # its member was released, its lead left the config
    REPAIRED = "repaired"  # lost-boundary repair resolved the turn TURN_BOUNDARY_LOST was about


class Route(StrEnum):
    """Who an incident is routed to: a lead's inbox, or a person (M4 §7.4 Figure 2, §10.1)."""

    LEAD = "lead"
    HUMAN = "human"


class RoutingReason(StrEnum):
    """Why an incident has the recipient it has (shown as ``routing.reason`` on ``fleet_list``).

    ``owner``: the exact delegating lead (§7.3), healthy. ``peer_*``: a healthy peer lead because
    the owner is unhealthy or gone, the incident is about a lead, or it is fleet-wide with no
    owning lead (§7.4). ``human_*``: a person, because a member incident has no exact owner
    (Figure 2), the control link is down (§10.1), no healthy lead can receive it, or records
    cannot reach the leads' inboxes (§10.1).
    """

    OWNER = "owner"
    PEER_OWNER_UNHEALTHY = "peer_owner_unhealthy"
    PEER_LEAD_INCIDENT = "peer_lead_incident"
    PEER_NO_OWNER = "peer_no_owner"
    HUMAN_NO_OWNER = "human_no_owner"
    HUMAN_CONTROL_LINK_DOWN = "human_control_link_down"
    HUMAN_NO_HEALTHY_LEAD = "human_no_healthy_lead"
    HUMAN_PUBLICATION_FAILED = "human_publication_failed"
    HUMAN_INSTANCE_DOWN = "human_instance_down"  # a fleetd instance stopped renewing (issue 24)


@fact
class Assignment:
    """Where one incident is routed in one routing generation.

    ``recipient`` is a lead name for :attr:`Route.LEAD` and ``None`` for :attr:`Route.HUMAN`;
    ``on_behalf_of`` names the lead the recipient stands in for (the failed owner, or the lead
    the incident is about), ``None`` when the owner itself receives or no lead is involved.
    """

    route: Route
    recipient: str | None
    reason: RoutingReason
    generation: int
    on_behalf_of: str | None = None

    def __post_init__(self) -> None:
        if (self.route is Route.LEAD) != (self.recipient is not None):
            raise ValueError("a lead route names its recipient; a human route names none")
        if self.generation < 1:
            raise ValueError("Assignment.generation starts at 1")


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class IncidentKey:
    """The dedup key of one open incident (§10.3)."""

    scope: Scope
    subject: str
    state: HealthStateName
    cause: str


INCIDENT_ID_PATTERN = "^inc_[0-9a-f]{24}$"
"""Every incident id :func:`incident_id` makes: ``inc_`` and 24 lowercase hex digits."""


def incident_id(key: IncidentKey, generation: int, namespace: str = "") -> str:
    """A stable id for generation ``generation`` of ``key`` opened in ``namespace``.

    The runtime passes the id of the run that opens the incident: two fleetd deployments (or one
    whose journal was lost) that open the same key and generation still get distinct ids, so a
    webhook receiver serving several never takes one's event for the other's (the webhook id is
    derived from the incident id). An adopted incident keeps the id it was opened with.
    """
    parts = (key.scope, key.subject, key.state, key.cause, str(generation))
    raw = "\x1f".join((*parts, namespace) if namespace else parts)
    return "inc_" + hashlib.sha256(raw.encode()).hexdigest()[:24]


@fact
class Incident:
    """One open (or just resolved) incident.

    ``target`` is the herdr target name where one exists; ``owner_lead`` is the exact delegating
    lead at open time (or the lead whose inbox key it is); ``assignment`` is where routing sent it,
    ``None`` only between opening and the routing pass of the same tick.
    """

    id: str
    key: IncidentKey
    generation: int
    target: str | None
    severity: Severity
    certainty: Certainty
    opened_at: datetime
    owner_lead: str | None = None
    assignment: Assignment | None = None
    committed_work_at_risk: bool = False
    evidence: Evidence = ()

    def routed(self, assignment: Assignment) -> Incident:
        """This incident with ``assignment``; ``dataclasses.replace`` without its cost, which a
        routing pass over a thousand incidents notices."""
        return Incident(
            id=self.id,
            key=self.key,
            generation=self.generation,
            target=self.target,
            severity=self.severity,
            certainty=self.certainty,
            opened_at=self.opened_at,
            owner_lead=self.owner_lead,
            assignment=assignment,
            committed_work_at_risk=self.committed_work_at_risk,
            evidence=self.evidence,
        )

    @property
    def recipient_lead(self) -> str | None:
        """The lead that holds the incident now; ``None`` while a person (or nobody) does."""
        return self.assignment.recipient if self.assignment is not None else None

    @property
    def route(self) -> Route | None:
        return self.assignment.route if self.assignment is not None else None

    @property
    def routing_reason(self) -> RoutingReason | None:
        return self.assignment.reason if self.assignment is not None else None

    @property
    def routing_generation(self) -> int:
        """The routing generation; 0 before the first assignment."""
        return self.assignment.generation if self.assignment is not None else 0

    @property
    def scope(self) -> Scope:
        return self.key.scope

    @property
    def subject(self) -> str:
        return self.key.subject

    @property
    def state(self) -> HealthStateName:
        return self.key.state


def suggested_tool_calls(incident: Incident) -> tuple[str, ...]:
    """Literal safe tool calls a report may offer (§5.2); never stop as the only action."""
    if incident.scope is Scope.MEMBER:
        return (f'fleet_status(sessionId="{incident.subject}")', "fleet_list()")
    return ("fleet_list()",)


class IncidentBook:
    """The open incidents and generations for one tick, changed in place."""

    __slots__ = ("_changed", "floor", "generations", "namespace", "open")

    def __init__(
        self,
        open_incidents: Mapping[IncidentKey, Incident],
        generations: Mapping[IncidentKey, int],
        namespace: str = "",
        *,
        floor: int = 0,
    ) -> None:
        self.open: Mapping[IncidentKey, Incident] = open_incidents
        self.generations: Mapping[IncidentKey, int] = generations
        self.namespace = namespace
        self.floor = floor
        self._changed = False

    def _writable(self) -> tuple[dict[IncidentKey, Incident], dict[IncidentKey, int]]:
        if not self._changed:
            self.open = dict(self.open)
            self.generations = dict(self.generations)
            self._changed = True
        assert isinstance(self.open, dict)
        assert isinstance(self.generations, dict)
        return self.open, self.generations

    def open_new(
        self,
        key: IncidentKey,
        *,
        now: datetime,
        target: str | None,
        owner_lead: str | None = None,
        committed_work_at_risk: bool = False,
        evidence: Evidence = (),
    ) -> Incident:
        """Open the next generation of ``key``. The key must not be open."""
        opened, generations = self._writable()
        if key in opened:
            raise ValueError(f"incident already open for {key}")
        generation = max(generations.get(key, 0), self.floor) + 1
        generations[key] = generation
        spec = spec_of(key.state)
        incident = Incident(
            id=incident_id(key, generation, self.namespace),
            key=key,
            generation=generation,
            target=target,
            severity=spec.severity,
            certainty=spec.certainty,
            opened_at=now,
            owner_lead=owner_lead,
            committed_work_at_risk=committed_work_at_risk,
            evidence=evidence,
        )
        opened[key] = incident
        return incident

    def close(self, key: IncidentKey) -> Incident | None:
        """Remove and return the open incident of ``key`` (``None`` if none is open)."""
        if key not in self.open:
            return None
        opened, _ = self._writable()
        return opened.pop(key)

    def amend(self, incident: Incident, **changes: object) -> Incident:
        """Replace an open incident with a changed copy and return it."""
        opened, _ = self._writable()
        updated = replace(incident, **changes)  # type: ignore[arg-type]
        opened[incident.key] = updated
        return updated

    def store(self, incidents: Iterable[Incident]) -> None:
        """Replace open incidents with changed copies already built (a routing pass's result)."""
        opened, _ = self._writable()
        for incident in incidents:
            if incident.key not in opened:
                raise ValueError(f"no open incident for {incident.key}")
            opened[incident.key] = incident

    def forget_subjects(self, scope: Scope, subjects: set[str]) -> None:
        """Drop generation counters of retired subjects whose ids never recur (sessions)."""
        stale = [k for k in self.generations if k.scope is scope and k.subject in subjects]
        if stale:
            _, generations = self._writable()
            for key in stale:
                del generations[key]
