"""The live agents by terminal, carried from one tick to the next (health.agent_index)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.health.agent_index import AgentIndex, _by_terminal
from fleetd.health.snapshot import LiveAgent, LiveStatus
from tests.unit.health.health_fleet import agent

_STATUSES = (LiveStatus.IDLE, LiveStatus.WORKING, LiveStatus.DONE)


def _list(names: list[str], terminals: list[str], statuses: list[LiveStatus]) -> list[LiveAgent]:
    return [
        agent(name, status, terminal=terminal, pane=f"w1:p{n}")
        for n, (name, terminal, status) in enumerate(zip(names, terminals, statuses, strict=True))
    ]


@st.composite
def _ticks(draw: st.DrawFn) -> list[tuple[LiveAgent, ...]]:
    """Lists of agents as the runtime hands them over: an unchanged agent is the last list's
    very object; some positions get a new object (a status moved, a terminal changed), and
    some lists add or drop an agent or list one terminal twice."""
    size = draw(st.integers(1, 5))
    current = _list(
        [f"m{n}" for n in range(size)],
        [f"term_{n}" for n in range(size)],
        [LiveStatus.IDLE] * size,
    )
    ticks = [tuple(current)]
    for _ in range(draw(st.integers(1, 8))):
        current = list(current)
        for position in draw(st.lists(st.integers(0, len(current) - 1), max_size=3)):
            old = current[position]
            terminal = draw(st.sampled_from([old.terminal_id, "term_0", "term_new"]))
            current[position] = agent(
                old.name or "x",
                draw(st.sampled_from(_STATUSES)),
                terminal=terminal,
                pane=old.pane_id,
            )
        if draw(st.booleans()) and len(current) > 1:
            current.pop(draw(st.integers(0, len(current) - 1)))
        ticks.append(tuple(current))
    return ticks


@settings(max_examples=300)
@given(_ticks())
def test_an_index_taken_over_equals_one_built_afresh(ticks: list[tuple[LiveAgent, ...]]) -> None:
    """Whatever moved between two lists (statuses, terminals, a shorter list, one terminal
    listed twice), the index a tick takes over from the last one maps each terminal to the agent
    an index built from the list alone maps it to, the smallest pane id winning a duplicate."""
    index: AgentIndex | None = None
    for agents in ticks:
        index = AgentIndex.of(agents, index)
        assert index.by_terminal == _by_terminal(agents)
        assert list(index.by_terminal.values()) == list(_by_terminal(agents).values())


def test_a_lined_up_list_updates_the_last_index_in_place_once() -> None:
    """A list of the same length whose new objects kept their terminals updates the last
    tick's index in place; that index is then spent, so a second tick from the same prior state
    (decide called twice with it) builds its own instead of reading one another tick changed."""
    first = tuple(_list(["a", "b"], ["term_a", "term_b"], [LiveStatus.IDLE] * 2))
    second = (first[0], agent("b", LiveStatus.WORKING, terminal="term_b", pane="w1:p1"))
    prior = AgentIndex.of(first, None)
    taken = AgentIndex.of(second, prior)
    assert taken.by_terminal is prior.by_terminal
    assert taken.by_terminal["term_b"] is second[1]
    again = AgentIndex.of(first, prior)
    assert again.by_terminal is not prior.by_terminal
    assert again.by_terminal["term_b"] is first[1]
