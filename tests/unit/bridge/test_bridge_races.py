"""Races around delivery and teardown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleetd.bridge.manifests import MANIFEST_DIR
from fleetd.errors import ControlLinkError, TargetNotFoundError
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.state.memory import MemoryStateStore
from fleetd.testing import TestFleet, build_test_fleet, hold_calls
from tests.metric_samples import sample


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


async def test_stop_during_delivery_fails_the_send_once_and_opens_no_turn(fleet: TestFleet) -> None:
    """A stop while the prompt is being typed: the ticket fails once, no turn is opened."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "prompt")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="x"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    gate.release()
    ticket = (await send)["ticket"]
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", stopped["cause"])
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.turn == 0
    assert fleet.bridge.reads.open_turn(sid) is None
    assert sample(fleet.service.metrics.tickets_total, outcome="failed", source="none") == 1


async def test_send_after_release_is_refused(fleet: TestFleet) -> None:
    """New sends to a released member fail at once with an unknown target."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_stop", sessionId=sid)
    result = await fleet.call("fleet_send", target=sid, prompt="x")
    assert result.error is not None
    assert result.error.code == "unknown_target"


async def test_preserved_worktrees_survive_a_restart(tmp_path: Path) -> None:
    """A manifest written by one process is listed, lead-only, by the next."""
    first = build_test_fleet(tmp_path)
    await first.service.own_lead_keys()
    sid = await first.spawn_ready()
    await first.ok("fleet_send", target=sid, prompt="x")
    await first.ok("fleet_stop", sessionId=sid)
    second = build_test_fleet(tmp_path)
    listed = await second.ok("fleet_list")
    [preserved] = listed["preservedWorktrees"]
    assert (preserved["sessionId"], preserved["cause"]) == (sid, "release_with_pending_tasks")
    other_lead = second.lead.__class__(role=second.lead.role, name="lead-b")
    assert (await second.ok("fleet_list", other_lead))["preservedWorktrees"] == []
    operator = second.service.authenticator.authenticate("Bearer operator-token-for-tests-0001")
    assert "preservedWorktrees" not in await second.ok("fleet_list", operator)


async def test_manifest_failure_preserves_and_is_visible(fleet: TestFleet) -> None:
    """A manifest that cannot be written leaves the worktree and says so in fleet_list."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    (fleet.bridge.manifest_root / MANIFEST_DIR).write_text("a file where the folder goes")
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped["worktree"] == "preserve"
    listed = await fleet.ok("fleet_list")
    assert listed["teardownFailures"] == [f"manifest:{sid}"]


async def test_concurrent_injections_type_a_prompt_only_once(fleet: TestFleet) -> None:
    """A poller pass during a send's own injection never types the same prompt again."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "prompt")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="only once"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    await fleet.poll()
    await fleet.poll()
    gate.release()
    await send
    await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["only once"]


async def test_launch_that_herdr_gives_up_on_rolls_back(tmp_path: Path) -> None:
    """herdr ending a launch without readiness: the spawn rolls back and its worktree goes."""
    fleet = build_test_fleet(tmp_path)
    fleet.control.ready_on_start = False
    row = await fleet.ok("fleet_spawn", profile="sonnet")
    session = fleet.bridge.reads.session(row["sessionId"])
    assert session is not None
    await fleet.poll()
    assert session.state.value == "spawning"
    fleet.control.fail_launch(session.name)
    await fleet.poll()
    session = fleet.session(row["sessionId"])
    assert session.released_cause == "spawn_rollback"
    assert session.worktree is not None
    assert session.worktree.path in fleet.worktrees.removed


async def test_launch_failure_with_a_waiting_send_is_never_ready(tmp_path: Path) -> None:
    """With a send already waiting, a failed launch fails it and preserves the worktree."""
    fleet = build_test_fleet(tmp_path)
    fleet.control.ready_on_start = False
    row = await fleet.ok("fleet_spawn", profile="sonnet")
    ticket = (await fleet.ok("fleet_send", target=row["sessionId"], prompt="x"))["ticket"]
    session = fleet.bridge.reads.session(row["sessionId"])
    assert session is not None
    fleet.control.fail_launch(session.name)
    await fleet.poll()
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "never_ready")
    assert session.worktree is not None
    assert session.worktree.path not in fleet.worktrees.removed


async def test_a_stop_while_herdr_is_asked_for_the_status_types_nothing(
    fleet: TestFleet,
) -> None:
    """A send typed at once asks herdr whether the member is at its prompt; a stop during that
    question releases the member: nothing is typed into it, and the ticket fails once."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "get_agent")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="never typed"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    gate.release()
    ticket = (await send)["ticket"]
    await fleet.poll()
    assert fleet.control.calls_to("prompt") == []
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", stopped["cause"])
    assert sample(fleet.service.metrics.tickets_total, outcome="failed", source="none") == 1


