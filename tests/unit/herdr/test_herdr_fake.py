"""FakeAgentControl: records calls, lets tests set status, fails on demand."""

from __future__ import annotations

import pytest

from fleetd.errors import ControlLinkError, HerdrError, TargetNotFoundError
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus, ReadSource


async def test_calls_are_recorded_in_order_with_arguments() -> None:
    """Every port call is recorded with its arguments, failing calls included."""
    fake = FakeAgentControl()
    fake.add_agent("m1")
    await fake.list_agents()
    await fake.prompt("m1", "hello")
    with pytest.raises(TargetNotFoundError):
        await fake.get_agent("ghost")
    assert [c.method for c in fake.calls] == ["list_agents", "prompt", "get_agent"]
    assert fake.calls_to("prompt")[0].args == {"target": "m1", "text": "hello"}


async def test_status_is_the_tests_to_set() -> None:
    """set_status changes the status and bumps state_change_seq only on a change."""
    fake = FakeAgentControl()
    fake.add_agent("m1")
    await fake.prompt("m1", "go")
    assert (await fake.get_agent("m1")).agent_status is AgentStatus.IDLE
    fake.set_status("m1", AgentStatus.WORKING)
    fake.set_status("m1", AgentStatus.WORKING)
    agent = await fake.get_agent("m1")
    assert agent.agent_status is AgentStatus.WORKING
    assert agent.state_change_seq == 1


async def test_link_down_fails_every_call_until_up() -> None:
    """link_down makes every call raise ControlLinkError; link_up restores them."""
    fake = FakeAgentControl()
    fake.link_down()
    with pytest.raises(ControlLinkError):
        await fake.ping()
    with pytest.raises(ControlLinkError):
        await fake.list_agents()
    fake.link_up()
    assert (await fake.list_agents()) == ()


async def test_fail_one_method_with_any_error() -> None:
    """fail(method, error) affects only that method; fail(method, None) clears it."""
    fake = FakeAgentControl()
    fake.add_agent("m1")
    fake.fail("read", TargetNotFoundError("pane_not_found"))
    with pytest.raises(TargetNotFoundError):
        await fake.read("w1:p1")
    assert (await fake.get_agent("m1")).name == "m1"
    fake.fail("read", None)
    assert (await fake.read("w1:p1", ReadSource.VISIBLE)).pane_id == "w1:p1"


async def test_removed_target_is_not_found() -> None:
    """remove() makes the pane and its agent disappear (GONE)."""
    fake = FakeAgentControl()
    fake.add_agent("m1")
    fake.remove("m1")
    with pytest.raises(TargetNotFoundError):
        await fake.get_agent("m1")
    with pytest.raises(TargetNotFoundError):
        await fake.read("w1:p1")


async def test_not_ready_agents_refuse_prompts_until_ready() -> None:
    """An agent started with ready_on_start=False is not ready until set_ready."""
    fake = FakeAgentControl(ready_on_start=False)
    pane = await fake.create_pane(cwd="/w", env={"TOKEN": "t"})
    started = await fake.start_agent(name="m1", kind="claude", pane_id=pane.pane_id)
    assert started.agent.launch_pending
    with pytest.raises(HerdrError) as info:
        await fake.prompt("m1", "hi")
    assert info.value.code == "agent_not_ready"
    fake.set_ready("m1")
    assert (await fake.prompt("m1", "hi")).interactive_ready
    assert fake.env_of(pane.pane_id) == {"TOKEN": "t"}


async def test_read_keeps_the_last_lines() -> None:
    """read with lines keeps the last N lines and reports truncation."""
    fake = FakeAgentControl()
    fake.add_agent("m1", screen="a\nb\nc")
    read = await fake.read("w1:p1", lines=2)
    assert read.text == "b\nc"
    assert read.truncated


async def test_a_name_shared_by_two_agents_finds_the_first_until_it_goes() -> None:
    """Lookups by name go through an index that keeps herdr's order: the first pane listed."""
    fake = FakeAgentControl()
    first = fake.add_agent("twin", status=AgentStatus.IDLE)
    second = fake.add_agent("twin", status=AgentStatus.WORKING)
    assert (await fake.get_agent("twin")).pane_id == first.pane_id
    await fake.close_pane(first.pane_id)
    assert (await fake.get_agent("twin")).pane_id == second.pane_id
    fake.remove("twin")
    with pytest.raises(TargetNotFoundError):
        await fake.get_agent("twin")
    pane = fake.add_pane()
    await fake.start_agent(name="twin", kind="claude", pane_id=pane.pane_id)  # the name is free
    assert (await fake.get_agent("twin")).pane_id == pane.pane_id


async def test_a_fake_that_keeps_no_calls_records_none() -> None:
    """``keep_calls=False`` answers the same and records nothing (for soaks and benchmarks)."""
    fake = FakeAgentControl(keep_calls=False)
    fake.add_agent("a")
    assert (await fake.get_agent("a")).name == "a"
    assert fake.calls == []
