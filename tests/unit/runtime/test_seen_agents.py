"""SeenAgents: health's view of each listed agent, kept between ticks while it reads the same."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fleetd.health.snapshot import LiveStatus
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.runtime.snapshot import SeenAgents


def _agent(n: int, **changes: Any) -> AgentInfo:
    agent = AgentInfo(
        terminal_id=f"term_{n}",
        agent_status=AgentStatus.IDLE,
        workspace_id="w1",
        tab_id="w1:t1",
        pane_id=f"w1:p{n}",
        state_change_seq=4,
        name=f"m-{n}",
        agent="claude",
    )
    return dataclasses.replace(agent, **changes)


def test_an_agent_that_reads_the_same_keeps_its_view_object() -> None:
    """A new list of equal agents (herdr decodes fresh objects each time) reuses every view."""
    seen = SeenAgents()
    first = seen.health_view([_agent(1), _agent(2)])
    again = seen.health_view([_agent(1), _agent(2)])
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True]
    assert (first[0].name, first[0].status, first[0].kind) == ("m-1", LiveStatus.IDLE, "claude")
    assert seen.listed == {"term_1": _agent(1), "term_2": _agent(2)}  # what the bridge observes
    seen.health_view([_agent(2)])
    assert list(seen.listed) == ["term_2"]


@pytest.mark.parametrize(
    "change",
    [
        {"agent_status": AgentStatus.WORKING},
        {"state_change_seq": 5},
        {"pane_id": "w1:p9"},
        {"name": "renamed"},
        {"agent": "codex"},
    ],
    ids=["status", "sequence", "pane", "name", "kind"],
)
def test_any_field_health_reads_that_changed_gives_a_new_view(change: dict[str, object]) -> None:
    """A change in any field health reads (status, sequence, pane, name, kind) gives a new view
    with the new values; the same agent again reuses it."""
    seen = SeenAgents()
    (before,) = seen.health_view([_agent(1)])
    (after,) = seen.health_view([_agent(1, **change)])
    assert after is not before
    assert (after.status, after.state_change_seq, after.pane_id, after.name, after.kind) == (
        LiveStatus(_agent(1, **change).agent_status.value),
        _agent(1, **change).state_change_seq,
        _agent(1, **change).pane_id,
        _agent(1, **change).name,
        _agent(1, **change).agent,
    )
    assert seen.health_view([_agent(1, **change)])[0] is after


def test_views_of_terminals_no_longer_listed_are_dropped() -> None:
    """What is kept is bounded by the list, however many agents came and went."""
    seen = SeenAgents()
    seen.health_view([_agent(n) for n in range(300)])
    for start in range(300, 3000, 300):
        listed = seen.health_view([_agent(n) for n in range(start, start + 300)])
        assert len(listed) == 300
    assert len(seen._kept) <= 300 + 64


def test_a_list_of_the_same_length_looks_again_only_at_new_objects() -> None:
    """The client hands back an unchanged agent as the same object: at the same length only the
    positions holding a new object are read, and a new object that reads the same keeps its
    view; the index by terminal and the named terminals follow the new list."""
    seen = SeenAgents()
    agents = [_agent(n) for n in range(4)]
    first = seen.health_view(agents, names={"m-1"})
    assert seen.terminals == {"m-1": "term_1"}
    agents[2] = _agent(2, agent_status=AgentStatus.WORKING)
    agents[3] = _agent(3)  # a new object, equal fields
    agents[1] = _agent(9, name="m-1")  # the name moved to another terminal
    second = seen.health_view(tuple(agents), names={"m-1"})
    assert [a is b for a, b in zip(first, second, strict=True)] == [True, False, False, True]
    assert second[2].status is LiveStatus.WORKING
    assert second[1].terminal_id == "term_9"
    assert seen.listed == {agent.terminal_id: agent for agent in agents}
    assert seen.terminals == {"m-1": "term_9"}


def test_the_last_agent_listed_under_a_name_gives_its_terminal() -> None:
    """Two agents under one name: the later in the list names the terminal; a failed list (no
    agents) empties both indexes."""
    seen = SeenAgents()
    seen.health_view([_agent(1), _agent(2, name="m-1"), _agent(3, name=None)], names=["m-1"])
    assert seen.terminals == {"m-1": "term_2"}
    seen.health_view([], names=["m-1"])  # a failed list: nothing listed
    assert (seen.terminals, seen.listed) == ({}, {})


def test_a_status_change_updates_the_index_in_place_and_in_list_order() -> None:
    """Agents that kept their terminal and name: the index by terminal is the same mapping with
    the new agents at their places, and the named terminals stand; other names asked, or a
    terminal listed twice, rebuild both."""
    seen = SeenAgents()
    agents = [_agent(n) for n in range(3)]
    seen.health_view(agents, names=["m-0"])
    index = seen.listed
    agents[1] = _agent(1, agent_status=AgentStatus.WORKING)
    seen.health_view(agents, names=["m-0"])
    assert seen.listed is index
    assert list(seen.listed.items()) == [(a.terminal_id, a) for a in agents]
    assert seen.terminals == {"m-0": "term_0"}
    seen.health_view(agents, names=["m-2"])
    assert seen.terminals == {"m-2": "term_2"}
    twice = [_agent(0), _agent(1), _agent(1, pane_id="w1:p7")]
    seen.health_view(twice, names=["m-1"])
    assert seen.listed == {"term_0": twice[0], "term_1": twice[2]}
    twice[0] = _agent(0, state_change_seq=9)
    seen.health_view(twice, names=["m-1"])
    assert seen.listed == {"term_0": twice[0], "term_1": twice[2]}
    assert seen.terminals == {"m-1": "term_1"}
