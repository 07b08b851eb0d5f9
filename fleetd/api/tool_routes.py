"""Each fleet tool as its own FastAPI route: what ``/openapi.json`` declares, from the models.

FastAPI generates the document from its routes. :func:`tool_route` makes ``POST /v1/tools/<tool>``
a :class:`RegistryRoute` whose endpoint signature declares the tool's params model as the body,
its success envelope (:func:`~fleetd.api.envelope.success_model`) as the ``200`` answer, every
error status with :class:`~fleetd.api.failures.ToolFailureAnswer`, and the bearer scheme;
:func:`fleet_route` does the same for ``GET /v1/fleet`` (``fleet_list``) with its long-poll query
(``sinceVersion``, ``wait``), ``If-None-Match``, the ``ETag`` it answers and ``304``.

The declarations only document. A :class:`RegistryRoute` hands every request to the handler it
was given (:mod:`fleetd.api.http_tools`), never to FastAPI's own parsing and validation, whose
refusals are not the envelope's: the body stays bounded, the registry's gates run in their order,
and each refusal keeps its code and hint.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from fastapi import Body, Header, Query, Security
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from fleetd.api.auth import BEARER_SCHEME
from fleetd.api.envelope import success_model
from fleetd.api.failures import failure_responses
from fleetd.api.tools import ToolSpec

__all__ = [
    "ERROR_STATUSES",
    "FLEET_QUERY_SCHEMA",
    "FLEET_SCOPES",
    "MAX_FLEET_WAIT_SECONDS",
    "Handler",
    "RegistryRoute",
    "fleet_route",
    "tool_route",
]

#: The longest ``GET /v1/fleet?sinceVersion=N&wait=S`` holds its caller.
MAX_FLEET_WAIT_SECONDS = 60.0
_MAX_VERSION = 10**18 - 1
_SINCE_VERSION = (
    "the viewVersion the caller has; with wait, the answer waits while the view is still that "
    "version"
)
_WAIT = (
    "seconds to wait for a version other than sinceVersion; above 0 it needs sinceVersion "
    "(else 422); a stopping fleetd answers at once"
)

#: The parts of the fleet ``GET /v1/fleet`` answers: this fleetd, or every fleetd sharing the
#: journal (the operator's).
FLEET_SCOPES = ("instance", "all")
_SCOPE = (
    "instance (the default): this fleetd's view; all (the operator's): this fleetd's view and "
    "every other fleetd sharing the PostgreSQL journal, its last published summary with its age, "
    "down when it stopped renewing (answers at once: no wait, no ETag)"
)

#: The query of ``GET /v1/fleet`` as the ``invalid_arguments`` hint repeats it (the route
#: declares the same bounds and descriptions to ``/openapi.json``).
FLEET_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sinceVersion": {
            "type": "integer",
            "minimum": 0,
            "maximum": _MAX_VERSION,
            "description": _SINCE_VERSION,
        },
        "wait": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_FLEET_WAIT_SECONDS,
            "description": _WAIT,
        },
        "scope": {"type": "string", "enum": list(FLEET_SCOPES), "description": _SCOPE},
    },
}

#: Every error status of a tool call over HTTP (:mod:`fleetd.api.http_tools` says when).
ERROR_STATUSES: dict[int, str] = {
    400: "the body is not JSON, or not a JSON object (invalid_body)",
    401: "missing or unknown bearer token (unauthenticated)",
    403: "the caller's role may not call the tool (forbidden)",
    404: "no such tool, target or ticket (unknown_tool, unknown_target, unknown_ticket, "
    "ticket_expired)",
    409: "the session's state or capacity refuses the call (conflict, capacity_exceeded, "
    "profile_benched, ...)",
    413: "the body is larger than the limit (body_too_large)",
    422: "the arguments do not match the tool's schema (invalid_arguments)",
    429: "the caller already holds as many long-polls as one may (rate_limited; Retry-After)",
    500: "the tool failed inside fleetd (internal_error; no exception text)",
    503: "a dependency (herdr, the inbox) cannot be reached now (unavailable, ...)",
}
# GET /v1/fleet reads no body and names its tool: no 400, 404 or 413; 422 is a bad query.
_FLEET_STATUSES = (401, 403, 409, 422, 429, 500, 503)
_FLEET_QUERY_REFUSED = (
    "the query is refused (invalid_arguments): sinceVersion is not a version, wait is outside "
    "0-60, wait is above 0 without sinceVersion or with scope=all, or scope is not instance or all"
)
_FLEET_FORBIDDEN = (
    "the caller's role may not read the fleet (forbidden): a member's token, or scope=all with a "
    "lead's token (scope=all is the operator's)"
)
_ETAG = {
    "ETag": {
        "description": "names this view: its run of fleetd, its viewVersion and the caller's scope",
        "schema": {"type": "string"},
    }
}

#: How a route answers a request (FastAPI's own handler is never built).
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class RegistryRoute(APIRoute):
    """A FastAPI route that FastAPI documents and this module serves.

    Its endpoint's signature declares the body, query and headers for ``/openapi.json``;
    ``serve`` answers every request instead of FastAPI's parsing (whose refusals are not the
    envelope's). The endpoint itself is never called.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], *, serve: Handler, **kw: Any):
        self._serve = serve
        super().__init__(path, endpoint, **kw)

    def get_route_handler(self) -> Handler:
        return self._serve


