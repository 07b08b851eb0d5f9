"""SimClient (the herdr socket client and its typed wrappers) on the simulator, every method."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from fleetd.errors import HerdrError, TargetNotFoundError
from fleetd.herdr.calls import PromptWait
from fleetd.herdr.model import AgentStatus, ReadSource, SplitDirection
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import Fault, parse_scenario

SCENARIO = parse_scenario(
    {
        "defaults": {"start_seconds": 1.0, "turn_seconds": 2.0, "frame_seconds": 0.5},
        "agents": {"m-never*": {"faults": ["never_ready"]}, "m-exit*": {"faults": ["exit"]}},
        "existing": [
            {"name": "lead", "kind": "claude", "cwd": "/tmp/lead", "label": "lead"},
            {"shell": True, "cwd": "/tmp/spare", "label": "spare"},
        ],
    }
)


@pytest.fixture
async def h() -> AsyncIterator[SimHarness]:
    async with SimHarness(SCENARIO) as harness:
        yield harness


async def _member(h: SimHarness, name: str = "m1", kind: str = "claude") -> str:
    created = await h.run(h.client.workspace_create(cwd=f"/tmp/{name}", label=name))
    pane_id = created.root_pane.pane_id
    await h.run(h.client.agent_start(name, kind, pane_id))
    await h.advance(1.2)
    return pane_id


async def test_ping_reports_version_and_protocol(h: SimHarness) -> None:
    """ping answers pong with herdr's version and protocol number."""
    pong = await h.run(h.client.ping())
    assert pong.version == "0.8.2"
    assert pong.protocol == 20


async def test_listing_methods_see_the_scenario_panes(h: SimHarness) -> None:
    """agent.list, agent.get, pane.list, pane.get and session.snapshot agree on the herd."""
    agents = await h.run(h.client.agent_list())
    assert [a.name for a in agents] == ["lead"]
    lead = await h.run(h.client.agent_get("lead"))
    assert lead.agent == "claude"
    assert lead.agent_status is AgentStatus.IDLE
    assert lead.terminal_id.startswith("term_")
    assert lead.pane_id == "w1:p1"
    panes = await h.run(h.client.pane_list())
    assert {p.pane_id for p in panes} == {"w1:p1", "w2:p1"}
    assert (await h.run(h.client.pane_list("w2")))[0].label is None
    spare = await h.run(h.client.pane_get("w2:p1"))
    assert spare.agent is None
    assert spare.agent_status is AgentStatus.UNKNOWN
    snap = await h.run(h.client.session_snapshot())
    assert [w.workspace_id for w in snap.workspaces] == ["w1", "w2"]
    assert len(snap.tabs) == 2
    assert [a.name for a in snap.agents] == ["lead"]
    assert snap.focused_pane_id == "w1:p1"


async def test_agent_is_reachable_by_name_or_pane_id(h: SimHarness) -> None:
    """An agent target is its live name or the pane id hosting it."""
    by_pane = await h.run(h.client.agent_get("w1:p1"))
    assert by_pane.name == "lead"


async def test_an_unlisted_agent_still_answers_by_name_until_listed_again(h: SimHarness) -> None:
    """The ``unlist`` control: agent.list misses the agent, agent.get still finds it."""
    h.sim.unlist("lead")
    assert [a.name for a in await h.run(h.client.agent_list())] == []
    assert (await h.run(h.client.agent_get("lead"))).name == "lead"
    h.sim.unlist("lead", unlisted=False)
    assert [a.name for a in await h.run(h.client.agent_list())] == ["lead"]


async def test_an_agent_started_by_hand_after_its_pane_died_is_found_by_name(
    h: SimHarness,
) -> None:
    """The ``start_by_hand`` control: the same name, a new pane and terminal, at its prompt."""
    before = await h.run(h.client.agent_get("lead"))
    h.sim.agent("lead").exit()
    with pytest.raises(TargetNotFoundError):
        await h.run(h.client.agent_get("lead"))
    h.sim.start_by_hand("lead")
    after = await h.run(h.client.agent_get("lead"))
    assert after.pane_id != before.pane_id
    assert after.terminal_id != before.terminal_id
    assert after.agent_status is AgentStatus.IDLE


