"""The incident journal over HTTP: ``GET /v1/incidents`` and ``POST /v1/incidents/{id}/replay``.

A thin adapter over the service's :meth:`~fleetd.api.service.FleetService.incidents` and
:meth:`~fleetd.api.service.FleetService.replay`. Answers use the tool routes' envelope
(``{"ok": true, "result": ...}`` / ``{"ok": false, "error": {"code", "message"}}``):

=====  ========================================================================================
200    ok
400    the id is not an incident id, ``inc_`` and 24 hex digits, the path parameter's pattern
       in ``/openapi.json`` (``invalid_incident_id``; replay only)
401    missing or unknown bearer token (``unauthenticated``; ``WWW-Authenticate: Bearer``)
403    a member lists, or anyone but the operator replays (``forbidden``)
404    no incident with that id (``unknown_incident``; replay only)
409    the incident has no permanently failed event (``nothing_to_replay``; replay only)
503    the journal cannot be read or written now (``journal_unavailable``)
=====  ========================================================================================

The list holds open incidents and those resolved in the last 24 hours, newest first, with
routing and each outbound event's delivery state; a lead sees what ``fleet_list`` shows it (one
rule, :func:`fleetd.health.audience.lead_may_see`: incidents it owns or receives, those about
itself, and the fleet-wide ones).
Nothing here carries a payload, a URL or an error text: delivery failures are bounded codes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from fastapi import FastAPI, Security
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fleetd.api.auth import BEARER_SCHEME, Authenticator, bearer_challenge
from fleetd.api.failures import failure_responses
from fleetd.api.service import IncidentService
from fleetd.api.tools import Caller, Role, ToolFailure, ToolResult, failure_from_error
from fleetd.errors import AuthError, JournalError
from fleetd.health.incidents import INCIDENT_ID_PATTERN
from fleetd.journal.values import EventState, EventType, StoredEvent, StoredIncident
from fleetd.notify.desk import IncidentListing

__all__ = [
    "INCIDENTS_PATH",
    "REPLAY_PATH",
    "IncidentList",
    "ReplayAnswer",
    "install_incident_routes",
    "listing_result",
]

INCIDENTS_PATH = "/v1/incidents"
REPLAY_PATH = "/v1/incidents/{incident_id}/replay"
_ID = re.compile(INCIDENT_ID_PATTERN)

_STATUSES = {
    400: "the id is not an incident id (invalid_incident_id)",
    401: "missing or unknown bearer token (unauthenticated)",
    403: "the caller's role may not do this (forbidden)",
    404: "no incident with that id (unknown_incident)",
    409: "the incident has no permanently failed event (nothing_to_replay)",
    503: "the journal cannot be read or written now (journal_unavailable)",
}


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class DeliveryEvent(_Wire):
    """One outbound event and where its delivery stands."""

    type: EventType
    revision: int
    event_id: str
    state: EventState
    attempts: int
    created_at: datetime
    delivered_at: datetime | None
    next_attempt_at: datetime | None
    last_failure: str | None
    last_http_status: int | None


class IncidentRouting(_Wire):
    """Who has the incident: a lead (``recipient``) or a person (``route: human``)."""

    route: Literal["lead", "human"] | None
    owner: str | None
    recipient: str | None
    reason: str | None
    generation: int


class IncidentRow(_Wire):
    """One incident with its routing and delivery (``delivery``: the worst event state)."""

    id: str
    status: Literal["open", "resolved"]
    scope: str
    subject: str
    state: str
    cause: str
    generation: int
    severity: str
    certainty: str
    target: str | None
    opened_at: datetime
    resolved_at: datetime | None
    resolve_reason: str | None
    routing: IncidentRouting
    delivery: Literal["none", "pending", "delivered", "failed", "cancelled"]
    events: list[DeliveryEvent]


class IncidentList(_Wire):
    """Open incidents, then those resolved since ``resolvedSince``, newest first."""

    incidents: list[IncidentRow]
    resolved_since: datetime
    limit: int
    truncated: bool


class ReplayAnswer(_Wire):
    incident_id: str
    rearmed: int


class IncidentListAnswer(BaseModel):
    """The success envelope of ``GET /v1/incidents``."""

    ok: Literal[True]
    result: IncidentList


class ReplayAnswerEnvelope(BaseModel):
    """The success envelope of ``POST /v1/incidents/{id}/replay``."""

    ok: Literal[True]
    result: ReplayAnswer


_WORST = (EventState.FAILED, EventState.PENDING, EventState.DELIVERED, EventState.CANCELLED)


def _delivery(events: tuple[StoredEvent, ...]) -> Any:
    states = {event.state for event in events}
    return next((state.value for state in _WORST if state in states), "none")


def _row(stored: StoredIncident) -> IncidentRow:
    incident = stored.incident
    route = incident.route
    return IncidentRow(
        id=incident.id,
        status="open" if stored.resolved_at is None else "resolved",
        scope=incident.scope.value,
        subject=incident.subject,
        state=str(incident.state),
        cause=incident.key.cause,
        generation=incident.generation,
        severity=incident.severity.value,
        certainty=incident.certainty.value,
        target=incident.target,
        opened_at=incident.opened_at,
        resolved_at=stored.resolved_at,
        resolve_reason=stored.resolve_reason.value if stored.resolve_reason else None,
        routing=IncidentRouting(
            route=route.value if route is not None else None,
            owner=stored.routing.owner,
            recipient=stored.routing.recipient,
            reason=stored.routing.reason,
            generation=stored.routing.generation,
        ),
        delivery=_delivery(stored.events),
        events=[
            DeliveryEvent(
                type=event.type,
                revision=event.revision,
                event_id=event.idempotency_key,
                state=event.state,
                attempts=event.attempts,
                created_at=event.created_at,
                delivered_at=event.delivered_at,
                next_attempt_at=event.due_at,
                last_failure=event.last_failure,
                last_http_status=event.last_http_status,
            )
            for event in stored.events
        ],
    )


def listing_result(listing: IncidentListing) -> IncidentList:
    """The wire form of a listing."""
    return IncidentList(
        incidents=[_row(stored) for stored in listing.incidents],
        resolved_since=listing.resolved_since,
        limit=listing.limit,
        truncated=listing.truncated,
    )


def _ok(answer: BaseModel) -> Response:
    """An answer envelope model as the response body."""
    return Response(answer.model_dump_json(by_alias=True), media_type="application/json")


def _refuse(
    code: str, message: str, status: int, headers: dict[str, str] | None = None
) -> JSONResponse:
    failure = ToolFailure(code=code, message=message, http_status=status)
    return JSONResponse(ToolResult.failure(failure).to_json(), status_code=status, headers=headers)


def _unavailable(exc: JournalError) -> JSONResponse:
    return _refuse(
        "journal_unavailable",
        f"the incident journal cannot answer now ({exc.operation}: {exc.reason})",
        503,
    )


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return failure_responses({status: _STATUSES[status] for status in statuses})


_ID_PARAMETER: dict[str, Any] = {
    "name": "incident_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": INCIDENT_ID_PATTERN},
    "description": "an incident id, inc_ and 24 hex digits (else 400 invalid_incident_id)",
}


def install_incident_routes(
    app: FastAPI, service: IncidentService, authenticator: Authenticator
) -> None:
    """Add the two routes to ``app`` (and to its ``/openapi.json``)."""

    def caller_of(request: Request) -> Caller | JSONResponse:
        header = request.headers.get("authorization")
        try:
            return authenticator.authenticate(header)
        except AuthError as error:
            failure = failure_from_error(error)
            challenge = {"WWW-Authenticate": bearer_challenge(presented=bool(header))}
            return _refuse(failure.code, failure.message, 401, challenge)

    @app.get(
        INCIDENTS_PATH,
        response_model=IncidentListAnswer,
        response_description="ok",
        operation_id="list_incidents",
        responses=_responses(401, 403, 503),
        tags=["incidents"],
        summary="open and recently resolved incidents",
        description="Routing and delivery state of every open incident and of those resolved "
        "in the last 24 hours. Callers: operator, lead (what fleet_list shows it: incidents it "
        "owns or receives, those about itself, the fleet-wide ones).",
        dependencies=[Security(BEARER_SCHEME)],
    )
    async def list_incidents(request: Request) -> Response:
        caller = caller_of(request)
        if isinstance(caller, JSONResponse):
            return caller
        if caller.role not in (Role.OPERATOR, Role.LEAD):
            return _refuse("forbidden", "only the operator or a lead lists incidents", 403)
        try:
            listing = await service.incidents(caller)
        except JournalError as exc:
            return _unavailable(exc)
        return _ok(IncidentListAnswer(ok=True, result=listing_result(listing)))

    @app.post(
        REPLAY_PATH,
        response_model=ReplayAnswerEnvelope,
        response_description="ok",
        operation_id="replay_incident",
        responses=_responses(400, 401, 403, 404, 409, 503),
        tags=["incidents"],
        summary="replay an incident's permanently failed events",
        description="Every permanently failed event of the incident gets a new attempt, due "
        "now; the next delivery pass sends it with the same webhook-id. Callers: operator.",
        dependencies=[Security(BEARER_SCHEME)],
        openapi_extra={"parameters": [_ID_PARAMETER]},
    )
    async def replay(request: Request) -> Response:
        caller = caller_of(request)
        if isinstance(caller, JSONResponse):
            return caller
        if caller.role is not Role.OPERATOR:
            return _refuse("forbidden", "only the operator replays an incident", 403)
        incident_id = str(request.path_params["incident_id"])
        if not _ID.fullmatch(incident_id):
            return _refuse(
                "invalid_incident_id", "an incident id is inc_ followed by 24 hex digits", 400
            )
        try:
            result = await service.replay(incident_id)
        except JournalError as exc:
            return _unavailable(exc)
        if not result.found:
            return _refuse("unknown_incident", f"no incident {incident_id} in the journal", 404)
        if result.rearmed == 0:
            enabled = (
                f"; webhook receivers a 410 had disabled, enabled again: {result.enabled}"
                if result.enabled
                else ""
            )
            return _refuse(
                "nothing_to_replay",
                f"incident {incident_id} has no permanently failed event to replay{enabled}",
                409,
            )
        return _ok(
            ReplayAnswerEnvelope(
                ok=True, result=ReplayAnswer(incident_id=incident_id, rearmed=result.rearmed)
            )
        )
