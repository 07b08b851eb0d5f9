"""POST /v1/tools/<name> and GET /v1/fleet: one envelope, one status code per failure kind."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI

from fleetd.api import http_tools
from fleetd.api.auth import Authenticator
from fleetd.api.http_tools import install_tool_routes
from fleetd.api.tools import MAX_ARGUMENTS, ToolRegistry
from tests.unit.api.api_doubles import (
    LEAD_TOKEN,
    OPERATOR_TOKEN,
    SECRET_IN_HANDLER,
    Calls,
    raw_call,
)

LIMIT = 2048
CONTRACT = Path(__file__).resolve().parents[3] / "contracts" / "api" / "tool-result.v1.schema.json"
LEAD_AUTH = {"Authorization": f"Bearer {LEAD_TOKEN}"}


@pytest.fixture
async def client(
    registry: ToolRegistry, authenticator: Authenticator
) -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_tool_routes(app, registry, authenticator, max_body_bytes=LIMIT)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd.test") as client:
        yield client


async def test_ok_call_answers_200_with_the_result(client: httpx.AsyncClient, calls: Calls) -> None:
    """A lead's valid call answers 200 with the ok envelope."""
    response = await client.post("/v1/tools/echo", json={"text": "hi"}, headers=LEAD_AUTH)
    assert response.status_code == 200
    assert response.json() == {"ok": True, "result": {"echo": "hi", "by": "alpha"}}
    assert calls.names() == ["echo"]


# (case, tool, raw body, status, code); the handler must never run.
REFUSED_BODIES: list[tuple[str, str, bytes, int, str]] = [
    ("unknown tool", "fleet_nope", b"{}", 404, "unknown_tool"),
    ("wrong type", "echo", b'{"text": 5}', 422, "invalid_arguments"),
    ("missing field", "echo", b"{}", 422, "invalid_arguments"),
    ("extra field", "echo", b'{"text": "a", "x": 1}', 422, "invalid_arguments"),
    ("not JSON", "echo", b"text=hi", 400, "invalid_body"),
    ("empty body", "echo", b"", 400, "invalid_body"),
    ("NaN", "echo", b'{"text": NaN}', 400, "invalid_body"),
    ("bad utf-8", "echo", b'{"text": "\xff"}', 400, "invalid_body"),
    ("array", "echo", b'["hi"]', 400, "invalid_body"),
    ("string", "echo", b'"hi"', 400, "invalid_body"),
    ("oversized", "echo", b'{"text": "' + b"a" * LIMIT + b'"}', 413, "body_too_large"),
]


@pytest.mark.parametrize("case", REFUSED_BODIES, ids=[case[0] for case in REFUSED_BODIES])
async def test_bad_requests_are_refused_with_a_reason(
    client: httpx.AsyncClient, calls: Calls, case: tuple[str, str, bytes, int, str]
) -> None:
    """Each kind of bad request gets its status and a JSON reason, and no handler runs."""
    _, tool, body, status, code = case
    headers = {**LEAD_AUTH, "Content-Type": "application/json"}
    response = await client.post(f"/v1/tools/{tool}", content=body, headers=headers)
    assert response.status_code == status
    payload = response.json()
    assert payload["ok"] is False
    assert payload["error"]["code"] == code
    assert payload["error"]["message"]
    assert calls.seen == []


async def test_deeply_nested_json_within_the_limit_is_400(
    registry: ToolRegistry, authenticator: Authenticator, calls: Calls
) -> None:
    """JSON nested too deep to parse is a 400, not a crash."""
    app = FastAPI()
    install_tool_routes(app, registry, authenticator, max_body_bytes=10_000_000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fleetd.test"
    ) as client:
        body = b"[" * 1_000_000 + b"]" * 1_000_000
        response = await client.post("/v1/tools/echo", content=body, headers=LEAD_AUTH)
    assert response.status_code == 400
    assert calls.seen == []


