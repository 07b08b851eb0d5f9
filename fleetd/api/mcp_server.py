"""The fleet tools over MCP (streamable HTTP), served by the official SDK from the same registry.

Shape, outside in:

* :class:`McpAuthGate` — an ASGI wrapper that answers a missing or unknown bearer token with HTTP
  401 before the SDK sees the request, and otherwise stores the resolved
  :class:`~fleetd.api.tools.Caller` in the ASGI scope under :data:`CALLER_SCOPE_KEY`.
* the SDK's :class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`, **stateless**
  and answering with **plain JSON**. Stateless because fleetd keeps no per-connection MCP state:
  every POST stands alone, so a daemon restart never strands a client on a dead ``Mcp-Session-Id``
  (a stateful manager forgets its sessions and answers 404 until the client re-initialises, which
  agent CLIs handle unevenly), there is no idle reaping or session cap to tune, and no GET stream
  to keep open. fleetd never sends server-to-client requests, which is the one thing stateless
  mode gives up. JSON rather than SSE because every answer is a single message.
* a low-level :class:`~mcp.server.lowlevel.Server` whose ``tools/list`` shows each tool the caller's
  role may call (name, description, params JSON Schema, the ``outputSchema`` of its answer
  envelope — :func:`fleetd.api.envelope.output_schema`, the tool's result schema inside — and
  its annotations: ``readOnlyHint``, ``destructiveHint``, ``idempotentHint`` from the registry,
  ``openWorldHint`` false, since every tool acts on this fleet only) and whose ``tools/call`` runs
  :meth:`ToolRegistry.call`. The handler finds the caller through the Starlette request the SDK
  attaches to every request context (``ctx.request.scope``), so no context variable has to survive
  the SDK's task hops.

A failed call is an MCP tool *result* with ``isError: true`` whose text is the structured failure
``{"ok": false, "error": {code, message, hint?}}`` — visible to the model, which can correct and
retry. An ``initialize`` (or the newer ``server/discover``) is reported to the registry's contact
hooks: for a member it is the readiness signal.

The gate also reads the request body (up to the body limit, within
:data:`~fleetd.api.tools.BODY_READ_SECONDS`) before the SDK sees it: a caller that hangs up
mid-body is then one line on ``fleetd.api``, not the SDK's logged traceback; one that stalls is
answered 408 and let go; a declared ``Content-Length`` past the limit is 413 before anything is
read. Anything but POST is 405 (``Allow: POST``): the streamable HTTP transport lets a server
without a GET stream say so, and a stateless one has no session to resume or delete.

DNS-rebinding protection (Host/Origin checks) is off unless ``transport_security`` is passed: every
request must already carry a bearer token, which a rebinding web page cannot know, and the shell
decides which host names it serves under.

The session manager has a task group that must run for as long as the app serves. A sub-app's
lifespan does not run when mounted, so :func:`install_mcp` returns the manager's ``run()`` context
manager and the app shell enters it in its own lifespan.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types
from fastapi import FastAPI
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from fleetd.api.auth import Authenticator, bearer_challenge
from fleetd.api.envelope import output_schema
from fleetd.api.tools import (
    BODY_READ_SECONDS,
    Caller,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    body_too_large,
    body_too_slow,
    declares_more_than,
    failure_from_error,
)
from fleetd.errors import AuthError

__all__ = [
    "CALLER_SCOPE_KEY",
    "DEFAULT_MCP_BODY_LIMIT",
    "McpAuthGate",
    "build_mcp_server",
    "install_mcp",
]

_log = logging.getLogger("fleetd.api")

CALLER_SCOPE_KEY = "fleetd.caller"
DEFAULT_MCP_BODY_LIMIT = 1024 * 1024
_CONTACT_METHODS = frozenset({"initialize", "server/discover"})
_SERVER_NAME = "fleetd"


async def _send_json(
    send: Send, status: int, document: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


_POST_ONLY = ToolFailure(
    code="method_not_allowed",
    message="fleetd serves MCP statelessly with JSON answers: POST only (no GET stream to open "
    "or resume, no session to delete)",
    http_status=405,
)


class McpAuthGate:
    """ASGI wrapper: 401 unless the request carries a known bearer token; else record the caller."""

    def __init__(
        self,
        app: Callable[[Scope, Receive, Send], Awaitable[None]],
        auth: Authenticator,
        *,
        max_body_bytes: int = DEFAULT_MCP_BODY_LIMIT,
        refused: Callable[[ToolResult], None] = lambda _result: None,
    ):
        self._app = app
        self._auth = auth
        self._limit = max_body_bytes
        self._refused = refused  # hears of each token refused (the tool-call counter)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        header = Request(scope).headers.get("authorization")
        try:
            caller = self._auth.authenticate(header)
        except AuthError as error:
            challenge = bearer_challenge(presented=bool(header))
            result = ToolResult.failure(failure_from_error(error))
            self._refused(result)
            document = result.to_json()
            await _send_json(send, 401, document, [(b"www-authenticate", challenge.encode())])
            return
        scope[CALLER_SCOPE_KEY] = caller
        if scope["method"] != "POST":  # stateless, JSON answers: no GET stream, no session
            document = ToolResult.failure(_POST_ONLY).to_json()
            await _send_json(send, 405, document, [(b"allow", b"POST")])
            return
        if declares_more_than(Request(scope).headers.get("content-length", ""), self._limit):
            await _send_json(send, 413, ToolResult.failure(body_too_large(self._limit)).to_json())
            return
        try:
            async with asyncio.timeout(BODY_READ_SECONDS):
                head = await _read_body(receive, self._limit)
        except TimeoutError:
            document = ToolResult.failure(body_too_slow()).to_json()
            await _send_json(send, 408, document, [(b"connection", b"close")])
            return
        if head is None:
            _log.info("a %s caller disconnected before its MCP request body arrived", caller.role)
            return
        if sum(len(message.get("body", b"")) for message in head) > self._limit:
            # answered here, in the envelope every other refusal uses (the SDK's is plain text)
            failure = body_too_large(self._limit)
            await _send_json(send, 413, ToolResult.failure(failure).to_json())
            return
        await self._app(scope, _replay(head, receive), send)


async def _read_body(receive: Receive, limit: int) -> list[Message] | None:
    """The body messages up to the end of the body or just past ``limit``; None on a hang-up."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        messages.append(message)
        size += len(message.get("body", b""))
        if not message.get("more_body", False) or size > limit:
            return messages


