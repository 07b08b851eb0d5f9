"""The fleet tools over plain HTTP: ``POST /v1/tools/<name>`` and ``GET /v1/fleet``.

A thin adapter over :class:`~fleetd.api.tools.ToolRegistry`: authenticate, read a bounded JSON
object, call the registry, answer with its value. The body of every answer — success or failure —
is the same envelope MCP clients see, ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": {"code", "message", "hint"?}}``; the status code says which failure:

=====  ==========================================================================
200    ok
400    the body is not JSON, or not a JSON object (``invalid_body``)
401    missing or unknown bearer token (``unauthenticated``; ``WWW-Authenticate: Bearer``)
403    the caller's role may not call the tool (``forbidden``)
404    no such tool (``unknown_tool``, hint: the tools), target (``unknown_target``) or ticket
       (``unknown_ticket``)
409    the session's state or capacity refuses the call (``conflict``, ``capacity_exceeded``,
       ``profile_benched``)
413    the body is larger than the limit (``body_too_large``)
422    the arguments do not match the tool's schema (``invalid_arguments``)
500    the tool failed inside fleetd (``internal_error``; no exception text)
=====  ==========================================================================

The token is checked before the body is read, so an unauthenticated caller learns nothing about
the body rules or the tools. A caller that hangs up before its body has arrived is logged as one
line on ``fleetd.api`` and gets no answer (there is no one to answer).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetd.api.auth import Authenticator, bearer_challenge
from fleetd.api.openapi import install_tool_openapi
from fleetd.api.tools import Caller, ToolFailure, ToolRegistry, ToolResult, failure_from_error
from fleetd.errors import AuthError

__all__ = ["DEFAULT_TOOL_BODY_LIMIT", "FLEET_PATH", "TOOLS_PATH", "install_tool_routes"]

_log = logging.getLogger("fleetd.api")

DEFAULT_TOOL_BODY_LIMIT = 1024 * 1024
TOOLS_PATH = "/v1/tools/{name}"
FLEET_PATH = "/v1/fleet"
_FLEET_TOOL = "fleet_list"


def _answer(outcome: ToolResult, headers: dict[str, str] | None = None) -> JSONResponse:
    status = 200 if outcome.error is None else outcome.error.http_status
    return JSONResponse(outcome.to_json(), status_code=status, headers=headers)


def _refuse(failure: ToolFailure, headers: dict[str, str] | None = None) -> JSONResponse:
    return _answer(ToolResult.failure(failure), headers)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _ToolRoutes:
    """The two endpoints, bound to one registry and authenticator."""

    def __init__(self, registry: ToolRegistry, auth: Authenticator, max_body_bytes: int) -> None:
        self._registry = registry
        self._auth = auth
        self._limit = max_body_bytes

    def _caller(self, request: Request) -> Caller | JSONResponse:
        header = request.headers.get("authorization")
        try:
            return self._auth.authenticate(header)
        except AuthError as error:
            challenge = bearer_challenge(presented=bool(header))
            return _refuse(failure_from_error(error), {"WWW-Authenticate": challenge})

    async def call_tool(self, request: Request) -> Response:
        caller = self._caller(request)
        if isinstance(caller, JSONResponse):
            return caller
        try:
            args = await self._json_object(request)
        except ClientDisconnect:
            _log.info("a %s caller disconnected before its request body arrived", caller.role)
            return Response(status_code=400)
        if isinstance(args, ToolFailure):
            return _refuse(args)
        name = str(request.path_params["name"])
        return _answer(await self._registry.call(caller, name, args))

    async def fleet(self, request: Request) -> JSONResponse:
        caller = self._caller(request)
        if isinstance(caller, JSONResponse):
            return caller
        return _answer(await self._registry.call(caller, _FLEET_TOOL, {}))

    async def _json_object(self, request: Request) -> dict[str, Any] | ToolFailure:
        """The body as a JSON object, or the failure to answer with; reads at most the limit."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._limit:
            return self._too_large()
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > self._limit:
                return self._too_large()
        try:
            document = json.loads(bytes(body), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return _invalid_body("the body is not JSON")
        if not isinstance(document, dict):
            return _invalid_body("the body is JSON but not an object")
        return document

    def _too_large(self) -> ToolFailure:
        return ToolFailure(
            code="body_too_large",
            message=f"the request body is larger than {self._limit} bytes",
            hint={"maxBytes": self._limit},
            http_status=413,
        )


def _invalid_body(message: str) -> ToolFailure:
    return ToolFailure(
        code="invalid_body",
        message=message,
        hint={"expected": "a JSON object holding the tool's arguments, e.g. {}"},
        http_status=400,
    )


def install_tool_routes(
    app: FastAPI,
    registry: ToolRegistry,
    authenticator: Authenticator,
    *,
    max_body_bytes: int = DEFAULT_TOOL_BODY_LIMIT,
) -> None:
    """Add ``POST /v1/tools/{name}`` and ``GET /v1/fleet`` to ``app`` and its ``/openapi.json``."""
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    routes = _ToolRoutes(registry, authenticator, max_body_bytes)
    app.router.routes.append(Route(TOOLS_PATH, endpoint=routes.call_tool, methods=["POST"]))
    app.router.routes.append(Route(FLEET_PATH, endpoint=routes.fleet, methods=["GET"]))
    install_tool_openapi(
        app, registry, tools_path=TOOLS_PATH, fleet_path=FLEET_PATH, fleet_tool=_FLEET_TOOL
    )
