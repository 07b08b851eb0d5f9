"""The outbound event payload (version 1) and the one builder that decides what leaves fleetd.

M4 §10.5 allows an outbound event to carry the incident id and event type, severity, state,
scope, stable bridge ids, role or profile, times and duration, structured evidence types and
counts, whether recovery was attempted, the routing reason, coverage and safe tool calls — and
forbids pane text, excerpts or digests, task briefs, prompts, replies, file content, worktree
paths, environment values, tokens, credentials, headers, the webhook URL, raw exception text and
model output. Two layers hold that line:

1. **The model is closed.** :class:`IncidentEvent` and its parts forbid extra keys (the JSON
   Schema in ``contracts/webhook/`` says ``additionalProperties: false`` at every level) and every
   string is an enum value, a fixed-form id, or a *name* or *code* in a narrow grammar: names are
   ``[A-Za-z0-9][A-Za-z0-9_.-]*`` (at most 64), codes are lowercase words joined by ``.``, ``_``
   or ``-``, and neither may hold a run of 16 or more letters and digits. No text with a space,
   newline, slash, colon, quote, ``@`` or ``=`` fits, so prose, paths, URLs, headers, exception
   text and ``KEY=value`` cannot; the run limit keeps out tokens, keys and digests (a hex digest,
   an ``AKIA…`` key, a ``ghp_…`` token). Incident and event ids have their own fixed forms.
2. **The builder never lets a value fail into the payload.** :func:`build_event` takes plain
   values; a name or cause outside its grammar becomes the literal ``"redacted"``, an evidence
   pair that is not a code with a count is dropped, a suggested tool call that is not one of the
   literal read-only forms is dropped. Only an impossible event (bad incident id, revision or
   type, a naive time) raises: there is then no payload at all.

The grammar cannot tell a secret that *looks like* a short name from a name; the builder's inputs
are the incident's own ids and codes, which by construction never hold one (§10.3 keeps times,
text and digests out of cause fingerprints).

The schema is closed, so any change to the body's shape, even an added field, is a new
``schemaVersion`` with its own schema file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from fleetd.health.incidents import Incident, ResolveReason, RoutingReason, suggested_tool_calls
from fleetd.health.states import STATE_SPECS, Certainty, Scope, Severity
from fleetd.model.events import EVENT_ID_PATTERN, EventType, idempotency_key

__all__ = [
    "CODE_PATTERN",
    "NAME_PATTERN",
    "REDACTED",
    "SCHEMA_VERSION",
    "TOOL_CALL_PATTERN",
    "CoverageStatus",
    "EvidenceCount",
    "IncidentEvent",
    "IncidentFacts",
    "Routing",
    "build_event",
    "encode_event",
    "event_from_incident",
]

SCHEMA_VERSION: Final = 1
REDACTED: Final = "redacted"
"""What a name or cause outside its grammar becomes (itself a valid name and code)."""

MAX_EVIDENCE: Final = 16
MAX_TOOL_CALLS: Final = 4
MAX_COUNT: Final = 1_000_000_000

_NO_LONG_RUN = r"(?!.*[A-Za-z0-9]{16})"
NAME_PATTERN: Final = rf"^{_NO_LONG_RUN}[A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}$"
"""A stable bridge id or configured name: session id, lead, profile, fleetd instance."""
CODE_PATTERN: Final = rf"^{_NO_LONG_RUN}[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$"
"""A stable code: a cause, a signature id, an evidence type."""
TOOL_CALL_PATTERN: Final = (
    rf"^{_NO_LONG_RUN}fleet_(?:list|status|poll)"
    r'\((?:(?:sessionId|ticket|target)="[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")?\)$'
)
"""A literal read-only tool call a person may run (``fleet_status(sessionId="s-1")``)."""
INCIDENT_ID_PATTERN: Final = r"^inc_[0-9a-f]{24}$"

_NAME = re.compile(NAME_PATTERN)
_CODE = re.compile(CODE_PATTERN)
_TOOL_CALL = re.compile(TOOL_CALL_PATTERN)
_COUNT = re.compile(r"[0-9]{1,10}")
_STATES: Final = tuple(sorted(str(state) for state in STATE_SPECS))

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN, max_length=64)]
Code = Annotated[str, StringConstraints(pattern=CODE_PATTERN, max_length=64)]
ToolCall = Annotated[str, StringConstraints(pattern=TOOL_CALL_PATTERN, max_length=100)]
IncidentId = Annotated[str, StringConstraints(pattern=INCIDENT_ID_PATTERN)]
EventId = Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


UtcTime = Annotated[AwareDatetime, AfterValidator(_utc)]


def _known_state(value: str) -> str:
    if value not in _STATES:
        raise ValueError("not a health state")
    return value


StateName = Annotated[
    str,
    AfterValidator(_known_state),
    WithJsonSchema({"type": "string", "enum": list(_STATES)}),
]


class CoverageStatus(StrEnum):
    """What escalation this fleetd has when it sends (§10.2): ``full`` (a sink and a journal),
    ``partial`` (a capability is missing, e.g. no peer lead), ``degraded`` (the journal failed:
    retries and dedupe may not survive a restart)."""

    FULL = "full"
    PARTIAL = "partial"
    DEGRADED = "degraded"


class _Payload(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        hide_input_in_errors=True,
        regex_engine="python-re",  # the patterns use a lookahead
    )


class EvidenceCount(_Payload):
    """One kind of structured evidence and how many times it was seen."""

    type: Code
    count: Count


class Routing(_Payload):
    """Who owned the incident, who received it, and why it came to a person."""

    reason: RoutingReason | None
    owner: Name | None
    recipient: Name | None


class IncidentFacts(_Payload):
    """The incident the event is about: its identity, classification, times and evidence."""

    id: IncidentId
    scope: Scope
    subject: Name
    state: StateName
    severity: Severity
    certainty: Certainty
    cause: Code
    profile: Name | None
    opened_at: UtcTime
    resolved_at: UtcTime | None
    resolve_reason: ResolveReason | None
    duration_seconds: Count
    recovery_attempted: StrictBool
    committed_work_at_risk: StrictBool
    evidence: tuple[EvidenceCount, ...] = Field(max_length=MAX_EVIDENCE)


class IncidentEvent(_Payload):
    """One fleetd incident event sent to a person's webhook (M4 §10, version 1).

    ``eventId`` equals the ``webhook-id`` and ``Idempotency-Key`` headers: the same for every
    delivery attempt of this (incident, event type, revision).
    """

    schema_version: Literal[1]
    event_id: EventId
    event_type: EventType
    event_revision: Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
    occurred_at: UtcTime
    fleetd_instance: Name
    incident: IncidentFacts
    routing: Routing
    coverage: CoverageStatus
    suggested_tool_calls: tuple[ToolCall, ...] = Field(max_length=MAX_TOOL_CALLS)

    @model_validator(mode="after")
    def _event_id_is_the_idempotency_key(self) -> IncidentEvent:
        expected = idempotency_key(self.incident.id, self.event_type, self.event_revision)
        if self.event_id != expected:
            raise ValueError("eventId is not the idempotency key of incident, type and revision")
        return self


def _name(value: str | None) -> str | None:
    if value is None:
        return None
    return value if _NAME.fullmatch(value) else REDACTED


def _code(value: str) -> str:
    return value if len(value) <= 64 and _CODE.fullmatch(value) else REDACTED


def _evidence(pairs: Iterable[tuple[str, str]]) -> tuple[EvidenceCount, ...]:
    kept = [
        EvidenceCount(type=name, count=int(value))
        for name, value in pairs
        if len(name) <= 64 and _CODE.fullmatch(name) and _COUNT.fullmatch(value)
    ]
    return tuple(kept[:MAX_EVIDENCE])


def _tool_calls(calls: Iterable[str]) -> tuple[str, ...]:
    return tuple(call for call in calls if _TOOL_CALL.fullmatch(call))[:MAX_TOOL_CALLS]


def build_event(
    *,
    incident_id: str,
    event_type: EventType,
    revision: int,
    occurred_at: datetime,
    instance: str,
    scope: Scope,
    subject: str,
    state: str,
    severity: Severity,
    certainty: Certainty,
    cause: str,
    opened_at: datetime,
    coverage: CoverageStatus,
    resolved_at: datetime | None = None,
    resolve_reason: ResolveReason | None = None,
    profile: str | None = None,
    owner_lead: str | None = None,
    recipient_lead: str | None = None,
    routing_reason: RoutingReason | None = None,
    evidence: Iterable[tuple[str, str]] = (),
    recovery_attempted: bool = False,
    committed_work_at_risk: bool = False,
    tool_calls: Iterable[str] = (),
) -> IncidentEvent:
    """The payload of one event from plain values; see the module docstring for what is kept.

    ``duration`` runs from ``opened_at`` to ``resolved_at`` (or ``occurred_at`` while open).
    Raises :class:`ValueError` (pydantic's, without the input) for an impossible event.
    """
    for moment in (occurred_at, opened_at, resolved_at):
        if moment is not None and (moment.tzinfo is None or moment.utcoffset() is None):
            raise ValueError("event times must be timezone-aware")
    end = occurred_at if resolved_at is None else resolved_at
    duration = max(0, int((end - opened_at).total_seconds()))
    return IncidentEvent(
        schema_version=SCHEMA_VERSION,
        event_id=idempotency_key(incident_id, event_type, revision),
        event_type=event_type,
        event_revision=revision,
        occurred_at=occurred_at,
        fleetd_instance=_name(instance) or REDACTED,
        incident=IncidentFacts(
            id=incident_id,
            scope=scope,
            subject=_name(subject) or REDACTED,
            state=str(state),
            severity=severity,
            certainty=certainty,
            cause=_code(cause),
            profile=_name(profile),
            opened_at=opened_at,
            resolved_at=resolved_at,
            resolve_reason=resolve_reason,
            duration_seconds=min(duration, MAX_COUNT),
            recovery_attempted=recovery_attempted,
            committed_work_at_risk=committed_work_at_risk,
            evidence=_evidence(evidence),
        ),
        routing=Routing(
            reason=routing_reason, owner=_name(owner_lead), recipient=_name(recipient_lead)
        ),
        coverage=coverage,
        suggested_tool_calls=_tool_calls(tool_calls),
    )


def event_from_incident(
    incident: Incident,
    *,
    event_type: EventType,
    revision: int,
    occurred_at: datetime,
    instance: str,
    coverage: CoverageStatus,
    routing_reason: RoutingReason | None = None,
    resolved_at: datetime | None = None,
    resolve_reason: ResolveReason | None = None,
    profile: str | None = None,
    recovery_attempted: bool = False,
) -> IncidentEvent:
    """:func:`build_event` for a health :class:`~fleetd.health.incidents.Incident`."""
    return build_event(
        incident_id=incident.id,
        event_type=event_type,
        revision=revision,
        occurred_at=occurred_at,
        instance=instance,
        scope=incident.scope,
        subject=incident.subject,
        state=str(incident.state),
        severity=incident.severity,
        certainty=incident.certainty,
        cause=incident.key.cause,
        opened_at=incident.opened_at,
        coverage=coverage,
        resolved_at=resolved_at,
        resolve_reason=resolve_reason,
        profile=profile,
        owner_lead=incident.owner_lead,
        recipient_lead=incident.recipient_lead,
        routing_reason=routing_reason,
        evidence=incident.evidence,
        recovery_attempted=recovery_attempted,
        committed_work_at_risk=incident.committed_work_at_risk,
        tool_calls=suggested_tool_calls(incident),
    )


def encode_event(event: IncidentEvent) -> bytes:
    """The exact body to sign and send: compact JSON in field order, UTF-8."""
    return event.model_dump_json(by_alias=True).encode("utf-8")
