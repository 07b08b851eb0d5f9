"""The health part of what fleetd shows: ``fleet_list`` health, the ``/healthz`` component.

Pure renderers: the monitor's state, counters and routing notes and ``now`` in, JSON-ready dicts
or wire models out: those of :mod:`fleetd.runtime.fleet_models` (the link, the coverage) and the
``/healthz`` component, :class:`FleetHealthComponent`. No pane content ever reaches a view, only
states, codes, names and ages. Each incident shows its owner, its recipient and its ``routing``
(route, reason, generation, on whose behalf); a lead's health shows the foreign incidents it holds
for others (§7.4). Coverage says what this deployment can do about an incident no lead can act on
(§10.2, §7.6): ``full`` when a sink of any kind tells a person, ``partial`` while notifications
are disabled, ``degraded`` while the journal or the sink fails, and ``off`` while health is
disabled; peer routing needs a second lead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from fleetd.bridge.answers import WireModel
from fleetd.config import HealthConfig
from fleetd.config.floors import TWO_SNAPSHOTS
from fleetd.health.evidence import HealthState, LinkEvidence
from fleetd.health.incidents import Incident, Route
from fleetd.health.routing import foreign_assignments
from fleetd.health.states import ControlLinkState, spec_of
from fleetd.runtime.dispatch import RoutingNote
from fleetd.runtime.fleet_models import (
    ControlLink,
    FleetHealthBlock,
    ForeignIncident,
    HealthCoverage,
    LeadHealth,
    MemberHealth,
    OpenIncident,
    OpenIncidentRepair,
    OpenIncidentRouting,
)
from fleetd.runtime.link import LinkState

__all__ = [
    "FOREIGN_SHOWN",
    "FleetHealthComponent",
    "FleetHealthPart",
    "coverage",
    "fleet_health",
    "healthz_component",
    "lead_health",
    "link_view",
    "member_health",
    "open_incident",
]


FOREIGN_SHOWN = 10
"""A lead's health row lists at most this many of the foreign incidents it holds."""


class FleetHealthComponent(WireModel):
    """The ``fleetHealth`` component of ``/healthz``: its ``status`` is the coverage's word
    (§10.2), not a health+json status, so it never moves the top-level status."""

    status: Literal["full", "partial", "degraded", "off"]
    open_incidents: int
    ticks: int
    coverage: HealthCoverage


def coverage(health: HealthConfig, *, leads: int, degraded: Sequence[str] = ()) -> HealthCoverage:
    """What detection and escalation this deployment has (§10.2, §7.6), for ``leads`` leads.

    ``full``: a sink (any kind) takes what no lead can act on. ``partial``: notifications are
    disabled, so no person is told (with a single lead, its own failure has no peer either).
    ``degraded``: the journal or the sink is failing (``degraded`` says which, in bounded words);
    detection goes on regardless.
    """
    if not health.enabled:
        return HealthCoverage.of(detection="disabled", human_escalation="unavailable", status="off")
    mode = health.notifications.mode
    webhook = mode.sends
    if webhook:
        reason = f"a person is notified by {mode.value} when no lead can act"
    else:
        reason = "notifications disabled: no person is told when no lead can act"
        if leads < 2:
            reason += "; with a single lead, a lead failure has no active notification or recovery"
    status = "full" if webhook else "partial"
    if degraded:
        status = "degraded"
        reason = "; ".join(degraded) + f"; {reason}"
    return HealthCoverage.of(
        detection="enabled",
        peer_routing="available" if leads >= 2 else "no_peer",
        human_escalation=mode.value if webhook else "unavailable",
        status=status,
        reason=reason,
    )


def blind(link: LinkEvidence) -> bool:
    """Whether health has been blind for two snapshots or more: herdr's agent list failed that
    many ticks in a row while its link is not down (its ping answers). Neither a link fault nor
    a member fault (M4 §4.3), yet nothing is detected meanwhile: coverage says so."""
    return link.state is ControlLinkState.CONTROL_LINK_OK and link.list_failures >= TWO_SNAPSHOTS


BLIND = "herdr's agent list keeps failing while herdr answers: detection is blind"


def link_view(
    link: LinkState, *, classified: ControlLinkState | None, now: datetime, interval: timedelta
) -> ControlLink:
    """The control link for ``fleet_list``, ``/healthz`` and the link gauge: health's verdict,
    or (health off) the calls judged over the same two-snapshot window."""
    window = TWO_SNAPSHOTS * interval
    return link.view(classified, now=now, window=window)


