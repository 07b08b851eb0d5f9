"""What each fleet tool answers: one result model per tool, the source of its result contract.

``contracts/api/<tool>.result.schema.json`` is generated from these models (see
:mod:`fleetd.api.schemas`), and the registry validates every handler's output against its tool's
model. The models describe the payloads the handlers build (``Ticket.public``, ``session_row``,
the release outcome, the fleet view); they do not build them, so validating changes nothing a
caller receives. Field names are camelCase on the wire.

A field that is *absent* when there is nothing to say is typed ``X | _Absent`` (never ``null`` in
the schema, and no ``default``: a default of ``null`` on a field whose schema refuses null is an
invalid schema, which OpenAPI validators reject); a field that is always present but may be
unknown is ``X | None`` with no default.
Models refuse unknown fields, except where the payload is genuinely open (inbox evidence) or is
still owned by another view (the nested health, inbox and config parts of ``fleet_list``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from fleetd.bridge.release import ReleaseCause, WorktreeAction
from fleetd.bridge.sessions import SessionState
from fleetd.bridge.tasks import Delivery, ResultSource, TicketOutcome
from fleetd.inbox.records import MessageKind, ReplySource, Severity
from fleetd.resilience import Availability, BreakerState, ErrorClass, Standing, VerdictReason
from fleetd.runtime.fleet_summary import InstanceSummary

__all__ = [
    "DependenciesBlock",
    "FleetAllAnswer",
    "FleetAllResult",
    "FleetHealthBlock",
    "FleetInstancePart",
    "FleetListResult",
    "InboxDrainResult",
    "PollResult",
    "ReleaseResult",
    "ReplyResult",
    "SessionRow",
    "TicketResult",
]

# Absent from the payload when there is nothing to say; the schema does not offer null.
_Absent = SkipJsonSchema[None]


def _admits_null(schema: dict[str, Any]) -> bool:
    """Whether a property schema lets ``null`` through (a ``$ref``'d model never does)."""
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches: list[dict[str, Any]] = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    return any(_admits_null(branch) for branch in branches)


def _absent_has_no_default(schema: dict[str, Any]) -> None:
    """Drop ``default: null`` from every property whose schema refuses null (an ``_Absent`` one):
    the field is simply not required, and the wire never carries that null."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None and not _admits_null(prop):
            del prop["default"]


class _Result(BaseModel):
    """A closed wire object: camelCase names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        json_schema_extra=_absent_has_no_default,
    )


class ModelHealthFlag(_Result):
    """The member's profile has its model benched (its provider's catalog no longer lists it):
    the work is accepted all the same — a live member is never refused — and the lead decides
    (``fleet_list``'s ``dependencies.models`` says more)."""

    state: Literal["benched"]
    benched_until: str


class TicketResult(_Result):
    """A ticket (``fleet_send``, ``fleet_poll`` with ``ticket``): never the prompt.
    ``modelHealth`` is on a ``fleet_send`` answer while the target's model is benched."""

    ticket: str
    target: str
    status: TicketOutcome
    accepted_at: str
    delivered_at: str | _Absent = None
    delivery: Delivery | _Absent = None
    prompt_refusals: int | _Absent = None
    resolved_at: str | None = None  # present once terminal; null only if no time was kept
    source: ResultSource | _Absent = None
    content: str | _Absent = None
    reason: str | _Absent = None
    hint: str | _Absent = None
    model_health: ModelHealthFlag | _Absent = None


class InboxMessage(_Result):
    """One drained inbox record: a member's reply or a health report."""

    msg_id: str
    kind: MessageKind
    target: str
    content: str
    created_at_epoch_millis: int | _Absent = None
    ticket: str | _Absent = None
    source: ReplySource | _Absent = None
    severity: Severity | _Absent = None
    state: str | _Absent = None
    subject_terminal: str | _Absent = None
    suggested_tool_calls: list[str] | _Absent = None
    evidence: dict[str, str | int | float | bool | None] | _Absent = None  # open: flat facts


class InboxDrainResult(_Result):
    """``fleet_poll`` without a ticket: what was taken from the caller's inbox, oldest first."""

    inbox: str
    messages: list[InboxMessage]


