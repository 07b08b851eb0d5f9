"""The parts of ``fleet_list`` (and ``GET /v1/fleet``) as the models that describe and build them.

``contracts/api/fleet_list.result.schema.json`` is generated from :class:`FleetListResult`
(through :mod:`fleetd.api.results`). The view's builders (:mod:`fleetd.runtime.fleet_view`,
:mod:`fleetd.runtime.fleet_parts`, :mod:`fleetd.runtime.health_views`, and the bridge's
:mod:`fleetd.bridge.view` for member and capacity rows) make each part as its model with
:meth:`~fleetd.bridge.answers.WireModel.of` (no validation: a view of a thousand members builds
many) and hand on its wire JSON (:func:`~fleetd.bridge.answers.wire`): camelCase, only the fields
it was given, in the order the model declares them. The registry checks the ``fleet_list`` answer
against :class:`FleetListResult`.

The control link, ``healthCoverage``, the ``dependencies`` block and herdr's agents are built as
their models too (:mod:`fleetd.runtime.link`, :mod:`fleetd.runtime.health_views`,
:mod:`fleetd.runtime.dependencies`, :mod:`fleetd.runtime.live_agents`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fleetd.bridge.answers import Absent, CapacityRow, SessionRow, WireModel
from fleetd.bridge.release import ReleaseCause
from fleetd.inbox.codec import DecodeReason
from fleetd.inbox.failures import Disposition
from fleetd.resilience import Availability, BreakerState, ErrorClass, Standing, VerdictReason

__all__ = [
    "BenchedProfile",
    "BrokerReadiness",
    "ConfigStatus",
    "ControlLink",
    "DecodeFailureRow",
    "DependenciesBlock",
    "DependencyEndpoint",
    "DependencyReadiness",
    "FleetHealthBlock",
    "FleetListResult",
    "FleetMember",
    "ForeignIncident",
    "HealthCoverage",
    "HeldInMemory",
    "InboxBlock",
    "InboxDependency",
    "LeadHealth",
    "LeadRow",
    "LiveAgent",
    "MemberHealth",
    "ModelSeat",
    "OpenIncident",
    "OpenIncidentRepair",
    "OpenIncidentRouting",
    "OrphanMember",
    "PreservedWorktreeRow",
    "ProviderDependency",
    "WebhookDependency",
]


class MemberHealth(WireModel):
    """A member's health state, how sure it is, its cause, and how long it has held it."""

    state: str
    certainty: str
    cause: str
    age_seconds: float


class FleetMember(SessionRow):
    """A member of this run in ``fleet_list``, with its health once a tick has seen it."""

    health: MemberHealth | Absent | None = None


class OrphanMember(WireModel):
    """A member a previous run left running: nothing to send it, only to stop it."""

    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    pane_id: str
    state: Literal["orphaned"]
    run: str
    live_status: str | None
    orphaned_for_seconds: float
    suggested_tool_calls: list[str]
    branch: str | Absent = None


class LiveAgent(WireModel):
    """An agent as herdr's ``agent.list`` shows it."""

    name: str | None
    pane_id: str
    agent: str | None
    status: str


class ForeignIncident(WireModel):
    """An incident a lead holds for another (a peer assignment, §7.4): no pane content."""

    id: str
    subject: str
    state: str
    severity: str
    age_seconds: float
    routing_generation: int


class LeadHealth(WireModel):
    """A lead's health state, how long it has held it, and the foreign incidents it holds
    (their count for everyone; the bounded list only for the operator and the lead itself)."""

    state: str
    age_seconds: float
    assigned_foreign_incidents: int
    foreign_incidents: list[ForeignIncident] | Absent = None


class LeadRow(WireModel):
    """A configured lead; push and inbox counts only for the operator and the lead itself."""

    name: str
    agent: str
    live_status: str | None
    inbox_depth: int | Absent | None = None
    nudges_for_head: int | Absent = None
    nudge_cap_reached: bool | Absent = None
    health: LeadHealth | Absent | None = None  # null until a tick has seen the lead


