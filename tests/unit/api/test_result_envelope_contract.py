"""contracts/api/tool-result.v1.schema.json describes every answer both transports give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from jsonschema import Draft202012Validator

from fleetd.api.auth import Authenticator
from fleetd.api.http_tools import install_tool_routes
from fleetd.api.tools import ToolRegistry
from tests.unit.api.api_doubles import LEAD, LEAD_TOKEN, MEMBER

CONTRACT = Path(__file__).resolve().parents[3] / "contracts" / "api" / "tool-result.v1.schema.json"


@pytest.fixture(scope="module")
def envelope() -> Draft202012Validator:
    schema = json.loads(CONTRACT.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


async def test_registry_answers_match_the_contract(
    registry: ToolRegistry, envelope: Draft202012Validator, result_breaches: Any
) -> None:
    """Successes and every failure kind the registry produces validate against the contract."""
    result_breaches.expect()  # bad_shape answers outside its result model on purpose
    calls: list[tuple[Any, str, dict[str, Any]]] = [
        (LEAD, "echo", {"text": "hi"}),
        (LEAD, "nope", {}),
        (LEAD, "echo", {"text": 1, "x": 2}),
        (MEMBER, "echo", {"text": "hi"}),
        (LEAD, "boom", {}),
        (LEAD, "bad_shape", {}),
        *[(LEAD, "find", {"target": t}) for t in ("ghost", "busy", "full", "sneaky")],
    ]
    for caller, tool, args in calls:
        document = (await registry.call(caller, tool, args)).to_json()
        assert list(envelope.iter_errors(document)) == [], document


async def test_http_transport_failures_match_the_contract(
    registry: ToolRegistry, authenticator: Authenticator, envelope: Draft202012Validator
) -> None:
    """The HTTP-only failures (401, 400, 413) use the same envelope."""
    app = FastAPI()
    install_tool_routes(app, registry, authenticator, max_body_bytes=64)
    auth = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fleetd.test"
    ) as client:
        answers = [
            await client.post("/v1/tools/echo", json={"text": "hi"}),
            await client.post("/v1/tools/echo", content=b"[1]", headers=auth),
            await client.post("/v1/tools/echo", content=b"x" * 65, headers=auth),
        ]
    assert [a.status_code for a in answers] == [401, 400, 413]
    for answer in answers:
        assert list(envelope.iter_errors(answer.json())) == [], answer.text


@pytest.mark.parametrize(
    "document",
    [
        {"ok": True},
        {"ok": True, "result": {}, "error": {"code": "x", "message": "m"}},
        {"ok": False, "error": {"code": "forbidden", "message": "m", "hint": {"ask": "x"}}},
        {"ok": False, "error": {"code": "unknown_tool", "message": "m"}},
        {"ok": False, "error": {"code": "invalid_arguments", "message": "m", "hint": {}}},
        {"ok": False, "error": {"code": "Bad Code", "message": "m"}},
        {"ok": False, "error": {"code": "conflict", "message": ""}},
    ],
)
def test_contract_refuses_malformed_answers(
    envelope: Draft202012Validator, document: dict[str, Any]
) -> None:
    """The contract is strict: hint rules, required fields and code spelling are enforced."""
    assert not envelope.is_valid(document)
