"""The health tick reads herdr's ``agent.list`` over a real socket, decoded by the client as in
``fleetd serve``: a well-formed answer feeds the members' health, and an answer the client cannot
read makes a blind tick (the list failed), never an exception out of the loop."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fleetd.clock import SystemClock
from fleetd.herdr.control import HerdrAgentControl
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.testing import TestFleet, build_test_fleet, sample_document


class SocketListed(FakeAgentControl):
    """The in-memory herdr, except that ``agent.list`` goes over the socket to ``herdr``."""

    herdr: HerdrAgentControl | None = None

    def agents(self) -> list[AgentInfo]:
        return [pane.agent for pane in self._panes.values() if pane.agent is not None]

    async def list_agents(self) -> tuple[AgentInfo, ...]:
        assert self.herdr is not None
        return await self._call("list_agents", self.herdr.list_agents())


def _wire(agent: AgentInfo) -> dict[str, object]:
    return {
        "terminal_id": agent.terminal_id,
        "agent_status": agent.agent_status.value,
        "workspace_id": agent.workspace_id,
        "tab_id": agent.tab_id,
        "pane_id": agent.pane_id,
        "focused": agent.focused,
        "revision": agent.revision,
        "state_change_seq": agent.state_change_seq,
        "name": agent.name,
        "agent": agent.agent,
        "launch_pending": agent.launch_pending,
        "interactive_ready": agent.interactive_ready,
        "future_field": {"herdr": "may add fields"},
    }


class Herdr:
    """Answers ``agent.list`` with the fake's agents, or with :attr:`broken` when set."""

    def __init__(self, control: SocketListed) -> None:
        self.control = control
        self.broken: bytes | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = json.loads(await reader.readline())
        agents = [_wire(agent) for agent in self.control.agents()]
        frame = {"id": request["id"], "result": {"type": "agent_list", "agents": agents}}
        line = json.dumps(frame).encode() + b"\n"
        if self.broken is not None:
            line = self.broken.replace(b"@ID@", json.dumps(request["id"]).encode())
        writer.write(line)
        await writer.drain()
        writer.close()


@asynccontextmanager
async def _fleet(tmp_path: Path) -> AsyncIterator[tuple[TestFleet, Herdr]]:
    document = sample_document(tmp_path)
    document["profiles"]["codex"] = {"kind": "codex"}
    document["health"] = {"enabled": True}
    control = SocketListed()
    fleet = build_test_fleet(tmp_path, document=document, control=control)
    await fleet.service.own_lead_keys()
    herdr = Herdr(control)
    short = Path(tempfile.mkdtemp(prefix="flist"))  # AF_UNIX paths are short
    server = await asyncio.start_unix_server(herdr.serve, path=str(short / "herdr.sock"))
    control.herdr = HerdrAgentControl.for_socket(
        short / "herdr.sock", clock=SystemClock(), request_timeout=5.0
    )
    try:
        yield fleet, herdr
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(short, ignore_errors=True)


async def _tick(fleet: TestFleet) -> None:
    fleet.clock.advance(30)
    await fleet.service.health.tick()


async def test_members_health_follows_the_list_read_over_the_socket(tmp_path: Path) -> None:
    """Members classified from the decoded list; one that starts working is seen working."""
    async with _fleet(tmp_path) as (fleet, _herdr):
        first, second = await fleet.spawn_ready("codex"), await fleet.spawn_ready("codex")
        for _ in range(2):
            await _tick(fleet)
        health = fleet.service.health
        assert {str(e.state) for e in health.state.members.values()} == {"IDLE"}
        fleet.set_status(second, AgentStatus.WORKING)
        await _tick(fleet)
        assert str(health.state.members[second].state) == "WORKING"
        assert str(health.state.members[first].state) == "IDLE"
        assert health.state.link.list_failures == 0


async def test_an_unreadable_answer_makes_a_blind_tick_not_a_crash(tmp_path: Path) -> None:
    """A field of the wrong type, or a line that is not JSON: the tick counts a failed list and
    keeps every member's evidence; the next readable answer sees the fleet again."""
    async with _fleet(tmp_path) as (fleet, herdr):
        sid = await fleet.spawn_ready("codex")
        await _tick(fleet)
        health = fleet.service.health
        kept = health.state.members[sid]
        wrong = {
            "id": "@ID@",
            "result": {"type": "agent_list", "agents": [{"terminal_id": 7, "pane_id": "p"}]},
        }
        for broken in (json.dumps(wrong).encode() + b"\n", b"{not json\n"):
            herdr.broken = broken.replace(b'"@ID@"', b"@ID@")
            await _tick(fleet)
            assert health.state.link.list_failures >= 1
            assert health.state.members[sid] is kept
        herdr.broken = None
        await _tick(fleet)
        assert health.state.link.list_failures == 0
        assert str(health.state.members[sid].state) == "IDLE"
