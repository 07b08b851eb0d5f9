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

``GET /v1/fleet`` answers from the versioned fleet view when the service has one
(:class:`FleetVersions`; :mod:`fleetd.runtime.fleet_versions`): each version's answer is encoded
once per scope (the operator, each lead), from rows kept encoded between versions
(:mod:`fleetd.runtime.fleet_body`), sent as those bytes, and carries a strong ``ETag``; a request
whose ``If-None-Match`` names it gets ``304 Not Modified`` with no body. ``?sinceVersion=N&wait=S``
long-polls: while the view's version (``viewVersion``) is ``N`` the answer waits, at most ``S``
seconds (60), and a stopping fleetd answers every waiter at once; another version answers at once
(the version just built, no sooner than 250 ms after its build). A ``sinceVersion`` that is not a
version, a ``wait`` outside 0–60, or a ``wait`` above 0 without ``sinceVersion`` is
``invalid_arguments`` (422, as ``/openapi.json`` says); ``wait=0`` alone asks for no wait and
answers at once. One caller (a token) holds at most :data:`MAX_WAITS_PER_CALLER` long-polls at
once; one more is ``rate_limited`` (429, ``Retry-After: 1``): one token polling in a loop without
waiting for its answers held 5,000 waiters, and waking them held every other caller for seconds.