def member_health(state: HealthState, session_id: str, *, now: datetime) -> MemberHealth | None:
    """One member's health row for ``fleet_list``; None until a tick has seen it."""
    evidence = state.members.get(session_id)
    if evidence is None:
        return None
    return MemberHealth.of(
        state=str(evidence.state),
        certainty=spec_of(evidence.state).certainty.value,
        cause=evidence.cause,
        age_seconds=round((now - evidence.since).total_seconds(), 3),
    )


def lead_health(state: HealthState, name: str, *, now: datetime) -> LeadHealth | None:
    """One lead's health for its ``fleet_list`` lead row; None until a tick has seen it."""
    evidence = state.leads.get(name)
    if evidence is None:
        return None
    held = foreign_assignments(state.open_incidents()).get(name, [])
    return LeadHealth.of(
        state=str(evidence.state),
        age_seconds=round((now - evidence.since).total_seconds(), 3),
        assigned_foreign_incidents=len(held),
        foreign_incidents=[
            ForeignIncident.of(
                id=incident.id,
                subject=incident.subject,
                state=str(incident.state),
                severity=incident.severity.value,
                age_seconds=round((now - incident.opened_at).total_seconds(), 3),
                routing_generation=incident.routing_generation,
            )
            for incident in held[:FOREIGN_SHOWN]
        ],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetHealthPart:
    """The health part of ``fleet_list``, as models: the monitor's counters (``health``), the open
    incidents (``incidents``, which each scope filters) and the coverage (``healthCoverage``)."""

    block: FleetHealthBlock
    incidents: tuple[OpenIncident, ...]
    coverage: HealthCoverage


def fleet_health(
    state: HealthState,
    *,
    health: HealthConfig,
    leads: int,
    ticks: int,
    pane_reads: int,
    routing: Mapping[str, RoutingNote],
    now: datetime,
    covered: HealthCoverage,
) -> FleetHealthPart:
    """The health part of ``fleet_list``: monitor counters, incidents, coverage — no pane content.

    The link's verdict lives in the top-level ``controlLink`` and each lead's health in its
    top-level lead row, so neither appears here a second time.
    """
    return FleetHealthPart(
        block=FleetHealthBlock.of(enabled=health.enabled, ticks=ticks, pane_reads=pane_reads),
        incidents=tuple(
            open_incident(i, now=now, note=routing.get(i.id)) for i in state.open_incidents()
        ),
        coverage=covered,
    )


def open_incident(incident: Incident, *, now: datetime, note: RoutingNote | None) -> OpenIncident:
    """One open incident for ``fleet_list``: owner, recipient and ``routing`` once assigned —
    route (``lead`` or ``human``), reason, generation, on whose behalf, and for the human leg
    what became of it (each scope's view filters the incidents of one version)."""
    parts: dict[str, Any] = {}
    assignment = incident.assignment
    if assignment is not None:
        outcome = {}
        if assignment.route is Route.HUMAN and note is not None:
            outcome["outcome"] = note.outcome
        parts["routing"] = OpenIncidentRouting.of(
            route=assignment.route.value,
            reason=assignment.reason.value,
            generation=assignment.generation,
            on_behalf_of=assignment.on_behalf_of,
            **outcome,
        )
    evidence = dict(incident.evidence)
    if "repair_result" in evidence:
        parts["repair"] = OpenIncidentRepair.of(
            result=evidence["repair_result"],
            detail=evidence.get("repair_detail"),
            attempts=int(evidence.get("repair_attempts", "0")),
            retry=evidence.get("repair_retry"),
            reply_reconstructed=False,
            task_replayed=False,
        )
    return OpenIncident.of(
        id=incident.id,
        scope=incident.scope.value,
        subject=incident.subject,
        state=str(incident.state),
        severity=incident.severity.value,
        certainty=incident.certainty.value,
        age_seconds=round((now - incident.opened_at).total_seconds(), 3),
        owner=incident.owner_lead,
        recipient=incident.recipient_lead,
        **parts,
    )


def healthz_component(
    state: HealthState, *, ticks: int, covered: HealthCoverage
) -> FleetHealthComponent:
    """The nested ``fleetHealth`` component of ``/healthz``."""
    return FleetHealthComponent.of(
        status=covered.status,
        open_incidents=len(state.incidents),
        ticks=ticks,
        coverage=covered,
    )