class ControlLink(WireModel):
    """The control link to herdr (``fleet_list.controlLink``, the ``/healthz`` component):
    ``state`` is health's verdict or, health off, the calls' over two snapshot intervals
    (``classifiedBy`` says which); ``lastCall`` is the last call's own outcome, null before one."""

    state: Literal["unknown", "up", "down"]
    classified_by: Literal["health", "calls"]
    last_call: Literal["ok", "failed"] | None
    last_ok_at: str | None
    last_failure_at: str | None
    last_failure_code: str | None
    consecutive_failures: Annotated[int, Field(ge=0)]
    herdr_version: str | None
    herdr_protocol: int | None


class HealthCoverage(WireModel):
    """What this deployment can do about an incident no lead can act on (§10.2, §7.6); health
    off says only that (no ``peerRouting``, no ``reason``)."""

    detection: Literal["enabled", "disabled"]
    peer_routing: Literal["available", "no_peer"] | Absent = None
    human_escalation: str  # the sink's kind, or "unavailable"
    status: Literal["full", "partial", "degraded", "off"]
    reason: str | Absent = None


class FleetHealthBlock(WireModel):
    """The monitor itself; the link's verdict and the leads' health live in their own rows."""

    enabled: bool
    ticks: int
    pane_reads: int


class _HealthRecord(WireModel):
    """An endpoint's health record: reachability, EWMA latency, counts, the last error class."""

    reachable: bool | None
    latency_ms: float | None
    calls: int
    failures: int
    error_rate: float
    last_error: ErrorClass | None
    last_error_at: str | None
    last_ok_at: str | None


class _EndpointPlace(WireModel):
    """Where an endpoint stands among its dependency's: by index and kind (never its URL)."""

    index: int
    kind: str
    active: bool
    standing: Standing
    breaker: BreakerState
    breaker_ready_at: str | None


# The health record comes last, as the block has always been written: pydantic lays out the
# fields base by base from the last base to the first.
class DependencyEndpoint(_HealthRecord, _EndpointPlace):
    """One endpoint of a dependency, by index and kind (never its URL): in use or why not."""


class BrokerReadiness(WireModel):
    """The reply inbox's brokers as ``/readyz`` shows them: the one in use and whether all are
    down (``kind`` ``memory``: none)."""

    kind: str
    all_down: bool
    active: int | None


class DependencyReadiness(WireModel):
    """What ``/readyz`` adds about the dependencies: the reply inbox's brokers."""

    inbox: BrokerReadiness


class InboxDependency(BrokerReadiness):
    """The reply inbox's brokers; ``allDown`` makes ``/readyz`` not ready."""

    endpoints: list[DependencyEndpoint]


class WebhookDependency(WireModel):
    """The human sink's receivers in failover order (``kind`` ``disabled``: none); ``allDown``
    (no receiver's breaker closed) makes notification coverage degraded."""

    kind: str
    all_down: bool
    active: int | None
    endpoints: list[DependencyEndpoint]


class BenchedProfile(WireModel):
    profile: str
    until: str


class _ProviderProbe(WireModel):
    """A model provider's catalog probe: the last one, the next due, and whom it benches."""

    name: str
    last_probe_at: str | None
    next_probe_at: str | None
    last_outcome: str | None  # "ok" or an error class
    listed_models: int | None
    benched: list[BenchedProfile]


class ProviderDependency(_HealthRecord, _ProviderProbe):  # the health record last, as above
    """A model provider's catalog probe: the last one, the next due, and whom it benches."""


class ModelSeat(WireModel):
    """A profile's model: the verdict on it, its bench, its effective context window."""

    profile: str
    provider: str | None
    model: str
    verdict: Availability
    reason: VerdictReason
    benched_until: str | None
    strikes: int
    context_window: int | None
    context_window_source: Literal["catalog", "config"] | None