``GET /v1/fleet?scope=all`` (the operator's; several instances on one PostgreSQL journal) answers
this instance's view and every other instance's last published summary, each stamped with its
age and ``down`` when it stopped renewing (:mod:`fleetd.runtime.fleet_all`). It answers at once:
no ``ETag``, and ``wait`` above 0 is ``invalid_arguments``. A lead's or a member's token gets
``forbidden`` (403) saying whose scope it is; a ``scope`` other than ``instance`` (the default:
this fleetd alone) or ``all`` is ``invalid_arguments`` (422).

``/openapi.json`` is FastAPI's own: every registered tool is its own FastAPI route, and
``GET /v1/fleet`` one with its query, declared from the tool's models
(:mod:`fleetd.api.tool_routes`) and served by this module's handlers (bounded body, the
registry's four gates, the answers above), never by FastAPI's own parsing, so the refusals keep
their codes and hints. A name that is not a tool reaches the generic ``/v1/tools/{name}`` route
(not in the document) and gets ``unknown_tool``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Coroutine, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from fastapi import FastAPI
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetd.api.auth import Authenticator, bearer_challenge
from fleetd.api.results import FleetAllAnswer
from fleetd.api.tool_routes import (
    FLEET_QUERY_SCHEMA,
    FLEET_SCOPES,
    MAX_FLEET_WAIT_SECONDS,
    Handler,
    fleet_route,
    tool_route,
)
from fleetd.api.tools import (
    BODY_READ_SECONDS,
    Caller,
    Role,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    body_too_large,
    body_too_slow,
    declares_more_than,
    failure_from_error,
)
from fleetd.errors import AuthError

__all__ = [
    "DEFAULT_TOOL_BODY_LIMIT",
    "FLEET_PATH",
    "MAX_WAITS_PER_CALLER",
    "TOOLS_PATH",
    "FleetAcrossView",
    "FleetVersions",
    "VersionedFleet",
    "install_tool_routes",
]

_log = logging.getLogger("fleetd.api")

DEFAULT_TOOL_BODY_LIMIT = 1024 * 1024
MAX_WAITS_PER_CALLER = 16
"""The most long-polls of ``GET /v1/fleet`` one caller holds at once."""
TOOLS_PATH = "/v1/tools/{name}"
FLEET_PATH = "/v1/fleet"
_FLEET_TOOL = "fleet_list"


def _answer(outcome: ToolResult, headers: dict[str, str] | None = None) -> JSONResponse:
    status = 200 if outcome.error is None else outcome.error.http_status
    if status == 408:  # a body that stalled: the connection goes with it, never kept alive
        headers = {**(headers or {}), "connection": "close"}
    return JSONResponse(outcome.to_json(), status_code=status, headers=headers)


def _refuse(failure: ToolFailure, headers: dict[str, str] | None = None) -> JSONResponse:
    return _answer(ToolResult.failure(failure), headers)


async def _wait_unless_gone(request: Request, waiting: Coroutine[Any, Any, int]) -> bool:
    """Wait for ``waiting`` unless the caller hangs up first (``True``): a long-poll whose
    client left lets go of its place at once, not when the view next moves."""
    waiter = asyncio.ensure_future(waiting)
    gone = asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait((waiter, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, gone):
            task.cancel()
        await asyncio.gather(waiter, gone, return_exceptions=True)
    return gone.done() and not gone.cancelled() and waiter.cancelled()


async def _hung_up(request: Request) -> None:
    """Return once the caller disconnects (a GET has no body: nothing else arrives)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _too_many_waits() -> ToolFailure:
    return ToolFailure(
        code="rate_limited",
        message=(
            f"this caller already holds {MAX_WAITS_PER_CALLER} long-polls of GET /v1/fleet; "
            "ask again when one has answered"
        ),
        http_status=429,
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class VersionedFleet(Protocol):
    """One scope's answer of one version: the envelope ``{"ok": true, "result": view}``
    encoded."""

    @property
    def version(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def body(self) -> bytes: ...


class FleetVersions(Protocol):
    """The versioned fleet view ``GET /v1/fleet`` answers from (``FleetViews`` in production)."""

    def version(self) -> int:
        """The current version."""
        ...

    async def encoded(self, caller: Caller) -> VersionedFleet:
        """``caller``'s answer of the current version, encoded."""
        ...

    async def wait_past(self, version: int, seconds: float) -> int:
        """Wait at most ``seconds`` while the version is ``version``."""
        ...


class FleetAcrossView(Protocol):
    """``GET /v1/fleet?scope=all``: every instance sharing the journal (``FleetAcross``)."""

    async def encoded(self, caller: Caller) -> bytes:
        """The operator's answer, the envelope ``{"ok": true, "result": document}`` encoded."""
        ...


#: What the result hooks are handed for an answer sent as bytes: they count answers, and the
#: view itself went out encoded (decoding it for them would cost what the bytes saved).
_SENT_ENCODED: Mapping[str, Any] = MappingProxyType({})


def _matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison of an ``If-None-Match`` list (or ``*``) with ``etag``."""
    if not if_none_match:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _long_poll(query: Mapping[str, str]) -> tuple[int | None, float] | ToolFailure:
    """``sinceVersion`` and ``wait`` of ``GET /v1/fleet``, or the failure to answer with."""
    since_text, wait_text = query.get("sinceVersion"), query.get("wait")
    since: int | None = None
    if since_text is not None:
        if not (since_text.isascii() and since_text.isdigit()) or len(since_text) > 18:
            return _invalid_query("sinceVersion", "integer", "a version: a non-negative integer")
        since = int(since_text)
    if wait_text is None:
        return since, 0.0
    try:  # float() reads any script's digits and "1_0": only an ASCII number is a wait
        wait = float(wait_text) if _DECIMAL.fullmatch(wait_text) else math.nan
    except ValueError:
        wait = math.nan
    if not 0 <= wait <= MAX_FLEET_WAIT_SECONDS:
        return _invalid_query(
            "wait", "number", f"seconds to wait, from 0 to {MAX_FLEET_WAIT_SECONDS:g}"
        )
    if since is None and wait > 0:  # no version to wait past: the caller would poll hot
        return _invalid_query(
            "sinceVersion", "since_version_required", "a wait above 0 needs sinceVersion"
        )
    return since, wait


def _scope(query: Mapping[str, str]) -> str | ToolFailure:
    """``scope`` of ``GET /v1/fleet`` (``instance`` when absent), or the failure to answer with."""
    scope = query.get("scope", "instance")
    if scope not in FLEET_SCOPES:
        return _invalid_query(
            "scope",
            "enum",
            "instance (this fleetd, the default) or all (every fleetd sharing the journal; "
            "the operator's)",
        )
    if scope == "all" and _waits(query.get("wait")):
        return _invalid_query("wait", "scope_all_no_wait", "scope=all answers at once: no wait")
    return scope


def _waits(wait: str | None) -> bool:
    """Whether ``wait`` asks to wait (anything but absent or zero; a bad number too)."""
    if wait is None:
        return False
    try:
        return float(wait) != 0
    except ValueError:
        return True


_NOT_YOURS = (
    "scope=all is the operator's: it shows every fleetd sharing the journal; a lead sees its own "
    "members of this fleetd with GET /v1/fleet"
)


def _invalid_query(path: str, rule: str, message: str) -> ToolFailure:
    return ToolFailure(
        code="invalid_arguments",
        message=f"{path}: {message}",
        hint={
            "schema": FLEET_QUERY_SCHEMA,
            "errors": [{"path": path, "type": rule, "message": message}],
        },
        http_status=422,
    )


class _ToolRoutes:
    """The two endpoints, bound to one registry and authenticator."""

    def __init__(
        self,
        registry: ToolRegistry,
        auth: Authenticator,
        max_body_bytes: int,
        fleet: FleetVersions | None,
        run: str,
        *,
        across: FleetAcrossView | None = None,
    ) -> None:
        self._across = across
        self._registry = registry
        self._auth = auth
        self._limit = max_body_bytes
        self._fleet = fleet
        self._run = run
        # long-polls waiting now, by caller (an entry goes with its last waiter)
        self._waiting: dict[tuple[str, str], int] = {}

    def _caller(self, request: Request) -> Caller | JSONResponse:
        header = request.headers.get("authorization")
        try:
            return self._auth.authenticate(header)
        except AuthError as error:
            challenge = bearer_challenge(presented=bool(header))
            failure = failure_from_error(error)
            self._registry.answered("", ToolResult.failure(failure))  # counted, no tool named
            return _refuse(failure, {"WWW-Authenticate": challenge})

    def tool(self, name: str) -> Handler:
        """The handler of ``POST /v1/tools/<name>`` for one tool."""

        async def call(request: Request) -> Response:
            return await self._call(request, name)

        return call

    async def call_tool(self, request: Request) -> Response:
        """``POST /v1/tools/{name}`` for a name no tool route took: the registry refuses it."""
        return await self._call(request, str(request.path_params["name"]))

    async def _call(self, request: Request, name: str) -> Response:
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
        return _answer(await self._registry.call(caller, name, args))

    async def fleet(self, request: Request) -> Response:
        caller = self._caller(request)
        if isinstance(caller, JSONResponse):
            return caller
        scope = _scope(request.query_params)
        if isinstance(scope, ToolFailure):
            return _refuse(scope)
        if scope == "all":
            return await self._fleet_all(caller)
        fleet = self._fleet
        if fleet is None or caller.role not in self._registry.get(_FLEET_TOOL).roles:
            return _answer(await self._registry.call(caller, _FLEET_TOOL, {}))
        query = _long_poll(request.query_params)
        if isinstance(query, ToolFailure):
            return _refuse(query)
        await self._registry.contact(caller)
        since, wait = query
        if since is not None and wait > 0:
            who = (caller.role.value, caller.name)
            held = self._waiting.get(who, 0)
            if held >= MAX_WAITS_PER_CALLER:
                return _refuse(_too_many_waits(), {"Retry-After": "1"})
            self._waiting[who] = held + 1
            try:
                if await _wait_unless_gone(request, fleet.wait_past(since, wait)):
                    return Response(status_code=499)  # no one is left to read it
            finally:
                left = self._waiting[who] - 1
                if left:
                    self._waiting[who] = left
                else:
                    del self._waiting[who]
        made = await fleet.encoded(caller)
        self._registry.answered(_FLEET_TOOL, ToolResult.success(_SENT_ENCODED))
        etag = f'"{self._run}-{made.version}-{made.scope}"'
        headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(made.body, media_type="application/json", headers=headers)

    async def _fleet_all(self, caller: Caller) -> Response:
        """``scope=all``: the operator's view of every instance sharing the journal."""
        if caller.role is not Role.OPERATOR:
            return _refuse(ToolFailure(code="forbidden", message=_NOT_YOURS, http_status=403))
        if self._across is None:  # a shell without instances: this fleetd is the whole fleet
            return _refuse(
                _invalid_query("scope", "enum", "this fleetd serves scope=instance only")
            )
        body = await self._across.encoded(caller)
        self._registry.answered(_FLEET_TOOL, ToolResult.success(_SENT_ENCODED))
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    async def _json_object(self, request: Request) -> dict[str, Any] | ToolFailure:
        """The body as a JSON object, or the failure to answer with; reads at most the limit."""
        if declares_more_than(request.headers.get("content-length", ""), self._limit):
            return self._too_large()
        body = bytearray()
        try:
            async with asyncio.timeout(BODY_READ_SECONDS):
                async for chunk in request.stream():
                    body.extend(chunk)
                    if len(body) > self._limit:
                        return self._too_large()
        except TimeoutError:
            return body_too_slow()
        try:
            document = json.loads(bytes(body), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return _invalid_body("the body is not JSON")
        if not isinstance(document, dict):
            return _invalid_body("the body is JSON but not an object")
        return document

    def _too_large(self) -> ToolFailure:
        return body_too_large(self._limit)


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
    fleet: FleetVersions | None = None,
    run: str = "r0",
    across: FleetAcrossView | None = None,
) -> None:
    """Add ``POST /v1/tools/<tool>`` for every tool, and ``GET /v1/fleet``, to ``app``.

    With ``fleet``, ``GET /v1/fleet`` answers from its versions (``ETag`` values name ``run``, the
    run of fleetd, so a restarted fleetd's version 1 is not its predecessor's); without, each
    request calls the ``fleet_list`` tool. With ``across``, ``scope=all`` answers every instance
    sharing the journal.
    """
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    routes = _ToolRoutes(registry, authenticator, max_body_bytes, fleet, run, across=across)
    for spec in registry.specs():
        app.router.routes.append(tool_route(spec, routes.tool(spec.name)))
    app.router.routes.append(Route(TOOLS_PATH, endpoint=routes.call_tool, methods=["POST"]))
    if _FLEET_TOOL in registry.names():
        app.router.routes.append(
            fleet_route(
                registry.get(_FLEET_TOOL),
                routes.fleet,
                all_answer=FleetAllAnswer if across is not None else None,
            )
        )
    else:
        app.router.routes.append(Route(FLEET_PATH, endpoint=routes.fleet, methods=["GET"]))
