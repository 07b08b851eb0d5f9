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