class PollResult(RootModel[TicketResult | InboxDrainResult]):
    """``fleet_poll``: one ticket, or an inbox drain."""


class OpenTurn(_Result):
    ticket: str
    turn: int
    delivery: Delivery | None
    delivered_age_seconds: float | None
    saw_working: bool
    baseline: str | None


class SessionRow(_Result):
    """One member (``fleet_spawn``, ``fleet_status``): states, counts and ages, no pane text;
    ``modelHealth`` while the live member's profile has its model benched."""

    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    pane_id: str | None
    state: SessionState
    presence: bool
    turn: int
    live_status: str | None
    queued: int
    pending_tickets: list[str]
    state_age_seconds: float | None
    open_turn: OpenTurn | _Absent = None
    idle_for_seconds: float | _Absent = None
    released_cause: str | _Absent = None
    branch: str | _Absent = None
    model_health: ModelHealthFlag | _Absent = None


class ReleaseResult(_Result):
    """``fleet_stop``: how the member (or orphan) was released."""

    session_id: str
    cause: ReleaseCause
    already: bool | _Absent = None
    orphaned: bool | _Absent = None
    worktree: WorktreeAction | _Absent = None


class ReplyResult(_Result):
    """``fleet_reply``: the reply is stored for the lead; ``ticket`` is null for a second reply."""

    accepted: Literal[True]
    ticket: str | None
    late: bool


class FleetMember(SessionRow):
    """A member of this run in ``fleet_list``, with its health once a tick has seen it."""

    health: dict[str, Any] | _Absent | None = None


class OrphanMember(_Result):
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
    branch: str | _Absent = None


class LiveAgent(_Result):
    """An agent as herdr's ``agent.list`` shows it."""

    name: str | None
    pane_id: str
    agent: str | None
    status: str


class CapacityRow(_Result):
    """One profile's capacity; ``maxLoad`` and ``free`` are null for an uncapped profile.
    ``benched``: the profile's model is benched — ``free`` is 0 and placement refuses it until
    ``benchedUntil``. ``contextWindow`` is the effective one (the provider catalog's, else the
    configured one; ``contextWindowSource`` says which)."""

    profile: str
    max_load: int | None
    live: int
    free: int | None
    reclaimable: int
    orphaned: int
    benched: bool
    context_window: int | None = None
    context_window_source: Literal["catalog", "config"] | None = None
    benched_until: str | None = None


class ForeignIncident(_Result):
    """An incident a lead holds for another (a peer assignment, §7.4): no pane content."""

    id: str
    subject: str
    state: str
    severity: str
    age_seconds: float
    routing_generation: int


class LeadHealth(_Result):
    """A lead's health state, how long it has held it, and the foreign incidents it holds
    (their count for everyone; the bounded list only for the operator and the lead itself)."""

    state: str
    age_seconds: float
    assigned_foreign_incidents: int
    foreign_incidents: list[ForeignIncident] | _Absent = None


class LeadRow(_Result):
    """A configured lead; push and inbox counts only for the operator and the lead itself."""

    name: str
    agent: str
    live_status: str | None
    inbox_depth: int | _Absent | None = None
    nudges_for_head: int | _Absent = None
    nudge_cap_reached: bool | _Absent = None
    health: LeadHealth | _Absent | None = None  # null until a tick has seen the lead


class FleetHealthBlock(_Result):
    """The monitor itself; the link's verdict and the leads' health live in their own rows."""

    enabled: bool
    ticks: int
    pane_reads: int


class _HealthRecord(_Result):
    """An endpoint's health record: reachability, EWMA latency, counts, the last error class."""

    reachable: bool | None
    latency_ms: float | None
    calls: int
    failures: int
    error_rate: float
    last_error: ErrorClass | None
    last_error_at: str | None
    last_ok_at: str | None


class DependencyEndpoint(_HealthRecord):
    """One endpoint of a dependency, by index and kind (never its URL): in use or why not."""

    index: int
    kind: str
    active: bool
    standing: Standing
    breaker: BreakerState
    breaker_ready_at: str | None


