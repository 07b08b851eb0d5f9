"""The fleet tools as an MCP client sees them on the app ``fleetd serve`` runs: each declares the
``outputSchema`` of its answer (its result contract inside the envelope) and its annotations, and
a real call's structured content is valid against the schema it declared.

The app is ``create_app`` over the composition root (on fakes, :func:`build_test_fleet`), served
by uvicorn on 127.0.0.1 and spoken to by the SDK's own streamable-HTTP client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp_types import Tool

from fleetd.api.app import create_app
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet
from tests.integration.test_api_transports import mcp_session, serve

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "api"
READ_ONLY = {"fleet_list", "fleet_status", "fleet_poll"}


@dataclass
class ServedFleet:
    fleet: TestFleet
    mcp_url: str


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[ServedFleet]:
    fleet = build_test_fleet(tmp_path)
    async with serve(create_app(fleet.service)) as base_url:
        yield ServedFleet(fleet=fleet, mcp_url=f"{base_url}/mcp")


async def _listed(served: ServedFleet, token: str) -> dict[str, Tool]:
    async with mcp_session(served.mcp_url, token) as session:
        await session.initialize()
        return {tool.name: tool for tool in (await session.list_tools()).tools}


async def test_each_fleet_tool_declares_its_output_schema_and_annotations(
    served: ServedFleet,
) -> None:
    """tools/list gives every tool an outputSchema whose success branch is its result contract
    and whose failure branch is the envelope's, and hints: list/status/poll read-only, stop
    destructive, the others additive; none reaches an open world."""
    member = served.fleet.service.authenticator.mint_member_token("sess-m", "m1")
    tools = {**await _listed(served, LEAD_TOKEN), **await _listed(served, member)}
    # one result contract per tool: <tool>.result.schema.json (a route's own answer, such as
    # GET /v1/fleet?scope=all's fleet_list.scope-all.result.schema.json, is not a tool)
    assert sorted(tools) == sorted(
        p.name.removesuffix(".result.schema.json")
        for p in CONTRACTS.glob("*.result.schema.json")
        if "." not in p.name.removesuffix(".result.schema.json")
    )
    envelope = json.loads((CONTRACTS / "tool-result.v1.schema.json").read_text())
    for name, tool in tools.items():
        schema = tool.output_schema
        assert schema is not None, name
        Draft202012Validator.check_schema(schema)
        contract = json.loads((CONTRACTS / f"{name}.result.schema.json").read_text())
        success, failure = schema["oneOf"]
        assert schema["type"] == "object"
        assert success["properties"]["result"] == {
            key: value for key, value in contract.items() if key not in ("$schema", "$defs")
        }, name
        assert failure == envelope["oneOf"][1], name
        assert schema["$defs"] == {**envelope["$defs"], **contract.get("$defs", {})}, name
        hints = tool.annotations
        assert hints is not None, name
        assert hints.read_only_hint is (name in READ_ONLY), name
        assert hints.open_world_hint is False, name
        if name not in READ_ONLY:
            assert hints.destructive_hint is (name == "fleet_stop"), name
            assert hints.idempotent_hint is (name == "fleet_stop"), name


async def test_real_answers_are_valid_against_the_declared_output_schema(
    served: ServedFleet,
) -> None:
    """A fleet_list and a failed fleet_status over MCP carry structured content that the schema
    each tool declared accepts (the SDK client checks a success against it too)."""
    async with mcp_session(served.mcp_url, LEAD_TOKEN) as session:
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        listed = await session.call_tool("fleet_list", {})
        missing = await session.call_tool("fleet_status", {"sessionId": "sess_nobody"})
    answers: list[tuple[str, Any]] = [("fleet_list", listed), ("fleet_status", missing)]
    assert (listed.is_error, missing.is_error) == (False, True)
    for name, answer in answers:
        schema = tools[name].output_schema
        assert schema is not None, name
        errors = [
            e.message for e in Draft202012Validator(schema).iter_errors(answer.structured_content)
        ]
        assert errors == [], name
    assert listed.structured_content["result"]["version"] == 1
    assert missing.structured_content["error"]["code"] == "unknown_target"