async def test_workspace_tab_and_split_create_shell_panes_with_env(h: SimHarness) -> None:
    """workspace.create, tab.create and pane.split make shell panes carrying the given env."""
    created = await h.run(h.client.workspace_create(cwd="/w", label="m", env={"TOKEN": "t1"}))
    assert created.workspace.workspace_id == "w3"
    assert created.tab.tab_id == "w3:t1"
    assert created.root_pane.pane_id == "w3:p1"
    env = h.sim.world.pane("w3:p1").env
    assert env["TOKEN"] == "t1"
    assert env["HERDR_PANE_ID"] == "w3:p1"
    tab = await h.run(h.client.tab_create(workspace_id="w3", cwd="/w2", env={"TOKEN": "t2"}))
    assert tab.tab.tab_id == "w3:t2"
    assert tab.root_pane.pane_id == "w3:p2"
    split = await h.run(
        h.client.pane_split(
            SplitDirection.DOWN, target_pane_id="w3:p1", cwd="/w3", env={"TOKEN": "t3"}
        )
    )
    assert split.pane_id == "w3:p3"
    assert split.tab_id == "w3:t1"
    assert h.sim.world.pane(split.pane_id).env["TOKEN"] == "t3"
    by_workspace = await h.run(h.client.pane_split(workspace_id="w3"))
    assert by_workspace.workspace_id == "w3"


async def test_agent_start_is_pending_then_interactive(h: SimHarness) -> None:
    """agent.start answers with launch_pending; after the start delay the agent is ready/idle."""
    created = await h.run(h.client.workspace_create(cwd="/tmp/m1"))
    started = await h.run(h.client.agent_start("m1", "claude-code", created.root_pane.pane_id))
    assert started.agent.launch_pending
    assert not started.agent.interactive_ready
    assert started.agent.agent == "claude"
    assert started.argv == ("claude",)
    await h.advance(1.2)
    ready = await h.run(h.client.agent_get("m1"))
    assert ready.interactive_ready
    assert not ready.launch_pending
    assert ready.agent_status is AgentStatus.IDLE


async def test_prompt_goes_working_then_done_then_idle_on_focus(h: SimHarness) -> None:
    """A prompt: working with a changing screen, then `done`; focusing makes it idle."""
    pane_id = await _member(h)
    prompted = await h.run(h.client.agent_prompt("m1", "Fix the flaky test"))
    assert prompted.agent_status.at_prompt
    await h.advance(0.5)
    first = await h.run(h.client.pane_read(pane_id, ReadSource.VISIBLE))
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.WORKING
    await h.advance(0.6)
    second = await h.run(h.client.pane_read(pane_id, ReadSource.VISIBLE))
    assert first.text != second.text
    await h.advance(2.0)
    done = await h.run(h.client.agent_get("m1"))
    assert done.agent_status is AgentStatus.DONE
    assert done.state_change_seq > prompted.state_change_seq
    final = await h.run(h.client.agent_read("m1", ReadSource.DETECTION))
    assert "● Done: Fix the flaky test" in final.text
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.DONE
    focused = await h.run(h.client.agent_focus("m1"))
    assert focused.agent_status is AgentStatus.IDLE


async def test_reads_honour_source_and_lines(h: SimHarness) -> None:
    """visible keeps the last N lines; recent includes scrollback and reports truncation."""
    pane_id = await _member(h)
    await h.run(h.client.agent_prompt("m1", "one"))
    await h.advance(3.0)
    await h.run(h.client.agent_prompt("m1", "two"))
    await h.advance(3.0)
    tail = await h.run(h.client.pane_read(pane_id, ReadSource.VISIBLE, lines=3))
    assert len(tail.text.split("\n")) == 3
    assert tail.truncated
    recent = await h.run(h.client.pane_read(pane_id, ReadSource.RECENT_UNWRAPPED, lines=200))
    assert "❯ one" in recent.text
    assert "❯ two" in recent.text
    assert recent.source is ReadSource.RECENT_UNWRAPPED


async def test_long_recent_agent_read_refused_while_not_idle(h: SimHarness) -> None:
    """agent.read of more recent lines than the screen holds is refused while working."""
    await _member(h)
    await h.run(h.client.agent_prompt("m1", "work"))
    await h.advance(0.5)
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_read("m1", ReadSource.RECENT, lines=500))
    assert info.value.code == "agent_not_idle"