async def test_oversized_streamed_body_is_413(client: httpx.AsyncClient, calls: Calls) -> None:
    """A chunked body with no Content-Length is cut off at the limit with 413."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(10):
            yield b"a" * 512
        yield b'"}'

    response = await client.post("/v1/tools/echo", content=chunks(), headers=LEAD_AUTH)
    assert response.status_code == 413
    assert response.json()["error"]["hint"] == {"maxBytes": LIMIT}
    assert calls.seen == []


async def test_unknown_tool_404_carries_the_tool_names(client: httpx.AsyncClient) -> None:
    """An unknown tool answers 404 with the caller's tool names as the hint."""
    response = await client.post("/v1/tools/fleet_sned", json={}, headers=LEAD_AUTH)
    assert response.status_code == 404
    assert "echo" in response.json()["error"]["hint"]["tools"]


async def test_bad_arguments_422_carries_schema_and_paths(client: httpx.AsyncClient) -> None:
    """Bad arguments answer 422 with the params schema and the failing field paths."""
    response = await client.post("/v1/tools/echo", json={"text": 1, "x": 2}, headers=LEAD_AUTH)
    hint = response.json()["error"]["hint"]
    assert response.status_code == 422
    assert hint["schema"]["required"] == ["text"]
    assert sorted(e["path"] for e in hint["errors"]) == ["text", "x"]


async def test_a_flood_of_bad_arguments_gets_a_bounded_refusal(client: httpx.AsyncClient) -> None:
    """Thirty unknown keys: the first 20 field errors are listed and the other 11 counted; more
    keys than any tool takes are refused as one error before validation. Both answers are in
    the envelope's contract."""
    contract = json.loads(CONTRACT.read_text())
    some = {f"k{n:02}": n for n in range(30)}
    response = await client.post("/v1/tools/echo", json=some, headers=LEAD_AUTH)
    assert response.status_code == 422
    hint = response.json()["error"]["hint"]
    assert (len(hint["errors"]), hint["errorsOmitted"]) == (20, 11)  # 30 unknown + text missing
    jsonschema.validate(response.json(), contract)
    flood = {f"k{n:03}": n for n in range(MAX_ARGUMENTS + 1)}
    response = await client.post("/v1/tools/echo", json=flood, headers=LEAD_AUTH)
    assert response.status_code == 422
    [only] = response.json()["error"]["hint"]["errors"]
    assert only["type"] == "too_many_arguments"
    jsonschema.validate(response.json(), contract)


