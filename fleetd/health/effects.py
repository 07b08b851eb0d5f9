"""What ``decide`` asks the runtime to do: effects, returned as values and never performed here.

One dispatcher in ``fleetd.runtime`` turns each effect into adapter calls. Names are imperative.
Incident effects are edge-triggered: they appear only on the tick where something changed.
Request effects (pane probes, target lookups) are per tick by nature and already passed through
the pane budget. Routing effects (:class:`PublishHealthRecord`, :class:`RouteToHuman`,
:class:`SupersedeAssignment`) appear on the tick an incident gets a new assignment
(:mod:`fleetd.health.routing`): once at open, then once per reassignment. ``decide`` returns
effects sorted by :func:`effect_order`, so two runs over the same input produce the same tuple
regardless of the order members or agents arrived in.

Effects never carry pane text, prompts, replies or exception messages: only ids, names, codes,
counts and times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from fleetd.health.fact import fact
from fleetd.health.incidents import Assignment, Incident, ResolveReason, RoutingReason
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
    "RequestTargetLookup",
    "ResolveIncident",
    "RetireLead",
    "RouteToHuman",
    "RoutingReason",
    "SupersedeAssignment",
    "UpdateIncident",
    "effect_order",
]


class FailCause(StrEnum):
    """Why the idempotent target-wide failure operation (CB-568) is requested."""

    GONE = "gone"
    NEVER_READY = "never_ready"
    DELEGATION_ORPHANED = "delegation_orphaned"


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


@fact  # one per routed incident: a routing pass may make a thousand
class PublishHealthRecord:
    """Publish a typed health record to ``recipient_lead``'s inbox key (§7.3, §7.4).

    The recipient is the exact owning lead (``reason`` ``owner``) or a healthy peer standing in
    for ``on_behalf_of`` (the failed owner, or the lead the incident is about). The record goes
    under the recipient's key, never the failed subject's; a status-gated push to a peer names
    ``on_behalf_of`` and the recipient's own ``fleet_poll`` call. ``recipient_terminal`` is the
    recipient's herdr terminal id when known. ``generation`` is the routing generation: a record
    of an older generation of the same incident is superseded (:class:`SupersedeAssignment`).
    ``recipient_instance`` names the other fleetd instance that serves the recipient (a lead on
    another host, whose own instance pushes it), ``None`` for a lead of this instance.
    """

    recipient_lead: str
    incident: Incident
    generation: int
    reason: RoutingReason
    on_behalf_of: str | None = None
    recipient_terminal: str | None = None
    recipient_instance: str | None = None


@fact  # one per routed incident: a routing pass may make a thousand
class RouteToHuman:
    """No lead can act on ``incident``: it goes to a person (§10.1), and stays open.

    Without a human sink the leg is passive: the incident stays visible on ``fleet_list``,
    ``/healthz``, metrics and the log, and coverage says ``partial``.
    """

    incident: Incident
    generation: int
    reason: RoutingReason
    on_behalf_of: str | None = None


@fact  # one per routed incident: a routing pass may make a thousand
class SupersedeAssignment:
    """``incident`` was reassigned: ``previous`` (its recipient and generation) is superseded.

    The runtime tells the previous lead recipient that the record it holds is handled elsewhere,
    or cancels a pending human delivery of the previous generation. ``incident.assignment`` is
    the new one; a :class:`PublishHealthRecord` or :class:`RouteToHuman` for it follows.
    """

    incident: Incident
    previous: Assignment


@dataclass(frozen=True, slots=True, kw_only=True)
class RetireLead:
    """Health stopped tracking a lead after its two-successful-snapshot retirement grace.

    Its own open incident resolved as ``subject_retired`` in the same tick, and no open incident
    is assigned to it any more (this tick's routing moved them). The runtime may
    release its inbox key once the queue is empty (§7.5); a non-empty key stays owned.
    """

    lead: str
    agent_name: str
    terminal_id: str | None


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


@fact  # one per classification that changed: a thousand a tick when a tenth of 10,000 move
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
    | RouteToHuman
    | SupersedeAssignment
    | RetireLead
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
    SupersedeAssignment: 4,
    PublishHealthRecord: 5,
    RouteToHuman: 6,
    CountMute: 7,
    RequestTargetLookup: 8,
    RequestPaneProbe: 9,
    RequestLostBoundaryRepair: 10,
    FailTargetWork: 11,
    RetireLead: 12,
}


def effect_order(effect: Effect) -> tuple[str, int, str]:
    """Sort key: by target (or subject), then a fixed kind order, then a tie-breaker.

    Within one target a pane probe comes before the failure operation, so a final evidence read
    is attempted before teardown.
    """
    if isinstance(effect, RecordTransition):  # the most frequent: one per member that moved
        return (effect.target or effect.subject, 0, f"{effect.scope}:{effect.subject}")
    if isinstance(
        effect,
        OpenIncident
        | UpdateIncident
        | ResolveIncident
        | SupersedeAssignment
        | PublishHealthRecord
        | RouteToHuman,
    ):
        incident = effect.incident
        return (incident.target or incident.subject, _RANK[type(effect)], incident.id)
    if isinstance(effect, RetireLead):
        return (effect.agent_name, _RANK[RetireLead], effect.lead)
    if isinstance(effect, CountMute | FailTargetWork | RequestLostBoundaryRepair):
        return (effect.target, _RANK[type(effect)], effect.session_id)
    return (effect.target, _RANK[type(effect)], "")
