"""End to end over the simulator and real HTTP and MCP clients."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from fleetd.bridge.sessions import SessionState
from fleetd.screens.markers import COMPLETION_FALLBACK_MARKER
from tests.e2e.e2e_fleet import LEAD_TOKEN, OPERATOR_TOKEN, E2EFleet
from tests.metric_samples import sample


def _state(e2e: E2EFleet, session_id: str) -> SessionState | None:
    session = e2e.service.bridge.reads.session(session_id)
    return None if session is None else session.state


async def _ready_member(e2e: E2EFleet, client: Any, **spawn: Any) -> str:
    row = await e2e.tool(client, "fleet_spawn", profile=spawn.pop("profile", "sonnet"), **spawn)
    sid: str = row["sessionId"]
    assert row["state"] == "spawning"
    await e2e.until(lambda: _state(e2e, sid) is SessionState.READY)
    return sid


async def test_spawn_presence_send_reply_poll_over_http(e2e: E2EFleet) -> None:
    """A sync send returns the member's fleet_reply; an async one ends in the inbox."""
    async with e2e.http() as lead:
        sid = await _ready_member(e2e, lead)
        sync = await e2e.tool(lead, "fleet_send", target=sid, prompt="task one", wait=60)
        assert (sync["status"], sync["source"]) == ("done", "reply")
        assert sync["content"] == "Finished task one."
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="task two"))["ticket"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: (t := bridge.reads.ticket(ticket)) is not None and t.terminal)
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["content"]) == ("done", "Finished task two.")
        inbox = await e2e.tool(lead, "fleet_poll")
        assert [m["ticket"] for m in inbox["messages"]] == [ticket]
    async with e2e.http(OPERATOR_TOKEN) as operator:
        view = (await e2e.run(operator.get("/v1/fleet"))).json()["result"]
        assert [m["sessionId"] for m in view["members"]] == [sid]
        assert "preservedWorktrees" not in view
        assert any(a["name"] == "lead" for a in view["agents"])


async def test_mute_member_resolves_through_the_fallback(e2e: E2EFleet) -> None:
    """A member that never calls fleet_reply resolves from its pane, with the fallback marker."""
    async with e2e.http() as lead:
        sid = await _ready_member(e2e, lead, name="m-mute-1")
        result = await e2e.tool(lead, "fleet_send", target=sid, prompt="quiet task", wait=60)
        assert (result["status"], result["source"]) == ("done", "fallback")
        assert result["content"].startswith(COMPLETION_FALLBACK_MARKER)
        assert "Finished quiet task." in result["content"]


async def test_stop_with_pending_async_tasks_fails_each_once(e2e: E2EFleet) -> None:
    """Two async sends a second apart, then a stop: both tickets end failed, once each."""
    async with e2e.http() as lead:
        sid = await _ready_member(e2e, lead)
        first = (await e2e.tool(lead, "fleet_send", target=sid, prompt="first"))["ticket"]
        await e2e.advance(1.0)
        second = (await e2e.tool(lead, "fleet_send", target=sid, prompt="second"))["ticket"]
        stopped = await e2e.tool(lead, "fleet_stop", sessionId=sid)
        assert stopped["cause"] == "release_with_pending_tasks"
        for ticket in (first, second):
            polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
            assert polled["status"] == "failed"
        listed = await e2e.tool(lead, "fleet_list")
        assert [p["sessionId"] for p in listed["preservedWorktrees"]] == [sid]
    assert sample(e2e.service.metrics.tickets_total, outcome="failed", source="none") == 2


async def test_pane_that_exits_fails_every_ticket(e2e: E2EFleet) -> None:
    """Two async sends, then the member's pane exits: every ticket ends terminal (trace 2)."""
    async with e2e.http() as lead:
        sid = await _ready_member(e2e, lead, name="m-exit-1")
        first = (await e2e.tool(lead, "fleet_send", target=sid, prompt="first"))["ticket"]
        await e2e.advance(1.0)
        second = (await e2e.tool(lead, "fleet_send", target=sid, prompt="second"))["ticket"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: all(bridge.reads.ticket(t).terminal for t in (first, second)))  # type: ignore[union-attr]
        for ticket in (first, second):
            polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
            assert (polled["status"], polled["reason"]) == ("failed", "gone")


async def test_lead_delegates_over_mcp(e2e: E2EFleet) -> None:
    """A lead using the MCP SDK client spawns, sends and polls like one using HTTP."""

    async def session_calls() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {LEAD_TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(f"{e2e.base_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"fleet_spawn", "fleet_send", "fleet_poll", "fleet_list"} <= tools
            return _doc(await session.call_tool("fleet_spawn", {"profile": "codex"}))

    spawned = await e2e.run(session_calls())
    sid = spawned["result"]["sessionId"]
    await e2e.until(lambda: _state(e2e, sid) is SessionState.READY)

    async def send() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {LEAD_TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(f"{e2e.base_url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return _doc(
                await session.call_tool(
                    "fleet_send", {"target": sid, "prompt": "via mcp", "wait": 60}
                )
            )

    result = await e2e.run(send())
    assert result["ok"]
    outcome = result["result"]
    assert (outcome["status"], outcome["content"]) == ("done", "Finished via mcp.")


def _doc(result: Any) -> dict[str, Any]:
    [block] = result.content
    assert isinstance(block, TextContent)
    document: dict[str, Any] = json.loads(block.text)
    return document


async def test_a_spawn_herdr_never_answers_logs_its_cause(
    e2e: E2EFleet, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20 2e: a spawn that fails because herdr stops answering is ``unavailable`` to the
    lead and logged with its link cause (``timeout``), the call and herdr's code: an operator
    tells it from a refused or reset link; no raw exception text goes out."""
    caplog.set_level(logging.WARNING, logger="fleetd.bridge")
    e2e.simulator.unresponsive = True
    async with e2e.http() as lead:
        response = await e2e.run(lead.post("/v1/tools/fleet_spawn", json={"profile": "sonnet"}))
    body = response.json()
    assert (response.status_code, body["error"]["code"]) == (503, "unavailable")
    assert body["error"]["message"] == "herdr cannot be reached (timeout); no member was started"
    [logged] = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
    failed = "the link to herdr failed at workspace.create: timeout (request_timeout)"
    assert logged.endswith(failed)
    assert not e2e.service.bridge.reads.live_members()