@pytest.mark.parametrize(
    ("headers", "challenge"),
    [
        ({}, 'Bearer realm="fleetd"'),
        ({"Authorization": "Bearer nope"}, 'Bearer realm="fleetd", error="invalid_token"'),
        ({"Authorization": f"Basic {LEAD_TOKEN}"}, 'Bearer realm="fleetd", error="invalid_token"'),
    ],
)
@pytest.mark.parametrize("endpoint", [("POST", "/v1/tools/echo"), ("GET", "/v1/fleet")])
async def test_missing_or_bad_token_is_401_with_a_challenge(
    client: httpx.AsyncClient,
    calls: Calls,
    headers: dict[str, str],
    challenge: str,
    endpoint: tuple[str, str],
) -> None:
    """No token or a wrong token answers 401 with WWW-Authenticate, no hint, and runs nothing."""
    method, path = endpoint
    response = await client.request(method, path, json={"text": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == challenge
    assert response.json()["error"]["code"] == "unauthenticated"
    assert "hint" not in response.json()["error"]
    assert calls.seen == []


async def test_unauthenticated_caller_learns_nothing_about_the_body(
    client: httpx.AsyncClient,
) -> None:
    """Without a token, even an oversized or non-JSON body is answered 401."""
    for body in (b"x" * (LIMIT * 2), b"not json"):
        response = await client.post("/v1/tools/fleet_nope", content=body)
        assert response.status_code == 401


async def test_member_calling_a_lead_tool_is_403(
    client: httpx.AsyncClient, authenticator: Authenticator, calls: Calls
) -> None:
    """A member token may call fleet_reply but gets 403, without a hint, on a lead tool."""
    token = authenticator.mint_member_token("s-9", "worker-9")
    auth = {"Authorization": f"Bearer {token}"}
    denied = await client.post("/v1/tools/echo", json={"text": "hi"}, headers=auth)
    allowed = await client.post("/v1/tools/fleet_reply", json={"content": "done"}, headers=auth)
    assert denied.status_code == 403
    assert "hint" not in denied.json()["error"]
    assert allowed.json() == {"ok": True, "result": {"accepted": True, "sessionId": "s-9"}}
    assert calls.names() == ["fleet_reply"]


async def test_operator_reads_the_fleet_and_nothing_else(
    client: httpx.AsyncClient, calls: Calls
) -> None:
    """The operator token reads GET /v1/fleet (and fleet_list) but no other tool."""
    auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    fleet = await client.get("/v1/fleet", headers=auth)
    same = await client.post("/v1/tools/fleet_list", json={}, headers=auth)
    other = await client.post("/v1/tools/echo", json={"text": "hi"}, headers=auth)
    assert fleet.status_code == 200
    assert fleet.json() == same.json() == {"ok": True, "result": {"sessions": ["s-1", "s-2"]}}
    assert other.status_code == 403
    assert calls.names() == ["fleet_list", "fleet_list"]


# target -> (status, code)
TARGET_FAILURES = {
    "ghost": (404, "unknown_target"),
    "busy": (409, "conflict"),
    "full": (409, "capacity_exceeded"),
}


@pytest.mark.parametrize("target", sorted(TARGET_FAILURES))
async def test_handler_failures_map_to_status_codes(client: httpx.AsyncClient, target: str) -> None:
    """Unknown targets, conflicts and capacity refusals map to 404 and 409."""
    response = await client.post("/v1/tools/find", json={"target": target}, headers=LEAD_AUTH)
    assert (response.status_code, response.json()["error"]["code"]) == TARGET_FAILURES[target]


async def test_unknown_target_hint_lists_valid_targets(client: httpx.AsyncClient) -> None:
    """An unknown target's hint names the live targets."""
    response = await client.post("/v1/tools/find", json={"target": "ghost"}, headers=LEAD_AUTH)
    assert response.json()["error"]["hint"] == {"targets": ["s-1", "s-2"]}


async def test_handler_bug_is_500_without_exception_text(client: httpx.AsyncClient) -> None:
    """A handler crash answers 500 internal_error and the exception text stays in the daemon."""
    response = await client.post("/v1/tools/boom", json={}, headers=LEAD_AUTH)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert SECRET_IN_HANDLER not in response.text


async def test_tokens_never_reach_logs_or_responses(
    client: httpx.AsyncClient, authenticator: Authenticator, caplog: pytest.LogCaptureFixture
) -> None:
    """Across good and bad calls no token appears in any log record, response body or header."""
    member = authenticator.mint_member_token("s-1", "worker-1")
    tokens = [LEAD_TOKEN, OPERATOR_TOKEN, member]
    answers: list[httpx.Response] = []
    with caplog.at_level(logging.DEBUG):
        for token in tokens:
            for auth in (f"Bearer {token}", f"Bearer {token}-wrong", token):
                headers = {"Authorization": auth}
                answers.append(await client.get("/v1/fleet", headers=headers))
                for tool, args in (
                    ("echo", {"text": 1}),
                    ("fleet_reply", {"content": "x"}),
                    ("boom", {}),
                    ("nope", {}),
                ):
                    answers.append(
                        await client.post(f"/v1/tools/{tool}", json=args, headers=headers)
                    )
    seen: list[Any] = [caplog.text]
    seen += [(r.text, dict(r.headers)) for r in answers]
    text = json.dumps(seen, default=str)
    for token in tokens:
        assert token not in text


async def test_a_tool_body_that_stalls_is_408_and_let_go(
    registry: ToolRegistry, authenticator: Authenticator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends part of a tool call's body and then nothing is answered 408 once the
    body deadline passes, its partial body let go; the tool never runs."""
    monkeypatch.setattr(http_tools, "BODY_READ_SECONDS", 0.05)
    app = FastAPI()
    install_tool_routes(app, registry, authenticator, max_body_bytes=LIMIT)
    status, _, body, _ = await raw_call(app, "POST", "/v1/tools/echo", [], [b'{"text": '])
    assert (status, json.loads(body)["error"]["code"]) == (408, "request_timeout")
