"""LiveAgents: herdr's agents as the loops last saw them, and when that changed."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.runtime.live_agents import LiveAgents

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _agent(name: str, pane: str, status: AgentStatus = AgentStatus.IDLE) -> AgentInfo:
    return AgentInfo(
        terminal_id=f"term_{pane}",
        agent_status=status,
        workspace_id="w1",
        tab_id="w1:t1",
        pane_id=pane,
        name=name,
        agent="claude",
    )


def test_a_list_replaces_and_single_answers_update_only_on_a_shown_change() -> None:
    """Each list is a new revision; an agent.get answer moves it only when name, kind or status
    differ (the poller reads busy members four times a second)."""
    agents = LiveAgents()
    assert (agents.rows(), agents.statuses()) == (None, {})
    agents.listed([_agent("b", "w1:p2"), _agent("a", "w1:p1")], T0)
    assert [row["name"] for row in agents.rows() or []] == ["a", "b"]
    revision = agents.revision
    agents.seen(dataclasses.replace(_agent("a", "w1:p1"), state_change_seq=9, focused=True))
    assert agents.revision == revision
    agents.seen(_agent("a", "w1:p1", AgentStatus.WORKING))
    agents.seen(_agent("c", "w1:p3"))  # spawned after the list: a herdr fact too
    assert agents.revision == revision + 2
    assert agents.statuses() == {"a": "working", "b": "idle", "c": "idle"}
    agents.listed([_agent("a", "w1:p1")], T0)
    assert agents.statuses() == {"a": "idle"}


def test_a_failed_list_hides_the_agents_until_one_answers() -> None:
    """After a failed list the agents are unknown (null), said once, until a list answers."""
    agents = LiveAgents()
    agents.listed([_agent("a", "w1:p1")], T0)
    revision = agents.revision
    agents.list_failed()
    agents.list_failed()
    assert (agents.rows(), agents.revision) == (None, revision + 1)
    assert agents.listed_at == T0  # the age of what was last known stays readable
    agents.listed([_agent("a", "w1:p1")], T0)
    assert agents.rows() is not None


def _afresh(agents: list[AgentInfo]) -> LiveAgents:
    fresh = LiveAgents()
    fresh.listed(agents, T0)
    return fresh


def test_one_agent_moved_makes_its_row_again_and_leaves_the_last_rows_as_read() -> None:
    """A status change of a known agent makes the new revision's rows and statuses from the last
    ones with that one row replaced: equal to a full build of the same agents, and the rows a
    reader of the last revision holds are not changed under it."""
    listed = [_agent("b", "w1:p2"), _agent("a", "w1:p1"), _agent("c", "w1:p3")]
    agents = _afresh(listed)
    before_rows, before_statuses = agents.rows(), agents.statuses()
    shared = agents._shown()[0]
    moved = _agent("b", "w1:p2", AgentStatus.WORKING)
    agents.seen(moved)
    expected = _afresh([moved, listed[1], listed[2]])
    assert agents.rows() == expected.rows()
    assert agents.statuses() == expected.statuses() == {"a": "idle", "b": "working", "c": "idle"}
    assert [r["status"] for r in shared] == ["idle", "idle", "idle"]  # the last revision's rows
    assert (before_rows, before_statuses) == (_afresh(listed).rows(), _afresh(listed).statuses())
    again = _agent("b", "w1:p2", AgentStatus.BLOCKED)  # twice in a row, without a read between
    agents.seen(again)
    agents.seen(_agent("a", "w1:p1", AgentStatus.DONE))
    assert (
        agents.rows() == _afresh([again, _agent("a", "w1:p1", AgentStatus.DONE), listed[2]]).rows()
    )


def test_two_agents_of_one_name_are_shown_as_a_full_build_shows_them() -> None:
    """While two agents share a name, a moved one is shown as building every row shows it."""
    listed = [_agent("a", "w1:p1"), _agent("a", "w1:p2")]
    agents = _afresh(listed)
    agents.rows()
    moved = _agent("a", "w1:p1", AgentStatus.WORKING)
    agents.seen(moved)
    expected = _afresh([moved, listed[1]])
    assert (agents.rows(), agents.statuses()) == (expected.rows(), expected.statuses())


def test_a_new_list_keeps_the_rows_of_agents_that_show_the_same() -> None:
    """A list where one agent moved, one came and one went: the unmoved agents keep their very
    row objects, the moved and the new one get new rows, and the rows equal a full build's."""
    listed = [_agent("a", "w1:p1"), _agent("b", "w1:p2"), _agent("c", "w1:p3")]
    agents = _afresh(listed)
    first = {row["paneId"]: row for row in agents.rows() or []}
    relisted = [listed[0], _agent("b", "w1:p2", AgentStatus.WORKING), _agent("d", "w1:p4")]
    agents.listed(relisted, T0)
    rows = agents.rows() or []
    assert rows == _afresh(relisted).rows()
    same = [row is first.get(row["paneId"]) for row in rows]
    assert same == [True, False, False]
    agents.seen(_agent("a", "w1:p1", AgentStatus.BLOCKED))  # a single answer, then a list again
    agents.listed([_agent("a", "w1:p1", AgentStatus.BLOCKED)], T0)
    [row] = agents.rows() or []
    assert row["status"] == "blocked"


def test_a_row_is_written_as_fleet_list_has_always_written_it() -> None:
    """Name, pane, kind and status, in that order, camelCase; a nameless agent shows null."""
    agents = _afresh([_agent("a", "w1:p1"), dataclasses.replace(_agent("", "w1:p0"), name=None)])
    assert [json.dumps(row, separators=(",", ":")) for row in agents.rows() or []] == [
        '{"name":null,"paneId":"w1:p0","agent":"claude","status":"idle"}',
        '{"name":"a","paneId":"w1:p1","agent":"claude","status":"idle"}',
    ]
