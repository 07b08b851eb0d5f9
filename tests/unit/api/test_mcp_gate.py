"""The MCP auth gate answers 401 itself and hands only authenticated requests to the SDK."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from fleetd.api import mcp_server
from fleetd.api.auth import Authenticator
from fleetd.api.mcp_server import CALLER_SCOPE_KEY, McpAuthGate, install_mcp
from fleetd.api.tools import ToolRegistry
from tests.unit.api.api_doubles import LEAD, LEAD_TOKEN, raw_call


class Inner:
    """Stands in for the SDK: records the scopes it is handed and answers 200."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(dict(scope))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def post(gate: McpAuthGate, headers: dict[str, str]) -> httpx.Response:
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd.test") as client:
        return await client.post("/mcp", json={"jsonrpc": "2.0"}, headers=headers)


@pytest.mark.parametrize(
    ("headers", "challenge"),
    [
        ({}, 'Bearer realm="fleetd"'),
        ({"Authorization": "Bearer wrong"}, 'Bearer realm="fleetd", error="invalid_token"'),
    ],
)
async def test_gate_refuses_without_a_valid_token(
    authenticator: Authenticator, headers: dict[str, str], challenge: str
) -> None:
    """A missing or unknown token is a 401 with a Bearer challenge; the SDK never sees it."""
    inner = Inner()
    response = await post(McpAuthGate(inner, authenticator), headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == challenge
    assert response.json()["error"]["code"] == "unauthenticated"
    assert inner.scopes == []


async def test_gate_refuses_a_body_past_the_limit_in_the_envelope(
    authenticator: Authenticator,
) -> None:
    """An authenticated request whose body passes the limit is a 413 with ``body_too_large`` and
    the limit, in the envelope every other refusal uses; the SDK never sees it."""
    inner = Inner()
    gate = McpAuthGate(inner, authenticator, max_body_bytes=64)
    transport = httpx.ASGITransport(app=gate)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd.test") as client:
        response = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "padding": "x" * 100},
            headers={"Authorization": f"Bearer {LEAD_TOKEN}"},
        )
    assert response.status_code == 413
    error = response.json()["error"]
    assert (error["code"], error["hint"]) == ("body_too_large", {"maxBytes": 64})
    assert inner.scopes == []


async def test_gate_records_the_caller_in_the_scope(authenticator: Authenticator) -> None:
    """A known token reaches the SDK with the resolved caller in the ASGI scope, not the token."""
    inner = Inner()
    response = await post(
        McpAuthGate(inner, authenticator), {"Authorization": f"Bearer {LEAD_TOKEN}"}
    )
    assert response.status_code == 200
    [scope] = inner.scopes
    assert scope[CALLER_SCOPE_KEY] == LEAD


async def test_mcp_answers_503_unless_the_lifespan_runs_it(
    registry: ToolRegistry, authenticator: Authenticator
) -> None:
    """Before the returned context is entered and after it is left, /mcp answers 503."""
    app = FastAPI()
    running = install_mcp(app, registry, authenticator)
    headers = {
        "Authorization": f"Bearer {LEAD_TOKEN}",
        "Accept": "application/json, text/event-stream",
    }
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd.test") as client:
        before = await client.post("/mcp", json=ping, headers=headers)
        async with running:
            during = await client.post("/mcp", json=ping, headers=headers)
        after = await client.post("/mcp", json=ping, headers=headers)
    assert before.status_code == after.status_code == 503
    assert before.json()["error"]["code"] == "unavailable"
    assert during.status_code == 200
    assert during.json()["result"] == {}


@pytest.mark.parametrize("headers", [[], [(b"last-event-id", b"7")]])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_anything_but_post_is_405_in_the_envelope(
    authenticator: Authenticator, method: str, headers: list[tuple[bytes, bytes]]
) -> None:
    """Stateless MCP with JSON answers has no GET stream to open or resume and no session to
    delete: 405 with ``Allow: POST`` (the SDK answered a resume with a 500, and a bare GET with
    a stream that never ended)."""
    inner = Inner()
    status, answered, body, _ = await raw_call(
        McpAuthGate(inner, authenticator), method, "/mcp", headers, []
    )
    assert (status, answered[b"allow"]) == (405, b"POST")
    assert json.loads(body)["error"]["code"] == "method_not_allowed"
    assert inner.scopes == []


async def test_a_declared_oversized_body_is_413_before_it_is_read(
    authenticator: Authenticator,
) -> None:
    """A Content-Length past the limit is refused at once: not a byte of the body is buffered."""
    inner = Inner()
    gate = McpAuthGate(inner, authenticator, max_body_bytes=64)
    status, _, body, asked = await raw_call(
        gate, "POST", "/mcp", [(b"content-length", b"999999999")], []
    )
    assert (status, json.loads(body)["error"]["code"], asked) == (413, "body_too_large", 0)


async def test_a_body_that_stalls_is_408_and_let_go(
    authenticator: Authenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends part of its body and then nothing is answered 408 once the body
    deadline passes; the SDK never sees it."""
    monkeypatch.setattr(mcp_server, "BODY_READ_SECONDS", 0.05)
    inner = Inner()
    gate = McpAuthGate(inner, authenticator)
    status, _, body, _ = await raw_call(gate, "POST", "/mcp", [], [b'{"jsonrpc": "2.0", '])
    assert (status, json.loads(body)["error"]["code"]) == (408, "request_timeout")
    assert inner.scopes == []
