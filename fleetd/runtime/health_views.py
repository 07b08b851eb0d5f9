"""The health part of what fleetd shows: ``fleet_list`` health, the ``/healthz`` component.

Pure renderers: the monitor's state, counters and routing notes and ``now`` in, JSON-ready dicts
out. No pane content ever reaches a view, only states, codes, names and ages. Coverage says what
this build can do about an incident no lead can act on (§10.2): detection only, so ``partial``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from fleetd.config import HealthConfig, NotificationMode
from fleetd.config.floors import TWO_SNAPSHOTS
from fleetd.health.evidence import HealthState
from fleetd.health.incidents import Incident
from fleetd.health.states import ControlLinkState, spec_of
from fleetd.runtime.dispatch import RoutingNote
from fleetd.runtime.link import LinkState

__all__ = [
    "coverage",
    "fleet_health",
    "healthz_component",
    "incident_row",
    "lead_health",
    "link_view",
    "member_health",
]


def coverage(health: HealthConfig) -> dict[str, Any]:
    """What detection and escalation this deployment has (§10.2)."""
    if not health.enabled:
        return {"detection": "disabled", "humanEscalation": "unavailable", "status": "off"}
    webhook = health.notifications.mode is NotificationMode.WEBHOOK
    return {
        "detection": "enabled",
        "peerRouting": "unavailable",
        "humanEscalation": "unavailable",
        "status": "partial",
        "reason": (
            "webhook configured but the human sink is not part of this build"
            if webhook
            else "notifications disabled: no person is told when no lead can act"
        ),
    }


def link_view(
    link: LinkState, *, classified: ControlLinkState | None, now: datetime, interval: timedelta
) -> dict[str, Any]:
    """The control link for ``fleet_list``, ``/healthz`` and the link gauge: health's verdict,
    or (health off) the calls judged over the same two-snapshot window."""
    window = TWO_SNAPSHOTS * interval
    return link.view(classified, now=now, window=window)


def member_health(state: HealthState, session_id: str, *, now: datetime) -> dict[str, Any] | None:
    """One member's health row for ``fleet_list``; None until a tick has seen it."""
    evidence = state.members.get(session_id)
    if evidence is None:
        return None
    return {
        "state": str(evidence.state),
        "certainty": spec_of(evidence.state).certainty.value,
        "cause": evidence.cause,
        "ageSeconds": round((now - evidence.since).total_seconds(), 3),
    }


def lead_health(state: HealthState, name: str, *, now: datetime) -> dict[str, Any] | None:
    """One lead's health for its ``fleet_list`` lead row; None until a tick has seen it."""
    evidence = state.leads.get(name)
    if evidence is None:
        return None
    return {
        "state": str(evidence.state),
        "ageSeconds": round((now - evidence.since).total_seconds(), 3),
    }


def fleet_health(
    state: HealthState,
    *,
    health: HealthConfig,
    ticks: int,
    pane_reads: int,
    routing: Mapping[str, RoutingNote],
    now: datetime,
) -> dict[str, Any]:
    """The health part of ``fleet_list``: monitor counters, incidents, coverage — no pane content.

    The link's verdict lives in the top-level ``controlLink`` and each lead's health in its
    top-level lead row, so neither appears here a second time.
    """
    return {
        "health": {"enabled": health.enabled, "ticks": ticks, "paneReads": pane_reads},
        "incidents": [
            incident_row(i, now=now, note=routing.get(i.id)) for i in state.open_incidents()
        ],
        "healthCoverage": coverage(health),
    }


def incident_row(incident: Incident, *, now: datetime, note: RoutingNote | None) -> dict[str, Any]:
    """One open incident for ``fleet_list``, with its routing note when routing holds it."""
    row: dict[str, Any] = {
        "id": incident.id,
        "scope": incident.scope.value,
        "subject": incident.subject,
        "state": str(incident.state),
        "severity": incident.severity.value,
        "certainty": incident.certainty.value,
        "ageSeconds": round((now - incident.opened_at).total_seconds(), 3),
        "owner": incident.owner_lead,
        "recipient": incident.recipient_lead,
    }
    if note is not None:
        row["routing"] = {"reason": note.reason, "outcome": note.outcome}
    evidence = dict(incident.evidence)
    if "repair_result" in evidence:
        row["repair"] = {
            "result": evidence["repair_result"],
            "detail": evidence.get("repair_detail"),
            "attempts": int(evidence.get("repair_attempts", "0")),
            "retry": evidence.get("repair_retry"),
            "replyReconstructed": False,
            "taskReplayed": False,
        }
    return row


def healthz_component(state: HealthState, *, health: HealthConfig, ticks: int) -> dict[str, Any]:
    """The nested ``fleetHealth`` component of ``/healthz``."""
    covered = coverage(health)
    return {
        "status": covered["status"],
        "openIncidents": len(state.incidents),
        "ticks": ticks,
        "coverage": covered,
    }