def _declaring(*parameters: inspect.Parameter) -> Callable[..., Any]:
    """An endpoint whose signature declares ``parameters`` (and the bearer scheme)."""

    def endpoint(**_: Any) -> None:
        raise AssertionError("a RegistryRoute is served by its handler")  # pragma: no cover

    bearer = inspect.Parameter(
        "credentials", inspect.Parameter.KEYWORD_ONLY, default=Security(BEARER_SCHEME)
    )
    endpoint.__signature__ = inspect.Signature([*parameters, bearer])  # type: ignore[attr-defined]
    return endpoint


def _answers(statuses: tuple[int, ...]) -> dict[int | str, dict[str, Any]]:
    """Each error status with the failure envelope; a 401 also with its challenge."""
    return failure_responses({status: ERROR_STATUSES[status] for status in statuses})


def tool_route(spec: ToolSpec[Any], serve: Handler) -> RegistryRoute:
    """``POST /v1/tools/<tool>``: the params model as the body, the answers the tool gives."""
    arguments = inspect.Parameter(
        "arguments", inspect.Parameter.KEYWORD_ONLY, annotation=spec.params, default=Body()
    )
    return RegistryRoute(
        "/v1/tools/" + spec.name,
        _declaring(arguments),
        serve=serve,
        methods=["POST"],
        response_model=success_model(spec),
        response_description="ok",
        responses=_answers(tuple(ERROR_STATUSES)),
        operation_id=spec.name,
        summary=spec.name,
        description=f"{spec.description}\n\nCallers: {', '.join(sorted(spec.roles))}.",
        tags=["tools"],
    )


def fleet_route(
    spec: ToolSpec[Any], serve: Handler, *, all_answer: type[BaseModel] | None = None
) -> RegistryRoute:
    """``GET /v1/fleet``: ``fleet_list`` with its long-poll query, ``ETag`` and ``304``; with
    ``all_answer``, also ``scope=all`` answering that model."""
    query = FLEET_QUERY_SCHEMA["properties"]
    declared = [
        inspect.Parameter(
            "scope",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Literal["instance", "all"],
            default=Query("instance", description=query["scope"]["description"]),
        ),
        inspect.Parameter(
            "sinceVersion",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=int,
            default=Query(
                None,
                ge=query["sinceVersion"]["minimum"],
                le=query["sinceVersion"]["maximum"],
                description=query["sinceVersion"]["description"],
            ),
        ),
        inspect.Parameter(
            "wait",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=float,
            default=Query(
                None,
                ge=query["wait"]["minimum"],
                le=query["wait"]["maximum"],
                description=query["wait"]["description"],
            ),
        ),
        inspect.Parameter(
            "if_none_match",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=str,
            default=Header(
                None,
                alias="If-None-Match",
                description="an ETag of an earlier answer: 304 while the view is unchanged",
            ),
        ),
    ]
    answers = _answers(_FLEET_STATUSES)
    answers[422] = {**answers[422], "description": _FLEET_QUERY_REFUSED}
    answers[403] = {**answers[403], "description": _FLEET_FORBIDDEN}
    answers[200] = {"headers": _ETAG}
    answers[304] = {
        "description": "not modified: If-None-Match names the current view (no body)",
        "headers": _ETAG,
    }
    answer: Any = success_model(spec)
    if all_answer is not None:
        answer = answer | all_answer
    return RegistryRoute(
        "/v1/fleet",
        _declaring(*declared),
        serve=serve,
        methods=["GET"],
        response_model=answer,
        response_description="ok",
        responses=answers,
        operation_id=spec.name + "_get",
        summary=spec.name,
        description=f"{spec.description}\n\nCallers: {', '.join(sorted(spec.roles))}.",
        tags=["tools"],
    )