async def test_blocked_agent_refuses_prompt_and_approval_resumes(h: SimHarness) -> None:
    """agent.prompt to a blocked agent is agent_blocked; Enter on the approval resumes the turn."""
    pane_id = await _member(h)
    h.sim.inject_fault("m1", Fault.BLOCKED)
    await h.run(h.client.agent_prompt("m1", "clean the build"))
    await h.advance(1.5)
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.BLOCKED
    screen = await h.run(h.client.pane_read(pane_id, ReadSource.DETECTION))
    assert "Do you want to proceed?" in screen.text
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_prompt("m1", "more"))
    assert info.value.code == "agent_blocked"
    await h.run(h.client.agent_send_keys("m1", ["Enter"]))
    await h.advance(0.1)
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.WORKING
    await h.advance(2.0)
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.DONE


async def test_not_ready_agent_refuses_prompt(h: SimHarness) -> None:
    """A never-ready agent stays launch_pending and refuses prompts with agent_not_ready."""
    created = await h.run(h.client.workspace_create())
    await h.run(
        h.client.agent_start("m-never", "codex", created.root_pane.pane_id, timeout_ms=4000)
    )
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_prompt("m-never", "hello"))
    assert info.value.code == "agent_not_ready"
    await h.advance(4.1)
    failed = await h.run(h.client.agent_get("m-never"))
    assert not failed.launch_pending
    assert not failed.interactive_ready


async def test_empty_prompt_is_refused(h: SimHarness) -> None:
    """agent.prompt with empty text is empty_agent_prompt."""
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_prompt("lead", ""))
    assert info.value.code == "empty_agent_prompt"


async def test_pane_input_methods_type_submit_and_interrupt(h: SimHarness) -> None:
    """send_input text+Enter submits a prompt; send_keys esc interrupts; send_text types."""
    pane_id = await _member(h)
    await h.run(h.client.pane_send_input(pane_id, "via send_input", ["Enter"]))
    await h.advance(0.5)
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.WORKING
    await h.run(h.client.pane_send_keys(pane_id, ["esc"]))
    interrupted = await h.run(h.client.agent_get("m1"))
    assert interrupted.agent_status is AgentStatus.DONE
    assert (
        "Interrupted by user" in (await h.run(h.client.pane_read(pane_id, ReadSource.VISIBLE))).text
    )
    await h.run(h.client.pane_send_text(pane_id, "typed then newline\n"))
    await h.advance(0.5)
    assert (await h.run(h.client.agent_get("m1"))).agent_status is AgentStatus.WORKING


async def test_shell_pane_echoes_commands(h: SimHarness) -> None:
    """Text and Enter sent to a shell pane appear as a command line on its screen."""
    await h.run(h.client.pane_send_text("w2:p1", "ls -la\n"))
    read = await h.run(h.client.pane_read("w2:p1", ReadSource.VISIBLE))
    assert "$ ls -la" in read.text


async def test_invalid_key_is_refused(h: SimHarness) -> None:
    """A key outside herdr's grammar is invalid_key."""
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.pane_send_keys("w1:p1", ["pageup"]))
    assert info.value.code == "invalid_key"


async def test_process_info_names_the_foreground_agent(h: SimHarness) -> None:
    """pane.process_info shows the agent process for an agent pane and the shell otherwise."""
    agent_proc = await h.run(h.client.pane_process_info("w1:p1"))
    assert agent_proc.foreground_processes[0].name == "claude"
    assert agent_proc.foreground_processes[0].cwd == "/tmp/lead"
    shell_proc = await h.run(h.client.pane_process_info("w2:p1"))
    assert shell_proc.foreground_processes[0].name == "bash"