class InboxDependency(_Result):
    """The reply inbox's brokers; ``allDown`` makes ``/readyz`` not ready."""

    kind: str
    all_down: bool
    active: int | None
    endpoints: list[DependencyEndpoint]


class WebhookDependency(_Result):
    """The human sink's receivers in failover order (``kind`` ``disabled``: none); ``allDown``
    (no receiver's breaker closed) makes notification coverage degraded."""

    kind: str
    all_down: bool
    active: int | None
    endpoints: list[DependencyEndpoint]


class BenchedProfile(_Result):
    profile: str
    until: str


class ProviderDependency(_HealthRecord):
    """A model provider's catalog probe: the last one, the next due, and whom it benches."""

    name: str
    last_probe_at: str | None
    next_probe_at: str | None
    last_outcome: str | None  # "ok" or an error class
    listed_models: int | None
    benched: list[BenchedProfile]


class ModelSeat(_Result):
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


class DependenciesBlock(_Result):
    """fleetd's outbound dependencies (RFC 0018 §4.4; Model health)."""

    inbox: InboxDependency
    webhook: WebhookDependency | _Absent = None
    providers: list[ProviderDependency]
    models: list[ModelSeat]


class FleetListResult(_Result):
    """``fleet_list`` v1: the top level is closed; nested health and link views stay open."""

    version: Literal[1]
    view_version: Annotated[int, Field(ge=0)] | _Absent = Field(
        default=None, description="moves with every change the view shows (GET /v1/fleet ETag)"
    )
    generated_at: str
    agents_listed_at: str | None = Field(
        default=None, description="when herdr last listed its agents; null before a list"
    )
    agents_age_seconds: float | None = Field(
        default=None, description="how old that list was at generatedAt"
    )
    control_link: dict[str, Any]
    agents: list[LiveAgent] | None  # null while herdr cannot list them
    members: list[FleetMember | OrphanMember]
    capacity: list[CapacityRow]
    leads: list[LeadRow]
    inbox: dict[str, Any]
    teardown_failures: list[str]
    config: dict[str, Any]
    dependencies: DependenciesBlock | _Absent = None
    health: FleetHealthBlock | _Absent = None
    incidents: list[dict[str, Any]] | _Absent = None
    health_coverage: dict[str, Any] | _Absent = None
    preserved_worktrees: list[dict[str, Any]] | _Absent = None  # leads only


class FleetInstancePart(_Result):
    """One fleetd sharing the journal in ``GET /v1/fleet?scope=all``: the answering one with
    its own ``view``, every other one with its last published ``summary``. ``ageSeconds`` is
    the time since its last renewal (null: the answering one's row was not read); ``down``: silent
    for more than two snapshot intervals (INSTANCE_DOWN's rule), shown with its last summary."""

    instance: str
    answering: bool
    host: str
    fleetd_version: str
    started_at: str
    last_seen: str | None
    age_seconds: float | None
    down: bool
    view: FleetListResult | _Absent = None  # the answering instance only
    summary: InstanceSummary | None = Field(
        default=None, description="the other instances' last published summary (null: unreadable)"
    )
    summary_problem: str | _Absent = Field(
        default=None, description="why summary is null: not_published, unknown_version: N"
    )


class FleetJournalRead(_Result):
    """Whether the journal is shared (PostgreSQL) and whether its instance rows were read."""

    shared: bool
    read: Literal["ok", "failed", "not_shared"]
    reason: str | _Absent = None


class FleetAllResult(_Result):
    """``GET /v1/fleet?scope=all`` v1: every fleetd sharing the journal, the answering one first
    (see :mod:`fleetd.runtime.fleet_all`)."""

    version: Literal[1]
    scope: Literal["all"]
    instance: str
    generated_at: str
    interval_seconds: float
    journal: FleetJournalRead
    instances: list[FleetInstancePart]
    live: Annotated[int, Field(ge=1)]
    down: Annotated[int, Field(ge=0)]
    note: str | _Absent = None


class FleetAllAnswer(_Result):
    """The success branch of ``GET /v1/fleet?scope=all``'s answer."""

    model_config = ConfigDict(alias_generator=None)

    ok: Literal[True]
    result: FleetAllResult
