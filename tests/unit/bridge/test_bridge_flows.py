"""The bridge on fakes: spawn, presence, delivery, boundaries, replies, tickets, stop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleetd.bridge.sessions import SessionState
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.screens.markers import COMPLETION_FALLBACK_MARKER
from fleetd.testing import TestFleet, build_test_fleet
from tests.metric_samples import sample

CLAUDE_DONE = "\n".join(
    [
        "❯ do the thing",
        "",
        "● The thing is done: two files changed.",
        "",
        "────────────────────────────────",
        "❯ ",
        "────────────────────────────────",
        "  ? for shortcuts",
    ]
)


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


async def _busy(fleet: TestFleet, prompt: str = "do the thing") -> tuple[str, str]:
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt=prompt))["ticket"]
    return sid, ticket


async def test_spawn_starts_spawning_and_contact_makes_ready(fleet: TestFleet) -> None:
    """A spawned member is SPAWNING until its first authenticated contact."""
    row = await fleet.ok("fleet_spawn", profile="sonnet", role="implementer")
    assert row["state"] == "spawning"
    session = fleet.bridge.reads.session(row["sessionId"])
    assert session is not None
    assert session.worktree is not None
    env = fleet.control.env_of(session.pane_id or "")
    assert env["FLEETD_SESSION"] == row["sessionId"]
    assert env["FLEETD_URL"] == "http://127.0.0.1:1"
    assert env["FLEETD_TOKEN"]
    start = fleet.control.calls_to("start_agent")[0]
    assert "--mcp-config" in start.args["args"]
    await fleet.service.registry.contact(fleet.member(row["sessionId"]))
    assert session.state is SessionState.SPAWNING  # the value read before the contact
    assert fleet.session(row["sessionId"]).state is SessionState.READY


async def test_send_delivers_and_reply_resolves_the_ticket(fleet: TestFleet) -> None:
    """An async send is delivered at once to a ready member; its fleet_reply ends the ticket."""
    sid, ticket = await _busy(fleet)
    assert fleet.control.calls_to("prompt")[-1].args["text"] == "do the thing"
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.state is SessionState.BUSY
    assert session.turn == 1
    reply = await fleet.ok("fleet_reply", fleet.member(sid), content="all done")
    assert reply == {"accepted": True, "ticket": ticket, "late": False}
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert polled["status"] == "done"
    assert polled["source"] == "reply"
    assert polled["content"] == "all done"
    assert fleet.session(sid).state is SessionState.DONE
    inbox = await fleet.ok("fleet_poll")
    assert [m["ticket"] for m in inbox["messages"]] == [ticket]
    assert inbox["messages"][0]["source"] == "reply"


async def test_sync_send_returns_the_reply_and_keeps_it_out_of_the_inbox(
    fleet: TestFleet,
) -> None:
    """With wait > 0 the call returns the reply that arrives in time."""
    sid = await fleet.spawn_ready()
    call = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="quick", wait=30))
    for _ in range(5):
        await asyncio.sleep(0)
    await fleet.ok("fleet_reply", fleet.member(sid), content="quick answer")
    result = await call
    assert result["status"] == "done"
    assert result["content"] == "quick answer"
    assert (await fleet.ok("fleet_poll"))["messages"] == []


async def test_sync_send_times_out_to_a_pending_ticket_and_the_reply_lands_in_the_inbox(
    fleet: TestFleet,
) -> None:
    """A wait that expires returns the pending ticket; the later reply goes to the inbox."""
    sid = await fleet.spawn_ready()
    call = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="slow", wait=5))
    for _ in range(5):
        await asyncio.sleep(0)
    await fleet.clock.run(6)
    result = await call
    assert result["status"] == "pending"
    await fleet.ok("fleet_reply", fleet.member(sid), content="slow answer")
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [m["content"] for m in messages] == ["slow answer"]


async def test_mute_member_resolves_through_the_fallback_with_its_marker(
    fleet: TestFleet,
) -> None:
    """working then done without fleet_reply resolves from the pane, marked, after the grace."""
    sid, ticket = await _busy(fleet)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.control.set_screen(session.pane_id or "", CLAUDE_DONE)
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    await fleet.poll(1.0)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert polled["status"] == "done"
    assert polled["source"] == "fallback"
    assert polled["content"].startswith(COMPLETION_FALLBACK_MARKER)
    assert "The thing is done: two files changed." in polled["content"]
    assert sample(fleet.service.metrics.mute_total, profile="sonnet") == 1


async def test_reply_within_the_grace_beats_the_fallback(fleet: TestFleet) -> None:
    """A reply that arrives just after the boundary wins; the fallback never runs."""
    sid, ticket = await _busy(fleet)
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.ok("fleet_reply", fleet.member(sid), content="structured")
    await fleet.poll(2.0)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert polled["source"] == "reply"
    assert polled["content"] == "structured"


async def test_boundary_without_working_is_not_trusted(fleet: TestFleet) -> None:
    """idle/done never seen working is no boundary: the ticket stays pending, Enter re-sent once."""
    sid, ticket = await _busy(fleet)
    fleet.set_status(sid, AgentStatus.DONE)
    for _ in range(12):
        await fleet.poll(0.5)
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    enters = [c for c in fleet.control.calls_to("send_keys") if c.args["keys"] == ("enter",)]
    assert len(enters) == 1
    assert len(fleet.control.calls_to("prompt")) == 1


async def test_second_send_queues_until_the_first_resolves(fleet: TestFleet) -> None:
    """Two async sends a second apart: the second waits for the member's prompt, typed once."""
    sid, first = await _busy(fleet, "first")
    fleet.clock.advance(1)
    second = (await fleet.ok("fleet_send", target=sid, prompt="second"))["ticket"]
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["first"]
    await fleet.ok("fleet_reply", fleet.member(sid), content="one")
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["first"]
    fleet.set_status(sid, AgentStatus.WORKING)  # still finishing the turn that replied
    await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["first"]
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["first", "second"]
    await fleet.ok("fleet_reply", fleet.member(sid), content="two")
    assert (await fleet.ok("fleet_poll", ticket=first))["content"] == "one"
    assert (await fleet.ok("fleet_poll", ticket=second))["content"] == "two"


