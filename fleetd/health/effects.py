"""What ``decide`` asks the runtime to do: effects, returned as values and never performed here.

One dispatcher in ``fleetd.runtime`` turns each effect into adapter calls. Names are imperative.
Incident effects are edge-triggered: they appear only on the tick where something changed.
Request effects (pane probes, target lookups) are per tick by nature and already passed through
the pane budget. ``decide`` returns effects sorted by :func:`effect_order`, so two runs over the
same input produce the same tuple regardless of the order members or agents arrived in.

Effects never carry pane text, prompts, replies or exception messages: only ids, names, codes,
counts and times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from fleetd.health.incidents import Incident, ResolveReason
from fleetd.health.pane_budget import ProbeReason
from fleetd.health.snapshot import ProbeSource
from fleetd.health.states import Scope

__all__ = [
    "CountMute",
    "Effect",
    "FailCause",
    "FailTargetWork",
    "OpenIncident",
    "PublishHealthRecord",
    "RecordTransition",
    "RequestLostBoundaryRepair",
    "RequestPaneProbe",
    "RequestRouting",
    "RequestTargetLookup",
    "ResolveIncident",
    "RoutingReason",
    "UpdateIncident",
    "effect_order",
]


class FailCause(StrEnum):
    """Why the idempotent target-wide failure operation (CB-568) is requested."""

    GONE = "gone"
    NEVER_READY = "never_ready"
    DELEGATION_ORPHANED = "delegation_orphaned"


class RoutingReason(StrEnum):
    """Why an incident goes to the router (peer lead or person) instead of its owning lead."""

    NO_OWNER = "no_owner"
    OWNER_UNHEALTHY = "owner_unhealthy"
    LEAD_FAULT = "lead_fault"
    CONTROL_LINK = "control_link"
    FLEET_SCOPE = "fleet_scope"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenIncident:
    """Record a newly opened incident (journal, metrics, fleet_list)."""

    incident: Incident


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateIncident:
    """An open incident changed in a way its readers must see (for example committed work)."""

    incident: Incident


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveIncident:
    """An open incident closed."""

    incident: Incident
    reason: ResolveReason
    resolved_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishHealthRecord:
    """Publish a typed health record under the member's key for its exact owning lead (§7.3)."""

    recipient_lead: str
    incident: Incident


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRouting:
    """Hand an incident to the router: healthy peer lead, else a person, else partial coverage."""

    incident: Incident
    reason: RoutingReason


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPaneProbe:
    """Read one pane within the budget; the result comes back in the next snapshot's probes."""

    target: str
    pane_id: str
    source: ProbeSource
    reason: ProbeReason


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTargetLookup:
    """Make one per-target herdr call (``agent.get``) for a target absent from a good list."""

    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FailTargetWork:
    """Run the idempotent target-wide failure operation: fail queued, accepted and async work."""

    target: str
    session_id: str
    cause: FailCause


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestLostBoundaryRepair:
    """Ask ``reconcileLostBoundary(target, token)``; the strict gates of §8 live elsewhere."""

    target: str
    session_id: str
    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CountMute:
    """Count completion-fallback resolutions (a metric, not an incident)."""

    target: str
    session_id: str
    profile: str
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordTransition:
    """A subject's classification changed (``previous`` is ``None`` when first seen)."""

    scope: Scope
    subject: str
    target: str | None
    previous: str | None
    current: str
    at: datetime


Effect = (
    OpenIncident
    | UpdateIncident
    | ResolveIncident
    | PublishHealthRecord
    | RequestRouting
    | RequestPaneProbe
    | RequestTargetLookup
    | FailTargetWork
    | RequestLostBoundaryRepair
    | CountMute
    | RecordTransition
)

_RANK: Final[dict[type, int]] = {
    RecordTransition: 0,
    ResolveIncident: 1,
    OpenIncident: 2,
    UpdateIncident: 3,
    PublishHealthRecord: 4,
    RequestRouting: 5,
    CountMute: 6,
    RequestTargetLookup: 7,
    RequestPaneProbe: 8,
    RequestLostBoundaryRepair: 9,
    FailTargetWork: 10,
}


def effect_order(effect: Effect) -> tuple[str, int, str]:
    """Sort key: by target (or subject), then a fixed kind order, then a tie-breaker.

    Within one target a pane probe comes before the failure operation, so a final evidence read
    is attempted before teardown.
    """
    if isinstance(effect, OpenIncident | UpdateIncident | ResolveIncident):
        incident = effect.incident
        return (incident.target or incident.subject, _RANK[type(effect)], incident.id)
    if isinstance(effect, PublishHealthRecord | RequestRouting):
        incident = effect.incident
        return (incident.target or incident.subject, _RANK[type(effect)], incident.id)
    if isinstance(effect, RecordTransition):
        return (effect.target or effect.subject, 0, f"{effect.scope}:{effect.subject}")
    if isinstance(effect, CountMute | FailTargetWork | RequestLostBoundaryRepair):
        return (effect.target, _RANK[type(effect)], effect.session_id)
    return (effect.target, _RANK[type(effect)], "")
