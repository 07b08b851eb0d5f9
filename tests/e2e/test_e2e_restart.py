"""A restart of fleetd loses nothing, end to end: the state store gives back the members, their
tokens, their open turns, their queued sends and the tickets, and herdr's list decides who is
still there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetd.bridge.sessions import SessionState
from fleetd.sim.agent import SimAgent
from tests.e2e.e2e_fleet import LEAD_TOKEN, E2EFleet, start_e2e

#: Turns long enough that none ends while the harness takes the crashed fleetd down.
LONG = {"*long*": {"turn_seconds": 20.0}, "*hush*": {"faults": ["mute"], "turn_seconds": 20.0}}


async def _ready_member(e2e: E2EFleet, client: Any, name: str) -> str:
    row = await e2e.tool(client, "fleet_spawn", profile="sonnet", name=name)
    sid: str = row["sessionId"]

    def ready() -> bool:
        session = e2e.service.bridge.reads.session(sid)
        return session is not None and session.state is SessionState.READY

    await e2e.until(ready)
    return sid


def _agent(e2e: E2EFleet, name: str) -> SimAgent:
    agent = next((a for a in e2e.simulator.world.agents() if a.name == name), None)
    assert agent is not None
    return agent


async def _call(e2e: E2EFleet, token: str, tool: str, **args: Any) -> tuple[int, dict[str, Any]]:
    async with e2e.http(token) as client:
        response = await e2e.run(client.post(f"/v1/tools/{tool}", json=args))
    body: dict[str, Any] = response.json()
    return response.status_code, body


async def _ended(e2e: E2EFleet, ticket: str) -> dict[str, Any]:
    async with e2e.http() as lead:

        async def poll() -> dict[str, Any]:
            return await e2e.tool(lead, "fleet_poll", ticket=ticket)

        result = await poll()
        while result["status"] == "pending":
            await e2e.advance(0.5)
            result = await poll()
        return result


async def test_after_a_crash_a_member_is_adopted_and_its_reply_lands_on_its_ticket(
    tmp_path: Path,
) -> None:
    """fleetd dies mid turn: the next start adopts the member (not orphaned, same row in
    fleet_list), its token still works, its reply resolves the ticket of before the crash, the
    send queued behind it is typed once, and nothing is typed twice."""
    async with start_e2e(tmp_path, agents=LONG) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, "long-1")
            busy = (await first.tool(lead, "fleet_send", target=sid, prompt="first task"))["ticket"]
            await first.until(lambda: _agent(first, "long-1").turns == 1)
            queued = (await first.tool(lead, "fleet_send", target=sid, prompt="second task"))[
                "ticket"
            ]
            before = [
                (m["sessionId"], m["name"])
                for m in (await first.tool(lead, "fleet_list"))["members"]
            ]
        await first.crash()

        async with start_e2e(tmp_path, restart_of=first) as second, second.http() as lead:
            listed = await second.tool(lead, "fleet_list")
            assert [(m["sessionId"], m["name"]) for m in listed["members"]] == before
            assert listed["members"][0]["state"] != "orphaned"
            first_result = await _ended(second, busy)
            assert (first_result["status"], first_result["source"]) == ("done", "reply")
            second_result = await _ended(second, queued)
            assert (second_result["status"], second_result["source"]) == ("done", "reply")
            assert [text for text, _ in second.prompts_to("long-1")] == [
                "first task",
                "second task",
            ]
            assert _agent(second, "long-1").turns == 2


async def test_a_clean_stop_keeps_the_fleet_and_the_next_start_adopts_it(tmp_path: Path) -> None:
    """SIGTERM's path releases nobody: the member keeps running, the next start lists the same
    members, the member's token works there, and a new send to it ends done."""
    async with start_e2e(tmp_path) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, "keeper-1")
        token = _agent(first, "keeper-1").env["FLEETD_TOKEN"]
        await first.stop()
        assert _agent(first, "keeper-1").alive

        async with start_e2e(tmp_path, restart_of=first) as second, second.http() as lead:
            [row] = (await second.tool(lead, "fleet_list"))["members"]
            assert (row["sessionId"], row["state"]) == (sid, "ready")
            status, body = await _call(second, token, "fleet_status")
            assert status != 401, body
            ticket = (await second.tool(lead, "fleet_send", target=sid, prompt="after"))["ticket"]
            result = await _ended(second, ticket)
            assert (result["status"], result["source"]) == ("done", "reply")


async def test_a_member_whose_pane_went_while_fleetd_was_down_is_released_as_gone(
    tmp_path: Path,
) -> None:
    """A stored member herdr no longer lists is released as GONE at start and its pending ticket
    fails once; a stored ticket that ended before the restart still answers fleet_poll."""
    async with start_e2e(tmp_path, agents=LONG) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, "long-leaver")
            done = (await first.tool(lead, "fleet_send", target=sid, prompt="quick"))["ticket"]
        finished = await _ended(first, done)
        async with first.http() as lead:
            pending = (await first.tool(lead, "fleet_send", target=sid, prompt="long"))["ticket"]
        await first.crash()
        agent = _agent(first, "long-leaver")
        first.simulator.world.close_pane(agent.pane_id)

        async with start_e2e(tmp_path, restart_of=first) as second, second.http() as lead:
            assert (await second.tool(lead, "fleet_poll", ticket=done)) == finished
            failed = await _ended(second, pending)
            assert failed["status"] == "failed"
            session = second.service.bridge.reads.session(sid)
            assert session is not None
            assert (session.state, session.released_cause) == (SessionState.RELEASED, "gone")
            members = (await second.tool(lead, "fleet_list"))["members"]
            assert [m["state"] for m in members] in ([], ["released"]), members
            counted = second.service.metrics.registry.get_sample_value(
                "fleetd_tickets_total", {"outcome": "failed", "source": "none"}
            )
            assert counted == 1


async def test_a_turn_spanning_a_restart_without_a_reply_is_never_reconstructed(
    tmp_path: Path,
) -> None:
    """A mute member's turn spans a restart: its boundary passes, nothing reads the pane for it,
    the ticket stays pending and lost-boundary repair refuses it saying fleetd restarted."""
    async with start_e2e(tmp_path, agents=LONG) as first:
        async with first.http() as lead:
            sid = await _ready_member(first, lead, "hush-1")
            ticket = (await first.tool(lead, "fleet_send", target=sid, prompt="hush"))["ticket"]
            await first.until(lambda: _agent(first, "hush-1").turns == 1)
        await first.crash()

        async with start_e2e(tmp_path, restart_of=first) as second, second.http() as lead:
            await second.advance(30.0)  # the turn ends in herdr; no reply comes
            assert (await second.tool(lead, "fleet_poll", ticket=ticket))["status"] == "pending"
            reads = list(second.requests_to("pane.read"))
            bridge = second.service.bridge
            turn = bridge.reads.open_turn(sid)
            assert turn is not None
            outcome = await second.run(
                bridge.repair.reconcile_lost_boundary(sid, turn.token.token_id)
            )
            assert (outcome.result.value, outcome.detail) == (
                "refused_no_capture",
                "fleetd_restarted_during_turn",
            )
            assert second.requests_to("pane.read") == reads
            assert (await second.tool(lead, "fleet_poll", ticket=ticket))["status"] == "pending"
            status, _ = await _call(second, LEAD_TOKEN, "fleet_status", sessionId=sid)
            assert status == 200