def _replay(head: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out ``head`` first, then the real one (for a later disconnect)."""
    pending = list(head)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller the gate recorded for the HTTP request behind ``ctx``."""
    request = ctx.request
    caller = request.scope.get(CALLER_SCOPE_KEY) if isinstance(request, Request) else None
    if not isinstance(caller, Caller):
        # Unreachable behind McpAuthGate; refuse rather than guess an identity.
        raise AuthError("the request reached MCP without an authenticated caller")
    return caller


def _tool_result(outcome: ToolResult) -> mcp_types.CallToolResult:
    document = outcome.to_json()
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=json.dumps(document, sort_keys=True))],
        structured_content=document,
        is_error=not outcome.ok,
    )


def _annotations(spec: ToolSpec[Any]) -> mcp_types.ToolAnnotations:
    """The tool's hints; destructive and idempotent mean something only for a tool that writes."""
    writes = not spec.read_only
    return mcp_types.ToolAnnotations(
        read_only_hint=spec.read_only,
        destructive_hint=spec.destructive if writes else None,
        idempotent_hint=spec.idempotent if writes else None,
        open_world_hint=False,
    )


def _listed(spec: ToolSpec[Any]) -> mcp_types.Tool:
    return mcp_types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.params_schema(),
        output_schema=output_schema(spec),
        annotations=_annotations(spec),
    )


def build_mcp_server(registry: ToolRegistry) -> Server[Any]:
    """A low-level MCP server whose tools are ``registry``'s, scoped to the caller's role."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        caller = _caller_of(ctx)
        return mcp_types.ListToolsResult(
            tools=[_listed(spec) for spec in registry.tools_for(caller.role)]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        try:
            caller = _caller_of(ctx)
        except AuthError as error:
            return _tool_result(ToolResult.failure(failure_from_error(error)))
        outcome = await registry.call(caller, params.name, params.arguments or {})
        return _tool_result(outcome)

    async def report_contact(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method in _CONTACT_METHODS:
            await registry.contact(_caller_of(ctx))
        return await call_next(ctx)

    server: Server[Any] = Server(
        _SERVER_NAME, version="1", on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.middleware.append(report_contact)
    return server


class _SdkEndpoint:
    """The SDK's ASGI entry; answers 503 while its session manager is not running."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager
        self._running = False

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self._manager.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._running:
            failure = ToolFailure(
                code="unavailable",
                message="MCP is not running: the app's lifespan has not started it",
                http_status=503,
            )
            await _send_json(send, 503, ToolResult.failure(failure).to_json())
            return
        await self._manager.handle_request(scope, receive, send)


def install_mcp(
    app: FastAPI,
    registry: ToolRegistry,
    authenticator: Authenticator,
    *,
    path: str = "/mcp",
    max_body_bytes: int = DEFAULT_MCP_BODY_LIMIT,
    transport_security: TransportSecuritySettings | None = None,
) -> AbstractAsyncContextManager[None]:
    """Serve the registry's tools over MCP at ``path`` on ``app``.

    Returns the session manager's ``run()`` context manager, which the app shell must enter in its
    lifespan — until it is entered (and after it is left) ``path`` answers 503::

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            async with app.state.mcp_running:
                yield

        app = FastAPI(lifespan=lifespan)
        app.state.mcp_running = install_mcp(app, registry, authenticator)

    It can be entered once; build a new app to serve again. The route is appended to
    ``app.router.routes``, so install before any catch-all mount.
    """
    manager = StreamableHTTPSessionManager(
        app=build_mcp_server(registry),
        stateless=True,
        json_response=True,
        security_settings=transport_security,
        max_request_body_size=max_body_bytes,
    )

    endpoint = _SdkEndpoint(manager)
    gate = McpAuthGate(
        endpoint,
        authenticator,
        max_body_bytes=max_body_bytes,
        refused=lambda result: registry.answered("", result),
    )
    app.router.routes.append(Route(path, endpoint=gate, include_in_schema=False))
    return endpoint.run()
