"""The two real traces of M4 §2.1, end to end through the simulator, the bridge and health."""

from __future__ import annotations

from pathlib import Path

from fleetd.bridge.sessions import SessionState
from fleetd.health.states import MemberState
from tests.e2e.e2e_fleet import E2EFleet, start_e2e

# The status poller looks only once a minute here, so it never sees the member's short turn:
# the bridge keeps the session BUSY while herdr says done — exactly the missed boundary of trace 1.
TRACE_ONE = {
    "herdr": {"statusPollIntervalMs": 60000},
    "health": {"enabled": True, "snapshotIntervalSeconds": 15},
}


def _member_state(e2e: E2EFleet, session_id: str) -> str | None:
    evidence = e2e.service.health.state.members.get(session_id)
    return None if evidence is None else str(evidence.state)


async def test_busy_while_herdr_says_done_is_a_lost_boundary_after_two_snapshots(
    tmp_path: Path,
) -> None:
    """Trace 1: BUSY + raw done for the same turn becomes TURN_BOUNDARY_LOST on tick two."""
    async with start_e2e(tmp_path, TRACE_ONE) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-mute-1"))["sessionId"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="architect it"))["ticket"]
        agent = e2e.simulator.agent("m-mute-1")
        await e2e.until(lambda: agent.status.value == "done")
        session = bridge.reads.session(sid)
        assert session is not None
        assert session.state is SessionState.BUSY
        health = e2e.service.health
        ticks = health.ticks
        await e2e.until(lambda: health.ticks == ticks + 1)
        assert _member_state(e2e, sid) != MemberState.TURN_BOUNDARY_LOST
        await e2e.until(lambda: health.ticks == ticks + 2)
        assert _member_state(e2e, sid) == MemberState.TURN_BOUNDARY_LOST
        listed = await e2e.tool(lead, "fleet_list")
        [incident] = [i for i in listed["incidents"] if i["subject"] == sid]
        assert incident["state"] == "TURN_BOUNDARY_LOST"
        assert incident["owner"] == "lead"
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert polled["status"] == "pending"
        inbox = await e2e.tool(lead, "fleet_poll")
        health_records = [m for m in inbox["messages"] if m["kind"] == "health"]
        assert [m["state"] for m in health_records] == ["TURN_BOUNDARY_LOST"]
        assert "ticket" not in health_records[0]


async def test_teardown_that_leaves_a_task_pending_is_delegation_orphaned(tmp_path: Path) -> None:
    """Trace 2: every ticket ends when the pane stops; a task surviving teardown is orphaned."""
    overrides = {"health": {"enabled": True, "snapshotIntervalSeconds": 15}}
    async with start_e2e(tmp_path, overrides) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-exit-1"))["sessionId"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
        first = (await e2e.tool(lead, "fleet_send", target=sid, prompt="one"))["ticket"]
        await e2e.advance(1)
        second = (await e2e.tool(lead, "fleet_send", target=sid, prompt="two"))["ticket"]
        await e2e.until(lambda: all(bridge.reads.ticket(t).terminal for t in (first, second)))  # type: ignore[union-attr]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.RELEASED)
        assert e2e.session(sid).released_cause == "gone"
        # A regression in teardown: a task of the released target is left pending (forced into
        # the ticket book, since no public operation accepts work for a released target).
        stray = bridge.tasks.accept(
            target=sid, owner="lead", prompt="x", now=e2e.clock.now(), nonce="stray"
        )
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.DELEGATION_ORPHANED)
        polled = await e2e.tool(lead, "fleet_poll", ticket=stray.ticket_id)
        assert (polled["status"], polled["reason"]) == ("failed", "delegation_orphaned")


async def test_healthy_fifty_member_simulated_fleet_lists_once_per_tick_and_reads_no_pane(
    tmp_path: Path,
) -> None:
    """Fifty idle members in the simulator over ten ticks: ten agent.list, zero pane reads."""
    overrides = {
        "health": {"enabled": True, "snapshotIntervalSeconds": 15},
        "worktrees": {"root": str(tmp_path / "wt"), "defaultRepo": None},
    }
    async with start_e2e(tmp_path, overrides) as e2e, e2e.http() as lead:
        for n in range(50):
            await e2e.tool(lead, "fleet_spawn", profile="codex", name=f"m-{n}")
        bridge = e2e.service.bridge
        await e2e.until(
            lambda: all(s.state is SessionState.READY for s in bridge.reads.live_members())
        )
        assert len(bridge.reads.live_members()) == 50
        herdr = e2e.service.control
        calls: list[str] = []
        for method in ("list_agents", "read", "get_agent", "ping"):
            original = getattr(herdr, method)

            def counted(*args: object, _m: str = method, _o: object = original, **kw: object):  # type: ignore[no-untyped-def]
                calls.append(_m)
                return _o(*args, **kw)  # type: ignore[operator]

            setattr(herdr, method, counted)
        health = e2e.service.health
        ticks = health.ticks
        await e2e.until(lambda: health.ticks == ticks + 10, max_seconds=200)
        assert calls.count("list_agents") == 10
        assert "read" not in calls
        assert health.pane_reads == 0
        assert health.state.incidents == {}
        assert {str(m.state) for m in health.state.members.values()} == {"IDLE"}


async def test_a_reply_left_in_the_lead_inbox_keeps_its_member_pending_then_stranded(
    tmp_path: Path,
) -> None:
    """Unit 3 criterion 17 over the simulator: no idleForSeconds while the member's reply waits."""
    overrides = {"health": {"enabled": True, "snapshotIntervalSeconds": 15}}
    async with start_e2e(tmp_path, overrides) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet"))["sessionId"]
        bridge = e2e.service.bridge
        await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="a task"))["ticket"]
        await e2e.until(lambda: bridge.reads.ticket(ticket).terminal)  # type: ignore[union-attr]
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.WORK_PENDING)
        [row] = (await e2e.tool(lead, "fleet_list"))["members"]
        assert "idleForSeconds" not in row
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.REPLY_STRANDED)
        assert e2e.service.push.outcomes["lead"].nudges_for_head == 3
        inbox = await e2e.tool(lead, "fleet_poll")
        assert [m["ticket"] for m in inbox["messages"] if m["kind"] == "reply"] == [ticket]
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.IDLE)
        [row] = (await e2e.tool(lead, "fleet_list"))["members"]
        assert "idleForSeconds" in row