async def test_a_stop_while_the_worktree_is_provisioned_removes_it(fleet: TestFleet) -> None:
    """A member stopped while its worktree is being made: the release found no worktree yet, so
    the spawn removes the one it made, branch and all; nothing is left on disk for nobody."""
    gate = hold_calls(fleet.worktrees, "provision")
    spawn = asyncio.ensure_future(fleet.call("fleet_spawn", profile="sonnet"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    [session] = fleet.bridge.reads.sessions()
    await fleet.ok("fleet_stop", sessionId=session.session_id)
    gate.release()
    refused = await spawn
    assert refused.error is not None
    assert refused.error.code == "conflict"
    assert fleet.worktrees.live == {}
    assert fleet.worktrees.deleted_branches == [f"fleetd/{session.name}-{session.session_id}"]
    assert fleet.control.calls_to("create_pane") == []


async def test_work_failed_while_herdr_is_asked_for_the_status_is_not_typed(
    fleet: TestFleet,
) -> None:
    """A send typed at once asks herdr whether the member is at its prompt; health fails the
    member's work during that question (its pane still there, at its prompt): the failed task
    is not typed, and its poll answers failed with health's reason."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "get_agent")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="never typed"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    [failed] = fleet.bridge.lifecycle.fail_target_work(session, reason="member_gone")
    gate.release()
    ticket = (await send)["ticket"]
    await fleet.poll()
    assert fleet.control.calls_to("prompt") == []
    assert failed.ticket_id == ticket
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "member_gone")


async def test_a_send_while_a_lost_target_is_checked_does_not_type_the_head_again(
    tmp_path: Path,
) -> None:
    """herdr answers the prompt with ``agent_not_found``; while fleetd pings herdr to tell a lost
    pane from a link in doubt, the lead sends again. The first task is not typed a second time,
    and once the ping says the link is in doubt the task is still queued, stored as such, with no
    turn record of a turn that never opened."""
    store = MemoryStateStore()
    fleet = build_test_fleet(tmp_path, state=store)
    await fleet.service.own_lead_keys()
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", TargetNotFoundError("agent_not_found", "gone for a moment"))
    ping = hold_calls(fleet.control, "ping")
    first = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="one"))
    await asyncio.wait_for(ping.entered.wait(), 5)
    fleet.control.fail("prompt", None)
    await fleet.ok("fleet_send", target=sid, prompt="two")
    fleet.control.fail("ping", ControlLinkError("connect_timeout", "link in doubt"))
    ping.release()
    one = (await first)["ticket"]
    assert [call.args["text"] for call in fleet.control.calls_to("prompt")] == ["one"]
    stored = {ticket.ticket_id: ticket for ticket in store.load().tickets}
    open_turn = fleet.bridge.reads.open_turn(sid)
    assert open_turn is None or open_turn.token.ticket_id != one
    assert [turn.ticket_id for turn in store.load().turns] == (
        [] if open_turn is None else [open_turn.token.ticket_id]
    )
    polled = await fleet.ok("fleet_poll", ticket=one)
    assert polled["status"] == "pending"
    assert stored[one].delivered_at is None


async def test_a_slow_late_reply_leaves_the_window_of_a_newer_turn_read_from_the_pane(
    fleet: TestFleet,
) -> None:
    """A late reply to the first task (read from the pane) is still being stored while a second
    task is typed and also read from the pane. When the first late reply is in, the third task
    still waits out the second's late-reply window: the second's late reply lands on the second
    ticket, never on the third."""

    async def read_from_the_pane() -> None:
        fleet.set_status(sid, AgentStatus.WORKING)
        await fleet.poll()
        fleet.set_status(sid, AgentStatus.DONE)
        await fleet.poll()
        await fleet.poll(1.0)

    sid = await fleet.spawn_ready()
    one = (await fleet.ok("fleet_send", target=sid, prompt="one"))["ticket"]
    await read_from_the_pane()
    assert (await fleet.ok("fleet_poll", ticket=one))["source"] in ("fallback", "raw_fallback")
    gate = hold_calls(fleet.bridge.outbox, "store")
    late = asyncio.ensure_future(fleet.call("fleet_reply", fleet.member(sid), content="late 1"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    two = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]
    await fleet.poll(2.5)  # past the first task's window: the second is typed
    await read_from_the_pane()
    assert (await fleet.ok("fleet_poll", ticket=two))["source"] in ("fallback", "raw_fallback")
    three = (await fleet.ok("fleet_send", target=sid, prompt="three"))["ticket"]
    gate.release()
    await late
    await fleet.poll(0.25)  # inside the second task's window
    reply = await fleet.ok("fleet_reply", fleet.member(sid), content="late 2")
    assert [call.args["text"] for call in fleet.control.calls_to("prompt")] == ["one", "two"]
    assert (reply["ticket"], reply["late"]) == (two, True)
    assert (await fleet.ok("fleet_poll", ticket=three))["status"] == "pending"


async def test_a_status_read_before_a_turn_opened_is_not_fed_to_that_turn(
    fleet: TestFleet,
) -> None:
    """The poller asks herdr for a member finishing its first task (``working``); before the
    answer is handled the member replies, goes idle, and a second task is typed at once. The old
    ``working`` is not fed to the second task's turn: when that prompt's Enter was lost (the
    member stays idle), Enter is pressed once more and the task is not read from the pane as if
    the member had run it."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="one")
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    asked = fleet.control.get_agent
    gate, entered = asyncio.Event(), asyncio.Event()

    async def answer_later(target: str) -> AgentInfo:
        info = await asked(target)  # read now, handed back once the gate opens
        if not entered.is_set():
            entered.set()
            await gate.wait()
        return info

    fleet.control.get_agent = answer_later  # type: ignore[method-assign]
    polling = asyncio.ensure_future(fleet.poll())
    await asyncio.wait_for(entered.wait(), 5)
    await fleet.ok("fleet_reply", fleet.member(sid), content="answer one")
    fleet.set_status(sid, AgentStatus.IDLE)
    two = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]
    gate.set()
    await polling
    for _ in range(8):
        await fleet.poll(0.5)
    enters = [
        call for call in fleet.control.calls_to("send_keys") if call.args["keys"] == ("enter",)
    ]
    assert len(enters) == 1
    assert (await fleet.ok("fleet_poll", ticket=two))["status"] == "pending"


async def test_a_waiting_send_answered_while_the_pane_is_read_is_not_also_in_the_inbox(
    fleet: TestFleet,
) -> None:
    """A send that waits for its result is typed, and the member replies while fleetd still
    reads the pane after the prompt: the lead gets the result once, in the send's answer, and
    its inbox does not hold it a second time."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "read")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="quick", wait=5))
    await asyncio.wait_for(gate.entered.wait(), 5)
    await fleet.ok("fleet_reply", fleet.member(sid), content="the answer")
    gate.release()
    answered = await send
    assert (answered["status"], answered["content"]) == ("done", "the answer")
    drained = await fleet.ok("fleet_poll")
    assert [record for record in drained["messages"] if record.get("content") == "the answer"] == []


async def test_a_reply_that_comes_before_herdr_answers_the_prompt_ends_its_ticket(
    fleet: TestFleet,
) -> None:
    """herdr types the prompt, the member does the work and calls ``fleet_reply``, and only then
    does herdr's answer to ``agent.prompt`` arrive. The reply waits for that answer and ends
    the ticket (it was refused ``no_open_task`` and lost: the ticket stayed pending for good and
    the member's queue with it)."""
    sid = await fleet.spawn_ready()
    gate = hold_calls(fleet.control, "prompt")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="quick task"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    reply = asyncio.ensure_future(fleet.call("fleet_reply", fleet.member(sid), content="done it"))
    for _ in range(20):  # every step it can take without herdr's answer
        await asyncio.sleep(0)
    assert not reply.done()  # waits for herdr's answer to the prompt
    gate.release()
    ticket = (await send)["ticket"]
    answered = await asyncio.wait_for(reply, 5)
    assert answered.error is None
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["source"], polled["content"]) == ("done", "reply", "done it")
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["quick task"]


async def test_a_release_never_closes_a_pane_herdr_gave_the_members_id_after_a_restart(
    fleet: TestFleet,
) -> None:
    """herdr restarted: the member's pane is gone, and herdr, numbering from the start again,
    gave its pane id to a person's new shell. Releasing the member closes nothing of theirs (it
    closed that shell by the id); a pane is the member's only in the workspace labelled with its
    name."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    pane_id = session.pane_id
    fleet.control.remove(pane_id)
    shell = fleet.control.add_pane(workspace_id=pane_id.split(":")[0])
    assert shell.pane_id == pane_id
    await fleet.ok("fleet_stop", sessionId=sid)
    assert fleet.control.calls_to("close_pane") == []
    assert [p.pane_id for p in await fleet.control.labelled_panes(session.name)] == []
    fleet.control.env_of(pane_id)  # the person's shell is still there
