"""One tool registry over two real transports: the MCP SDK client and plain HTTP, on uvicorn.

The app is assembled the way the app shell does it — ``install_tool_routes`` and ``install_mcp`` on
a FastAPI app whose lifespan enters the MCP session manager — and served by a real uvicorn on
127.0.0.1 with a random port. MCP is spoken by the SDK's own streamable-HTTP client and
``ClientSession`` with an ``Authorization`` header.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import uvicorn
from fastapi import FastAPI
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from fleetd.api.auth import Authenticator
from fleetd.api.http_tools import install_tool_routes
from fleetd.api.mcp_server import install_mcp
from fleetd.api.tools import Caller, Role, ToolParams, ToolRegistry, ToolSpec
from fleetd.errors import UnknownTargetError

LEAD_TOKEN = "it-lead-token-0123456789abcdef"
OPERATOR_TOKEN = "it-operator-token-0123456789ab"
STARTUP_TIMEOUT = 10.0
CONTRACT = Path(__file__).resolve().parents[2] / "contracts" / "api" / "tool-result.v1.schema.json"


@functools.cache
def envelope_contract() -> Draft202012Validator:
    return Draft202012Validator(json.loads(CONTRACT.read_text()))


class EchoParams(ToolParams):
    text: str


class ReplyParams(ToolParams):
    content: str


class NoParams(ToolParams):
    pass


class TargetParams(ToolParams):
    target: str


@dataclass
class Fleet:
    """The registry under test, what its handlers saw, and who made contact."""

    registry: ToolRegistry
    authenticator: Authenticator
    handled: list[tuple[str, Caller]] = field(default_factory=list)
    contacts: list[Caller] = field(default_factory=list)


def build_fleet() -> Fleet:
    registry = ToolRegistry()
    fleet = Fleet(
        registry=registry,
        authenticator=Authenticator(
            lead_tokens={"alpha": LEAD_TOKEN}, operator_token=OPERATOR_TOKEN
        ),
    )

    async def echo(caller: Caller, params: EchoParams) -> dict[str, Any]:
        fleet.handled.append(("echo", caller))
        return {"echo": params.text}

    async def reply(caller: Caller, params: ReplyParams) -> dict[str, Any]:
        fleet.handled.append(("fleet_reply", caller))
        return {"accepted": True}

    async def fleet_list(caller: Caller, params: NoParams) -> dict[str, Any]:
        fleet.handled.append(("fleet_list", caller))
        return {"sessions": ["s-1"]}

    async def status(caller: Caller, params: TargetParams) -> dict[str, Any]:
        fleet.handled.append(("fleet_status", caller))
        raise UnknownTargetError(f"no live session {params.target!r}", hint={"targets": ["s-1"]})

    async def contact(caller: Caller) -> None:
        fleet.contacts.append(caller)

    lead = frozenset({Role.LEAD})
    for spec in (
        ToolSpec(name="echo", description="Echo.", params=EchoParams, roles=lead, handler=echo),
        ToolSpec(
            name="fleet_reply",
            description="Reply to the lead.",
            params=ReplyParams,
            roles=frozenset({Role.MEMBER}),
            handler=reply,
        ),
        ToolSpec(
            name="fleet_list",
            description="List the fleet.",
            params=NoParams,
            roles=frozenset({Role.LEAD, Role.OPERATOR}),
            handler=fleet_list,
        ),
        ToolSpec(
            name="fleet_status",
            description="One session.",
            params=TargetParams,
            roles=lead,
            handler=status,
        ),
    ):
        registry.register(spec)
    registry.on_contact.append(contact)
    return fleet


def build_app(fleet: Fleet) -> FastAPI:
    """The app the way the shell builds it: routes installed, MCP manager run in the lifespan."""
    running: list[contextlib.AbstractAsyncContextManager[None]] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running[0]:
            yield

    app = FastAPI(lifespan=lifespan)
    install_tool_routes(app, fleet.registry, fleet.authenticator)
    running.append(install_mcp(app, fleet.registry, fleet.authenticator))
    return app


class _ServerUnderTest(uvicorn.Server):
    """uvicorn that says when it listens and leaves the test runner's signal handlers alone."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@dataclass