async def test_pane_close_makes_targets_not_found(h: SimHarness) -> None:
    """After pane.close the pane and its agent answer *_not_found (TargetNotFoundError)."""
    pane_id = await _member(h)
    await h.run(h.client.pane_close(pane_id))
    with pytest.raises(TargetNotFoundError) as agent_gone:
        await h.run(h.client.agent_get("m1"))
    assert agent_gone.value.code == "agent_not_found"
    with pytest.raises(TargetNotFoundError) as pane_gone:
        await h.run(h.client.pane_read(pane_id, ReadSource.VISIBLE))
    assert pane_gone.value.code == "pane_not_found"
    with pytest.raises(TargetNotFoundError):
        await h.run(h.client.pane_close(pane_id))


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda c: c.agent_get("ghost"), "agent_not_found"),
        (lambda c: c.pane_get("w9:p9"), "pane_not_found"),
        (lambda c: c.pane_list("w9"), "workspace_not_found"),
        (lambda c: c.agent_start("m2", "claude", "w9:p9"), "agent_pane_not_found"),
        (lambda c: c.pane_split(target_pane_id="w9:p9"), "target_pane_not_found"),
    ],
)
async def test_not_found_codes_map_to_target_not_found(h: SimHarness, call, code: str) -> None:  # type: ignore[no-untyped-def]
    """Every *_not_found answer surfaces as TargetNotFoundError with herdr's code."""
    with pytest.raises(TargetNotFoundError) as info:
        await h.run(call(h.client))
    assert info.value.code == code


@pytest.mark.parametrize(
    ("name", "kind", "timeout_ms", "code"),
    [
        ("Bad", "claude", None, "invalid_agent_name"),
        ("m2", "vim", None, "unsupported_agent_kind"),
        ("m2", "claude", 3000, "invalid_agent_timeout"),
        ("lead", "claude", None, "agent_name_taken"),
    ],
)
async def test_agent_start_refusals(
    h: SimHarness, name: str, kind: str, timeout_ms: int | None, code: str
) -> None:
    """agent.start refuses bad names, kinds, timeouts and taken names with herdr's codes."""
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_start(name, kind, "w2:p1", timeout_ms=timeout_ms))
    assert info.value.code == code


async def test_agent_start_on_busy_pane_is_refused(h: SimHarness) -> None:
    """A pane already hosting an agent is agent_pane_busy."""
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_start("m2", "claude", "w1:p1"))
    assert info.value.code == "agent_pane_busy"


async def test_agent_wait_holds_until_status_and_times_out(h: SimHarness) -> None:
    """agent.wait returns when the status is reached, or answers `timeout` after timeout_ms."""
    await _member(h)
    await h.run(h.client.agent_prompt("m1", "go"))
    done = await h.run(h.client.agent_wait("m1", [AgentStatus.DONE]))
    assert done.agent_status is AgentStatus.DONE
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_wait("m1", [AgentStatus.WORKING], timeout_ms=1000))
    assert info.value.code == "timeout"


async def test_agent_wait_sees_a_transient_status(h: SimHarness) -> None:
    """An instant turn's `working` is caught by agent.wait even though it lasted < one poll."""
    await _member(h)
    h.sim.inject_fault("m1", Fault.INSTANT)
    waiting = asyncio.ensure_future(
        h.client.agent_wait("m1", [AgentStatus.WORKING], timeout_ms=5000)
    )
    await h.advance(0)
    await h.run(h.client.agent_prompt("m1", "quick"))
    seen = await h.run(waiting)
    assert seen.agent_status is AgentStatus.WORKING


async def test_agent_wait_fails_when_the_agent_exits(h: SimHarness) -> None:
    """A pane that exits mid-wait answers agent_not_running; the pane is then not found."""
    created = await h.run(h.client.workspace_create())
    pane_id = created.root_pane.pane_id
    await h.run(h.client.agent_start("m-exit", "opencode", pane_id))
    await h.advance(1.2)
    await h.run(h.client.agent_prompt("m-exit", "go"))
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_wait("m-exit", [AgentStatus.DONE]))
    assert info.value.code == "agent_not_running"
    with pytest.raises(TargetNotFoundError):
        await h.run(h.client.pane_get(pane_id))


async def test_prompt_with_wait_holds_until_settled(h: SimHarness) -> None:
    """agent.prompt with wait answers once the turn has settled at done."""
    await _member(h)
    settled = await h.run(h.client.agent_prompt("m1", "go", PromptWait()))
    assert settled.agent_status is AgentStatus.DONE


async def test_prompt_with_wait_reports_a_stalled_prompt(h: SimHarness) -> None:
    """A prompt that changes nothing within 5 s is agent_prompt_stalled."""
    await _member(h)
    agent = h.sim.agent("m1")
    agent.profile = dataclasses.replace(agent.profile, react_seconds=10.0)
    with pytest.raises(HerdrError) as info:
        await h.run(h.client.agent_prompt("m1", "go", PromptWait(timeout_ms=60000)))
    assert info.value.code == "agent_prompt_stalled"
