"""Every fleet tool's answer, over real HTTP and MCP, obeys contracts/api/<tool>.result.schema.json.

A lead drives a member of the simulator through the whole life of a task — spawn, status, a
synchronous and an asynchronous send, poll by ticket, inbox drain, list, stop — and the member's
own token replies, once over each transport. Each successful ``result`` is checked against the
committed schema file (not the model it was generated from), and the model must give back
exactly what the caller received: a result model describes the payload, it never reshapes it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx2
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from fleetd.bridge.sessions import SessionState
from tests.e2e.e2e_fleet import LEAD_TOKEN, OPERATOR_TOKEN, E2EFleet

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "api"
TOOLS = frozenset(
    {
        "fleet_spawn",
        "fleet_send",
        "fleet_poll",
        "fleet_status",
        "fleet_list",
        "fleet_stop",
        "fleet_reply",
    }
)


@functools.cache
def result_contract(tool: str) -> Draft202012Validator:
    schema = json.loads((CONTRACTS / f"{tool}.result.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


class Checked:
    """Each answer a transport gave, checked against its tool's result contract."""

    def __init__(self, e2e: E2EFleet) -> None:
        self.e2e = e2e
        self.tools: set[str] = set()

    def __call__(self, tool: str, answer: dict[str, Any]) -> dict[str, Any]:
        assert answer["ok"], answer
        result: dict[str, Any] = answer["result"]
        errors = [e.message for e in result_contract(tool).iter_errors(result)]
        assert errors == [], (tool, errors)
        model = self.e2e.service.registry.get(tool).result
        assert model is not None, tool
        again = model.model_validate(result).model_dump(
            mode="json", by_alias=True, exclude_unset=True
        )
        assert again == result, tool
        self.tools.add(tool)
        return result


def _state(e2e: E2EFleet, session_id: str) -> SessionState | None:
    session = e2e.service.bridge.reads.session(session_id)
    return None if session is None else session.state


def _member_token(e2e: E2EFleet, name: str) -> str:
    token: str = e2e.simulator.agent(name).env["FLEETD_TOKEN"]
    return token


async def _lifecycle(e2e: E2EFleet, call: Any, check: Checked, profile: str, mute: str) -> None:
    """One member through a task's whole life, and a mute member answered by its own token."""
    spawned = check("fleet_spawn", await call(LEAD_TOKEN, "fleet_spawn", {"profile": profile}))
    sid = spawned["sessionId"]
    await e2e.until(lambda: _state(e2e, sid) is SessionState.READY)
    check("fleet_status", await call(LEAD_TOKEN, "fleet_status", {"sessionId": sid}))
    synced = check(
        "fleet_send",
        await call(LEAD_TOKEN, "fleet_send", {"target": sid, "prompt": "a", "wait": 60}),
    )
    assert synced["status"] == "done"
    sent = check("fleet_send", await call(LEAD_TOKEN, "fleet_send", {"target": sid, "prompt": "b"}))
    bridge = e2e.service.bridge
    await e2e.until(lambda: bridge.reads.ticket(sent["ticket"]).terminal)  # type: ignore[union-attr]
    polled = check("fleet_poll", await call(LEAD_TOKEN, "fleet_poll", {"ticket": sent["ticket"]}))
    assert polled["status"] == "done"
    drained = check("fleet_poll", await call(LEAD_TOKEN, "fleet_poll", {}))
    assert [m["ticket"] for m in drained["messages"]] == [sent["ticket"]]
    check("fleet_status", await call(LEAD_TOKEN, "fleet_status", {"sessionId": sid}))

    quiet = check(
        "fleet_spawn", await call(LEAD_TOKEN, "fleet_spawn", {"profile": profile, "name": mute})
    )
    await e2e.until(lambda: _state(e2e, quiet["sessionId"]) is SessionState.READY)
    task = check(
        "fleet_send", await call(LEAD_TOKEN, "fleet_send", {"target": mute, "prompt": "c"})
    )
    await e2e.until(lambda: _state(e2e, quiet["sessionId"]) is SessionState.BUSY)
    check("fleet_status", await call(LEAD_TOKEN, "fleet_status", {"sessionId": quiet["sessionId"]}))
    replied = check(
        "fleet_reply", await call(_member_token(e2e, mute), "fleet_reply", {"content": "ok"})
    )
    assert replied["ticket"] == task["ticket"]

    check("fleet_list", await call(LEAD_TOKEN, "fleet_list", {}))
    check("fleet_list", await call(OPERATOR_TOKEN, "fleet_list", {}))
    for session_id in (sid, quiet["sessionId"]):
        check("fleet_stop", await call(LEAD_TOKEN, "fleet_stop", {"sessionId": session_id}))
    check("fleet_status", await call(LEAD_TOKEN, "fleet_status", {"sessionId": sid}))
    check("fleet_list", await call(LEAD_TOKEN, "fleet_list", {}))


async def test_http_answers_obey_the_result_contracts(e2e: E2EFleet) -> None:
    """Every tool, over ``POST /v1/tools/<name>`` (and ``GET /v1/fleet``), answers in contract."""
    check = Checked(e2e)

    async def call(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        async with e2e.http(token) as client:
            response = await e2e.run(client.post(f"/v1/tools/{tool}", json=args))
        body: dict[str, Any] = response.json()
        return body

    await _lifecycle(e2e, call, check, "sonnet", "m-mute-http")
    async with e2e.http(OPERATOR_TOKEN) as operator:
        check("fleet_list", (await e2e.run(operator.get("/v1/fleet"))).json())
    assert check.tools == TOOLS


async def test_mcp_answers_obey_the_result_contracts(e2e: E2EFleet) -> None:
    """Every tool, over the MCP SDK client's ``tools/call``, answers in contract."""
    check = Checked(e2e)

    async def session_call(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(f"{e2e.base_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answer = await session.call_tool(tool, args)
        [block] = answer.content
        assert isinstance(block, TextContent)
        document: dict[str, Any] = json.loads(block.text)
        return document

    async def call(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return await e2e.run(session_call(token, tool, args))

    await _lifecycle(e2e, call, check, "codex", "m-mute-mcp")
    assert check.tools == TOOLS