class DependenciesBlock(WireModel):
    """fleetd's outbound dependencies (RFC 0018 §4.4; Model health)."""

    inbox: InboxDependency
    webhook: WebhookDependency | Absent = None
    providers: list[ProviderDependency]
    models: list[ModelSeat]


class PreservedWorktreeRow(WireModel):
    """A worktree a release left behind (shown to its lead only, paths included)."""

    session_id: str
    role: str
    profile: str
    repository: str
    path: str
    branch: str
    base_commit: str
    cause: ReleaseCause
    released_at: str
    state: str
    pending_task_ids: list[str]


class DecodeFailureRow(WireModel):
    """An inbox entry that could not be decoded, summarised: no body, no content."""

    key: str
    reason: DecodeReason
    disposition: Disposition
    message_id: str
    version: int | None
    occurrences: int
    last_seen_epoch_millis: int


class HeldInMemory(WireModel):
    """Records accepted for a lead that the inbox has not taken yet (they live in memory);
    ``gaveWay`` counts the records that gave way to the bound, which all leads share."""

    records: int
    by_lead: dict[str, int]
    by_kind: dict[str, int]
    oldest_created_epoch_millis: int | None
    gave_way: int


class InboxBlock(WireModel):
    """The reply inbox as a caller sees it: reachability, its decode failures, records held."""

    reachable: bool
    failures: list[DecodeFailureRow]
    held_in_memory: HeldInMemory


class ConfigStatus(WireModel):
    """The config as loaded: when, the last reload's error, keys waiting for a restart."""

    loaded_at: str
    last_reload_error_key: str | None
    last_reload_error_reason: str | None
    pending_restart_keys: list[str]
    reload_failures: int


class OpenIncidentRouting(WireModel):
    """Where an assigned incident went: route (``lead`` or ``human``), reason, generation, on
    whose behalf, and for the human leg what became of it."""

    route: str
    reason: str
    generation: int
    on_behalf_of: str | None
    outcome: str | Absent = None


class OpenIncidentRepair(WireModel):
    """What the repair of a lost turn boundary did; a reply is never reconstructed, a task
    never replayed."""

    result: str
    detail: str | None
    attempts: int
    retry: str | None
    reply_reconstructed: bool
    task_replayed: bool


class OpenIncident(WireModel):
    """One open incident in ``fleet_list``: owner, recipient and ``routing`` once assigned."""

    id: str
    scope: str
    subject: str
    state: str
    severity: str
    certainty: str
    age_seconds: float
    owner: str | None
    recipient: str | None
    routing: OpenIncidentRouting | Absent = None
    repair: OpenIncidentRepair | Absent = None


class FleetListResult(WireModel):
    """``fleet_list`` v1: the top level and every block in it are closed objects."""

    version: Literal[1]
    view_version: Annotated[int, Field(ge=0)] | Absent = Field(
        default=None, description="moves with every change the view shows (GET /v1/fleet ETag)"
    )
    generated_at: str
    agents_listed_at: str | None = Field(
        default=None, description="when herdr last listed its agents; null before a list"
    )
    agents_age_seconds: float | None = Field(
        default=None, description="how old that list was at generatedAt"
    )
    control_link: ControlLink
    agents: list[LiveAgent] | None  # null while herdr cannot list them
    members: list[FleetMember | OrphanMember]
    capacity: list[CapacityRow]
    leads: list[LeadRow]
    inbox: InboxBlock
    teardown_failures: list[str]
    config: ConfigStatus
    health: FleetHealthBlock | Absent = None
    incidents: list[OpenIncident] | Absent = None
    health_coverage: HealthCoverage | Absent = None
    dependencies: DependenciesBlock | Absent = None
    preserved_worktrees: list[PreservedWorktreeRow] | Absent = None  # leads only
