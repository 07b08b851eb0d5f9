"""The summary an instance publishes with each renewal of its journal row (issue 24).

Several fleetd share one PostgreSQL journal; ``GET /v1/fleet?scope=all`` on any of them shows
each other instance's last published :class:`InstanceSummary`. A summary is a projection of
this instance's operator ``fleet_list`` view: the same field names, fewer of them, so a client
that reads one reads the other. It holds what a fleet-wide view needs — the control link's
state, notification coverage, each lead with its health, members with their lead, state and
health, open incidents with their routing, capacity — and never pane content, prompts, replies,
tokens, URLs or paths.

It is bounded: at most :data:`MAX_SUMMARY_LEADS` leads, :data:`MAX_SUMMARY_MEMBERS` members and
:data:`MAX_SUMMARY_INCIDENTS` incidents, each list with a count of the rows left out
(``membersByLead`` counts every member all the same). Members in trouble (a health state other
than idle, working or starting, a failed or orphaned member) are kept before quiet ones, and
the most severe incidents before the others. Every age is as of ``generatedAt``; a reader adds
the age of the row it read.

:func:`summarize` is pure: a view in, a summary out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "MAX_SUMMARY_INCIDENTS",
    "MAX_SUMMARY_LEADS",
    "MAX_SUMMARY_MEMBERS",
    "SUMMARY_VERSION",
    "InstanceSummary",
    "summarize",
]

SUMMARY_VERSION: Final = 1
MAX_SUMMARY_LEADS: Final = 256
"""Most leads one summary lists."""
MAX_SUMMARY_MEMBERS: Final = 5_000
"""Most member rows one summary lists (about 1 MB encoded)."""
MAX_SUMMARY_INCIDENTS: Final = 1_000
"""Most open incidents one summary lists."""

_QUIET_MEMBERS: Final = frozenset({"IDLE", "WORKING", "STARTING"})
_TROUBLED_STATES: Final = frozenset({"failed", "orphaned"})
_SEVERITY_RANK: Final = {"critical": 0, "warning": 1, "info": 2}


class _Part(BaseModel):
    """A closed wire object: camelCase names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True
    )


class SummaryLink(_Part):
    """The herdr control link as this instance last judged it."""

    state: str


class SummaryCoverage(_Part):
    """Notification coverage (``full``, ``partial``, ``degraded``, ``off``) and why."""

    status: str
    reason: str | None = None


class SummaryLeadHealth(_Part):
    """A lead's health state, its age, and how many foreign incidents it holds."""

    state: str
    age_seconds: float
    assigned_foreign_incidents: int


class SummaryLead(_Part):
    """A lead this instance serves: herdr's status of its agent and its health."""

    name: str
    agent: str
    live_status: str | None
    health: SummaryLeadHealth | None


class SummaryMemberHealth(_Part):
    """A member's health state and how long it has held it."""

    state: str
    age_seconds: float | None = None


class SummaryMember(_Part):
    """One member: who it is, whose it is, its state and health."""

    session_id: str
    name: str
    owner: str
    profile: str
    state: str
    live_status: str | None = None
    turn: int = 0
    queued: int = 0
    state_age_seconds: float | None = None
    health: SummaryMemberHealth | None = None


class SummaryRouting(_Part):
    """Where an incident is routed: ``lead`` or ``human``, why, and (human) what became of it."""

    route: str
    reason: str
    generation: int
    on_behalf_of: str | None = None
    outcome: str | None = None


class SummaryIncident(_Part):
    """One open incident with its routing."""

    id: str
    scope: str
    subject: str
    state: str
    severity: str
    age_seconds: float
    owner: str | None = None
    recipient: str | None = None
    routing: SummaryRouting | None = None


class SummaryCapacity(_Part):
    """One profile's capacity: live members, the cap and what is free (null: uncapped)."""

    profile: str
    max_load: int | None
    live: int
    free: int | None


class InstanceSummary(_Part):
    """What one instance publishes of its fleet, version 1 (see the module doc)."""

    version: Literal[1] = SUMMARY_VERSION
    instance: str
    generated_at: str
    control_link: SummaryLink
    health_coverage: SummaryCoverage | None = None
    leads: list[SummaryLead]
    leads_left_out: int = Field(default=0, ge=0)
    members: list[SummaryMember]
    members_total: int = Field(ge=0)
    members_left_out: int = Field(default=0, ge=0)
    members_by_lead: dict[str, int]
    incidents: list[SummaryIncident]
    incidents_total: int = Field(default=0, ge=0)
    incidents_left_out: int = Field(default=0, ge=0)
    capacity: list[SummaryCapacity]