async def test_send_to_a_starting_member_waits_for_presence(fleet: TestFleet) -> None:
    """A send to a SPAWNING member is queued, and delivered once the member makes contact."""
    row = await fleet.ok("fleet_spawn", profile="sonnet")
    sid = row["sessionId"]
    await fleet.ok("fleet_send", target=sid, prompt="later")
    await fleet.poll()
    assert fleet.control.calls_to("prompt") == []
    await fleet.service.registry.contact(fleet.member(sid))
    await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["later"]


async def test_blocked_target_keeps_the_send_queued(fleet: TestFleet) -> None:
    """herdr refusing a blocked agent leaves the send at the head of the queue."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    assert (await fleet.ok("fleet_status", sessionId=sid))["queued"] == 1
    fleet.control.fail("prompt", None)
    await fleet.poll()
    assert (await fleet.ok("fleet_status", sessionId=sid))["queued"] == 0
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"


async def test_stop_with_pending_async_tasks_fails_each_exactly_once(fleet: TestFleet) -> None:
    """A stop fails the open turn and every queued send once; the worktree is preserved."""
    sid, first = await _busy(fleet, "first")
    second = (await fleet.ok("fleet_send", target=sid, prompt="second"))["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped["cause"] == "release_with_pending_tasks"
    assert stopped["worktree"] == "preserve"
    for ticket in (first, second):
        polled = await fleet.ok("fleet_poll", ticket=ticket)
        assert polled["status"] == "failed"
        assert polled["reason"] == "release_with_pending_tasks"
    assert sample(fleet.service.metrics.tickets_total, outcome="failed", source="none") == 2
    assert fleet.bridge.lifecycle.fail_target_work(session, reason="again") == []
    assert sample(fleet.service.metrics.tickets_total, outcome="failed", source="none") == 2
    assert session.worktree.path not in fleet.worktrees.removed
    listed = await fleet.ok("fleet_list")
    assert [p["sessionId"] for p in listed["preservedWorktrees"]] == [sid]
    assert listed["preservedWorktrees"][0]["pendingTaskIds"] == sorted([first, second])


async def test_stop_of_an_idle_clean_member_removes_its_worktree(fleet: TestFleet) -> None:
    """A COMPLETED release of a clean worktree removes it; nothing is preserved."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped == {"sessionId": sid, "cause": "completed", "worktree": "remove"}
    assert session.worktree.path in fleet.worktrees.removed
    assert (await fleet.ok("fleet_list"))["preservedWorktrees"] == []


