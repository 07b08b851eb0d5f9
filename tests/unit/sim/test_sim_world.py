"""The simulated session: herdr-shaped ids, close cascades, the status model, the event ring."""

from __future__ import annotations

import pytest

from fleetd.clock import FakeClock
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.sim.agent import SimAgent
from fleetd.sim.behaviour import ScriptedBehaviour
from fleetd.sim.handlers import Dispatcher
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import Scenario, parse_scenario
from fleetd.sim.state import AgentState, rollup, wire_status
from fleetd.sim.world import RETAINED_EVENTS, World, workspace_code


def _status(agent: SimAgent) -> AgentStatus:
    """The agent's status now (a call, so mypy does not carry a narrowing across set_state)."""
    return agent.status


def _world() -> tuple[World, Dispatcher]:
    world = World(socket_path="/tmp/h.sock", version="0.8.2", protocol=20)
    dispatcher = Dispatcher(
        world=world, scenario=Scenario(), clock=FakeClock(), behaviour=ScriptedBehaviour()
    )
    return world, dispatcher


@pytest.mark.parametrize(
    ("number", "code"), [(1, "1"), (9, "9"), (10, "A"), (31, "Z"), (32, "0"), (33, "11")]
)
def test_workspace_codes_use_herdrs_alphabet(number: int, code: str) -> None:
    """Workspace codes come from herdr's base-32 alphabet 123456789ABCDEFGHJKMNPQRSTVWXYZ0."""
    assert workspace_code(number) == code


def test_ids_are_herdr_shaped_and_env_carries_herdr_variables() -> None:
    """Workspaces w<n>, tabs <ws>:t<n>, panes <ws>:p<n>, terminals term_<hex>; HERDR_* env wins."""
    world, _ = _world()
    ws, tab, pane = world.create_workspace(
        cwd="/a", label=None, env={"HERDR_PANE_ID": "spoof", "X": "1"}, focus=False
    )
    split = world.split(
        target_pane_id=pane.pane_id, workspace_id=None, cwd=None, env={}, focus=False
    )
    assert (ws.workspace_id, tab.tab_id, pane.pane_id, split.pane_id) == (
        "w1",
        "w1:t1",
        "w1:p1",
        "w1:p2",
    )
    assert pane.terminal_id.startswith("term_")
    assert pane.terminal_id != split.terminal_id
    assert pane.env["HERDR_PANE_ID"] == "w1:p1"
    assert pane.env["X"] == "1"
    assert pane.env["HERDR_SOCKET_PATH"] == "/tmp/h.sock"
    assert split.cwd == "/a"
    assert ws.label == "a"


def test_closing_the_last_pane_closes_tab_and_workspace() -> None:
    """pane_closed, then tab_closed and workspace_closed once nothing is left."""
    world, _ = _world()
    world.create_workspace(cwd=None, label="x", env={}, focus=False)
    before = world.seq
    world.close_pane("w1:p1", exited=True)
    kinds = [e["event"] for _, e in world.events_after(before)]
    assert kinds == ["pane_exited", "pane_closed", "tab_closed", "workspace_closed"]
    assert not world.workspaces
    assert world.focused_workspace_id is None
    with pytest.raises(HerdrError) as info:
        world.pane("w1:p1")
    assert info.value.code == "pane_not_found"


@pytest.mark.parametrize(
    ("state", "seen", "status"),
    [
        (AgentState.IDLE, True, AgentStatus.IDLE),
        (AgentState.IDLE, False, AgentStatus.DONE),
        (AgentState.WORKING, True, AgentStatus.WORKING),
        (AgentState.BLOCKED, True, AgentStatus.BLOCKED),
        (AgentState.UNKNOWN, False, AgentStatus.UNKNOWN),
    ],
)
def test_wire_status_mapping(state: AgentState, seen: bool, status: AgentStatus) -> None:
    """idle+unseen is done, idle+seen is idle, the rest map one to one."""
    assert wire_status(state, seen) is status


def test_rollup_priority() -> None:
    """Tab/workspace status is the max of blocked > working > done > idle > unknown."""
    assert rollup([AgentStatus.IDLE, AgentStatus.DONE]) is AgentStatus.DONE
    assert rollup([AgentStatus.WORKING, AgentStatus.BLOCKED]) is AgentStatus.BLOCKED
    assert rollup([]) is AgentStatus.UNKNOWN


async def test_completion_is_done_until_focused_and_reading_does_not_mark_seen() -> None:
    """working -> idle reports done; focus marks seen (idle); each change bumps state_change_seq."""
    world, dispatcher = _world()
    _, _, pane = world.create_workspace(cwd=None, label=None, env={}, focus=False)
    agent = dispatcher.agents.spawn_agent(pane, name="m1", kind="claude")
    agent.mark_ready()
    assert _status(agent) is AgentStatus.IDLE
    seq = agent.state_change_seq
    agent.set_state(AgentState.WORKING)
    agent.set_state(AgentState.IDLE)
    assert _status(agent) is AgentStatus.DONE
    assert agent.state_change_seq == seq + 2
    dispatcher.handle("pane.read", {"pane_id": pane.pane_id, "source": "visible"})
    assert _status(agent) is AgentStatus.DONE
    dispatcher.handle("agent.focus", {"target": "m1"})
    assert _status(agent) is AgentStatus.IDLE
    assert agent.state_change_seq == seq + 3
    changes = [e for _, e in world.history if e["event"] == "pane_agent_status_changed"]
    assert [e["data"]["agent_status"] for e in changes][-3:] == ["working", "done", "idle"]


def test_event_ring_keeps_the_last_512_and_reports_loss() -> None:
    """The retained history is bounded; a cursor that fell behind is reported lost."""
    world, _ = _world()
    for _ in range(RETAINED_EVENTS + 10):
        world.emit("layout_updated", {"layout": {}})
    assert len(world.history) == RETAINED_EVENTS
    assert world.lost_since(5)
    assert not world.lost_since(0)
    assert not world.lost_since(world.seq)


def test_agent_target_resolution() -> None:
    """Targets resolve by name or hosting pane; ambiguity and absence are refused."""
    world, dispatcher = _world()
    _, _, first = world.create_workspace(cwd=None, label=None, env={}, focus=False)
    _, _, second = world.create_workspace(cwd=None, label=None, env={}, focus=False)
    dispatcher.agents.spawn_agent(first, name="twin", kind="claude")
    dispatcher.agents.spawn_agent(second, name="twin", kind="codex")
    with pytest.raises(HerdrError) as ambiguous:
        world.resolve_agent("twin")
    assert ambiguous.value.code == "agent_target_ambiguous"
    assert world.resolve_agent(second.pane_id).kind == "codex"
    with pytest.raises(HerdrError) as missing:
        world.resolve_agent("w1:p9")
    assert missing.value.code == "agent_not_found"


async def test_a_failing_reply_callback_does_not_wedge_the_turn() -> None:
    """If deliver_reply raises, the simulated turn still ends at the prompt."""

    class Broken(ScriptedBehaviour):
        async def deliver_reply(self, agent: object, text: str, answer: str) -> None:
            raise RuntimeError("fleetd unreachable")

    scenario = parse_scenario({"existing": [{"name": "m1", "kind": "claude"}]})
    async with SimHarness(scenario, behaviour=Broken()) as h:
        h.sim.agent("m1").submit("go")
        await h.advance(4.0)
        assert h.sim.agent("m1").status is AgentStatus.DONE