class Served:
    fleet: Fleet
    base_url: str

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"


@contextlib.asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[str]:
    """``app`` on uvicorn at 127.0.0.1 on a free port, lifespan on; its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on")
    server = _ServerUnderTest(config)
    serving = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    done, _ = await asyncio.wait(
        {serving, listening}, timeout=STARTUP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    if listening not in done:
        listening.cancel()
        server.should_exit = True
        await serving
        pytest.fail("uvicorn did not start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, STARTUP_TIMEOUT)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    fleet = build_fleet()
    async with serve(build_app(fleet)) as base_url:
        yield Served(fleet=fleet, base_url=base_url)


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


def envelope(result: CallToolResult) -> dict[str, Any]:
    """The JSON document a tool result carries as text (what the model reads), checked."""
    [block] = result.content
    assert isinstance(block, TextContent)
    document: dict[str, Any] = json.loads(block.text)
    assert result.structured_content == document
    assert result.is_error is not document["ok"]
    assert list(envelope_contract().iter_errors(document)) == []
    return document


async def test_lead_initializes_lists_and_calls_tools_over_mcp(served: Served) -> None:
    """A lead initializes, sees its tools with their schemas, and gets a result from call_tool."""
    async with mcp_session(served.mcp_url, LEAD_TOKEN) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        result = await session.call_tool("echo", {"text": "hi"})
    assert init.server_info.name == "fleetd"
    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == ["echo", "fleet_list", "fleet_status"]
    assert tools["echo"].description == "Echo."
    assert tools["echo"].input_schema == EchoParams.model_json_schema()
    assert tools["echo"].input_schema["additionalProperties"] is False
    assert result.is_error is False
    assert envelope(result) == {"ok": True, "result": {"echo": "hi"}}
    assert served.fleet.handled == [("echo", Caller(role=Role.LEAD, name="alpha"))]


async def test_tool_failures_are_model_visible_results_with_hints(served: Served) -> None:
    """Unknown target, bad arguments and unknown tool come back as isError results with hints."""
    async with mcp_session(served.mcp_url, LEAD_TOKEN) as session:
        await session.initialize()
        target = await session.call_tool("fleet_status", {"target": "ghost"})
        bad_args = await session.call_tool("echo", {"text": 5, "extra": True})
        unknown = await session.call_tool("fleet_sned", {"target": "s-1"})
    assert target.is_error is True
    assert envelope(target)["error"] == {
        "code": "unknown_target",
        "message": "no live session 'ghost'",
        "hint": {"targets": ["s-1"]},
    }
    assert bad_args.is_error is True
    hint = envelope(bad_args)["error"]["hint"]
    assert hint["schema"] == EchoParams.model_json_schema()
    assert sorted(e["path"] for e in hint["errors"]) == ["extra", "text"]
    assert unknown.is_error is True
    assert envelope(unknown)["error"]["hint"] == {"tools": ["echo", "fleet_list", "fleet_status"]}
    assert [name for name, _ in served.fleet.handled] == ["fleet_status"]


async def test_member_initialize_is_contact_and_lead_tools_are_refused(served: Served) -> None:
    """A member's initialize is contact; it sees only its own tools and lead tools refuse it."""
    fleet = served.fleet
    token = fleet.authenticator.mint_member_token("s-1", "worker-1")
    member = Caller(role=Role.MEMBER, name="worker-1", session_id="s-1")
    async with mcp_session(served.mcp_url, token) as session:
        await session.initialize()
        contacts_after_initialize = list(fleet.contacts)
        listed = await session.list_tools()
        denied = await session.call_tool("echo", {"text": "hi"})
        replied = await session.call_tool("fleet_reply", {"content": "done"})
    assert contacts_after_initialize == [member]
    assert [tool.name for tool in listed.tools] == ["fleet_reply"]
    assert denied.is_error is True
    assert envelope(denied)["error"]["code"] == "forbidden"
    assert "hint" not in envelope(denied)["error"]
    assert envelope(replied) == {"ok": True, "result": {"accepted": True}}
    assert fleet.handled == [("fleet_reply", member)]
    assert fleet.contacts == [member, member, member]