def _member(row: Mapping[str, Any]) -> SummaryMember:
    health = row.get("health")
    return SummaryMember(
        session_id=str(row["sessionId"]),
        name=str(row["name"]),
        owner=str(row["owner"]),
        profile=str(row.get("profile", "")),
        state=str(row["state"]),
        live_status=row.get("liveStatus"),
        turn=int(row.get("turn", 0)),
        queued=int(row.get("queued", 0)),
        state_age_seconds=row.get("stateAgeSeconds", row.get("orphanedForSeconds")),
        health=SummaryMemberHealth(state=str(health["state"]), age_seconds=health["ageSeconds"])
        if isinstance(health, Mapping)
        else None,
    )


def _troubled(row: Mapping[str, Any]) -> bool:
    health = row.get("health")
    state = health.get("state") if isinstance(health, Mapping) else None
    troubled_health = state is not None and state not in _QUIET_MEMBERS
    return row.get("state") in _TROUBLED_STATES or troubled_health


def _lead(row: Mapping[str, Any]) -> SummaryLead:
    health = row.get("health")
    return SummaryLead(
        name=str(row["name"]),
        agent=str(row["agent"]),
        live_status=row.get("liveStatus"),
        health=SummaryLeadHealth(
            state=str(health["state"]),
            age_seconds=health["ageSeconds"],
            assigned_foreign_incidents=int(health["assignedForeignIncidents"]),
        )
        if isinstance(health, Mapping)
        else None,
    )


def _incident(row: Mapping[str, Any]) -> SummaryIncident:
    routing = row.get("routing")
    return SummaryIncident(
        id=str(row["id"]),
        scope=str(row["scope"]),
        subject=str(row["subject"]),
        state=str(row["state"]),
        severity=str(row["severity"]),
        age_seconds=row["ageSeconds"],
        owner=row.get("owner"),
        recipient=row.get("recipient"),
        routing=SummaryRouting(
            route=str(routing["route"]),
            reason=str(routing["reason"]),
            generation=int(routing["generation"]),
            on_behalf_of=routing.get("onBehalfOf"),
            outcome=routing.get("outcome"),
        )
        if isinstance(routing, Mapping)
        else None,
    )


def summarize(
    view: Mapping[str, Any],
    *,
    instance: str,
    max_members: int = MAX_SUMMARY_MEMBERS,
    max_incidents: int = MAX_SUMMARY_INCIDENTS,
    max_leads: int = MAX_SUMMARY_LEADS,
) -> InstanceSummary:
    """The summary ``instance`` publishes of ``view``, its operator ``fleet_list`` view."""
    members: list[Mapping[str, Any]] = list(view.get("members", ()))
    kept = sorted(members, key=lambda row: not _troubled(row))[:max_members]  # stable
    incidents: list[Mapping[str, Any]] = list(view.get("incidents") or ())
    worst = sorted(incidents, key=lambda row: _SEVERITY_RANK.get(str(row.get("severity")), 3))
    leads: list[Mapping[str, Any]] = list(view.get("leads", ()))
    coverage = view.get("healthCoverage")
    return InstanceSummary(
        instance=instance,
        generated_at=str(view["generatedAt"]),
        control_link=SummaryLink(state=str((view.get("controlLink") or {}).get("state"))),
        health_coverage=SummaryCoverage(
            status=str(coverage["status"]), reason=coverage.get("reason")
        )
        if isinstance(coverage, Mapping)
        else None,
        leads=[_lead(row) for row in leads[:max_leads]],
        leads_left_out=max(0, len(leads) - max_leads),
        members=[_member(row) for row in kept],
        members_total=len(members),
        members_left_out=len(members) - len(kept),
        members_by_lead=dict(sorted(Counter(str(row["owner"]) for row in members).items())),
        incidents=[_incident(row) for row in worst[:max_incidents]],
        incidents_total=len(incidents),
        incidents_left_out=max(0, len(incidents) - max_incidents),
        capacity=[
            SummaryCapacity(
                profile=str(row["profile"]),
                max_load=row.get("maxLoad"),
                live=int(row.get("live", 0)),
                free=row.get("free"),
            )
            for row in view.get("capacity", ())
        ],
    )