async def test_stop_of_a_dirty_idle_member_preserves_it(fleet: TestFleet) -> None:
    """A dirty worktree survives even a COMPLETED release."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    fleet.worktrees.mark_dirty(session.worktree.path)
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped["worktree"] == "preserve"


async def test_gone_target_fails_its_work_once_and_preserves(fleet: TestFleet) -> None:
    """*_not_found with a working link releases the member as GONE."""
    sid, ticket = await _busy(fleet)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    fleet.control.remove(session.name)
    await fleet.poll()
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "gone")
    session = fleet.session(sid)
    assert session.state is SessionState.RELEASED
    assert session.released_cause == "gone"


async def test_link_down_is_not_a_dead_member(fleet: TestFleet) -> None:
    """A broken control link fails no work and releases nobody."""
    sid, ticket = await _busy(fleet)
    fleet.control.link_down()
    for _ in range(10):
        await fleet.poll(1)
    assert fleet.service.link.status.value == "down"
    assert fleet.service.link.consecutive_failures == 10
    fleet.control.link_up()
    await fleet.poll()
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    assert fleet.service.link.status.value == "up"
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.state is SessionState.BUSY


async def test_never_ready_fails_the_waiting_send_and_preserves(fleet: TestFleet) -> None:
    """No presence within the readiness grace with a send waiting: NEVER_READY release."""
    row = await fleet.ok("fleet_spawn", profile="sonnet")
    sid = row["sessionId"]
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    await fleet.poll(59)
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    await fleet.poll(2)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "never_ready")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    assert session.worktree.path not in fleet.worktrees.removed


async def test_failed_start_rolls_back_and_removes_the_worktree(fleet: TestFleet) -> None:
    """A start herdr refuses rolls the spawn back: pane closed, worktree removed."""
    fleet.control.fail("start_agent", HerdrError("agent_pane_busy", "busy"))
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert not result.ok
    assert len(fleet.worktrees.removed) == 1
    assert fleet.bridge.reads.live_members() == []


async def test_placement_refuses_past_max_load(fleet: TestFleet) -> None:
    """The third sonnet member is refused with the capacity figures."""
    await fleet.spawn_ready()
    await fleet.spawn_ready()
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert result.error is not None
    assert result.error.code == "capacity_exceeded"
    capacity = {row["profile"]: row for row in (await fleet.ok("fleet_list"))["capacity"]}
    assert capacity["sonnet"]["live"] == 2
    assert capacity["sonnet"]["free"] == 0
    assert capacity["codex"]["free"] is None


async def test_restart_loses_waiters_and_replays_nothing(tmp_path: Path) -> None:
    """A second run on the herdr the first left knows no old ticket, says why, sends nothing."""
    first = build_test_fleet(tmp_path)
    await first.service.start()
    sid, ticket = await _busy(first)
    waiter = asyncio.ensure_future(first.ok("fleet_send", target=sid, prompt="queued", wait=60))
    for _ in range(5):
        await asyncio.sleep(0)
    await first.service.scheduler.stop()  # the process dies: nothing is released or failed
    waiter.cancel()
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        first.set_status(sid, AgentStatus.IDLE)  # the old turn ends; the queued send is ready
        await second.clock.run(30)
        for _ in range(4):
            await second.poll()
        name = first.bridge.reads.session(sid).name  # type: ignore[union-attr]
        prompts = [c.args for c in first.control.calls_to("prompt")]
        assert [p["text"] for p in prompts if p["target"] == name] == ["do the thing"], prompts
        result = await second.call("fleet_poll", ticket=ticket)
        assert result.error is not None
        assert (result.error.code, result.error.http_status) == ("unknown_ticket", 404)
        assert "fleetd restarted" in result.error.message
        assert "nothing was replayed" in result.error.message
        assert result.error.hint["restarted"] is True
        assert result.error.hint["replayed"] is False
        [row] = (await second.ok("fleet_list"))["members"]
        assert (row["sessionId"], row["state"]) == (sid, "orphaned")
    finally:
        await second.service.stop()


async def test_fleet_status_shows_herdr_s_status_now_not_the_last_one_watched(
    tmp_path: Path,
) -> None:
    """After a turn ends the poller stops watching; fleet_status still says what herdr says now."""
    fleet = build_test_fleet(tmp_path)
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    fleet.set_status(sid, AgentStatus.DONE)
    assert (await fleet.ok("fleet_status", sessionId=sid))["liveStatus"] == "done"
    fleet.control.link_down()
    assert (await fleet.ok("fleet_status", sessionId=sid))["liveStatus"] is None
