"""fleet_reply with no open task: refused with a hint, unless it follows a fallback resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


async def test_a_member_with_no_task_is_refused_and_the_lead_hears_nothing(
    fleet: TestFleet,
) -> None:
    """A reply from an idle member is no_open_task with a hint; nothing reaches the lead's inbox."""
    sid = await fleet.spawn_ready()
    answer = (await fleet.call("fleet_reply", fleet.member(sid), content="unasked")).to_json()
    assert answer["ok"] is False
    assert answer["error"]["code"] == "no_open_task"
    assert answer["error"]["hint"]["lastTicket"] is None
    assert (await fleet.ok("fleet_poll"))["messages"] == []


async def test_a_second_reply_to_an_answered_task_is_refused(fleet: TestFleet) -> None:
    """The task's one reply resolves it; a second one is refused and names the answered ticket."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="do it"))["ticket"]
    await fleet.ok("fleet_reply", fleet.member(sid), content="first")
    answer = (await fleet.call("fleet_reply", fleet.member(sid), content="second")).to_json()
    assert answer["error"]["code"] == "no_open_task"
    assert answer["error"]["hint"] == {
        "lastTicket": ticket,
        "lastTicketStatus": "done",
        "lastTicketSource": "reply",
    }
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [m["content"] for m in messages] == ["first"]


async def test_a_reply_after_the_fallback_is_a_late_reply_to_that_ticket(
    fleet: TestFleet,
) -> None:
    """A member that replies after the fallback resolved its turn reaches the lead once, marked."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="do it"))["ticket"]
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)
    assert (await fleet.ok("fleet_poll", ticket=ticket))["source"] in ("fallback", "raw_fallback")
    late = await fleet.ok("fleet_reply", fleet.member(sid), content="the real answer")
    assert late == {"accepted": True, "ticket": ticket, "late": True}
    again = await fleet.call("fleet_reply", fleet.member(sid), content="once more")
    assert again.error is not None
    assert again.error.code == "no_open_task"
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [(m["ticket"], m["source"]) for m in messages] == [
        (ticket, "fallback"),
        (ticket, "late"),
    ]
    assert messages[1]["content"] == "the real answer"


async def test_a_late_reply_never_answers_the_next_queued_task(fleet: TestFleet) -> None:
    """With a second task queued, the next send waits a moment after a fallback resolution, so
    a reply arriving then is kept as the late reply to the first ticket, not as the second's
    result; the second is typed once the late reply is in (or the window has passed)."""
    sid = await fleet.spawn_ready()
    first = (await fleet.ok("fleet_send", target=sid, prompt="task A"))["ticket"]
    second = (await fleet.ok("fleet_send", target=sid, prompt="task B"))["ticket"]
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)  # the fallback resolves task A from the pane
    await fleet.poll()  # the member is at its prompt, task B is queued
    name = fleet.bridge.reads.session(sid).name  # type: ignore[union-attr]
    typed = [c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == name]
    assert typed == ["task A"]
    late = await fleet.ok("fleet_reply", fleet.member(sid), content="answer for task A")
    assert late == {"accepted": True, "ticket": first, "late": True}
    await fleet.poll()
    typed = [c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == name]
    assert typed == ["task A", "task B"]
    answer = await fleet.ok("fleet_reply", fleet.member(sid), content="answer for task B")
    assert answer == {"accepted": True, "ticket": second, "late": False}
    assert (await fleet.ok("fleet_poll", ticket=second))["content"] == "answer for task B"


async def test_without_a_late_reply_the_next_task_is_typed_after_the_window(
    fleet: TestFleet,
) -> None:
    """A mute member does not hold its queue for long: the next task goes after the window."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="task A")
    await fleet.ok("fleet_send", target=sid, prompt="task B")
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)
    name = fleet.bridge.reads.session(sid).name  # type: ignore[union-attr]
    for _ in range(8):  # two seconds of poller passes
        await fleet.poll()
    typed = [c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == name]
    assert typed == ["task A", "task B"]