async def test_the_newer_protocol_era_works_too(served: Served) -> None:
    """A client on the handshake-free protocol (server/discover) is served the same tools."""
    async with mcp_session(served.mcp_url, LEAD_TOKEN) as session:
        await session.discover()
        listed = await session.list_tools()
        result = await session.call_tool("echo", {"text": "new"})
    assert sorted(tool.name for tool in listed.tools) == ["echo", "fleet_list", "fleet_status"]
    assert envelope(result) == {"ok": True, "result": {"echo": "new"}}
    assert len(served.fleet.contacts) == 2


@pytest.mark.parametrize("token", [None, "not-a-token", LEAD_TOKEN + "x"])
async def test_mcp_without_a_valid_token_is_401_before_the_sdk(
    served: Served, token: str | None
) -> None:
    """A missing or unknown token on /mcp answers 401 with a challenge; the SDK client fails."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient() as http:
        response = await http.post(served.mcp_url, json=initialize, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert response.json()["error"]["code"] == "unauthenticated"
    async with mcp_session(served.mcp_url, token) as session:
        with pytest.raises(MCPError):
            await session.initialize()
    assert served.fleet.contacts == []
    assert served.fleet.handled == []


async def test_http_routes_share_the_registry(served: Served) -> None:
    """The plain HTTP routes on the same server reach the same tools and role rules."""
    lead = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        echoed = await http.post("/v1/tools/echo", json={"text": "hi"}, headers=lead)
        fleet = await http.get("/v1/fleet", headers=operator)
        denied = await http.post("/v1/tools/echo", json={"text": "hi"}, headers=operator)
        missing = await http.post("/v1/tools/fleet_status", json={"target": "x"}, headers=lead)
    assert echoed.json() == {"ok": True, "result": {"echo": "hi"}}
    assert fleet.json() == {"ok": True, "result": {"sessions": ["s-1"]}}
    assert denied.status_code == 403
    assert missing.status_code == 404
    assert missing.json()["error"]["hint"] == {"targets": ["s-1"]}


async def test_tokens_never_reach_logs_or_responses(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """Over MCP and HTTP, good and bad tokens never appear in any log record or response."""
    member = served.fleet.authenticator.mint_member_token("s-1", "worker-1")
    tokens = [LEAD_TOKEN, OPERATOR_TOKEN, member]
    seen: list[Any] = []
    with caplog.at_level(logging.DEBUG):
        for token in tokens:
            async with mcp_session(served.mcp_url, token) as session:
                await session.initialize()
                seen.append((await session.list_tools()).model_dump())
                for name in ("echo", "fleet_reply", "fleet_status", "nope"):
                    result = await session.call_tool(name, {"target": "x"})
                    seen.append(result.model_dump())
            async with httpx.AsyncClient(base_url=served.base_url) as http:
                for auth in (f"Bearer {token}", f"Bearer {token}-bad"):
                    for response in (
                        await http.get("/v1/fleet", headers={"Authorization": auth}),
                        await http.post("/mcp", json={}, headers={"Authorization": auth}),
                    ):
                        seen.append((response.text, dict(response.headers)))
    text = caplog.text + json.dumps(seen, default=str)
    assert caplog.records
    for token in tokens:
        assert token not in text


@pytest.mark.parametrize("path", ["/v1/tools/echo", "/mcp"])
async def test_a_client_gone_mid_body_is_one_log_line(
    served: Served, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    """A caller that hangs up halfway through its body is one log line, with no traceback."""
    host, port = served.base_url.removeprefix("http://").split(":")
    with caplog.at_level(logging.INFO):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: fleetd.test\r\nAuthorization: Bearer {LEAD_TOKEN}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            'Content-Length: 100\r\n\r\n{"text":'.encode()
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        assert await reader.read() == b""
        # The server notices on its next read; one more request proves it has moved on.
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            assert (await http.get("/v1/fleet")).status_code == 401
    noisy = [r for r in caplog.records if r.exc_info or "\n" in r.getMessage()]
    assert noisy == [], [r.getMessage() for r in noisy]
    gone = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(gone) == 1, [r.getMessage() for r in caplog.records]
