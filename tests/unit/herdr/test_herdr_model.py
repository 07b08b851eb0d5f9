"""Typed results parsed leniently from herdr's wire shapes."""

from __future__ import annotations

from typing import Any

import pytest

from fleetd.errors import HerdrError
from fleetd.herdr import calls
from fleetd.herdr.model import (
    AgentInfo,
    AgentStatus,
    PaneInfo,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SessionSnapshot,
)

AGENT: dict[str, Any] = {
    "terminal_id": "term_ab12",
    "agent_status": "done",
    "workspace_id": "w1",
    "tab_id": "w1:t1",
    "pane_id": "w1:p2",
    "focused": False,
    "revision": 3,
}


@pytest.mark.parametrize(
    ("wire", "status", "at_prompt"),
    [
        ("idle", AgentStatus.IDLE, True),
        ("done", AgentStatus.DONE, True),
        ("working", AgentStatus.WORKING, False),
        ("blocked", AgentStatus.BLOCKED, False),
        ("unknown", AgentStatus.UNKNOWN, False),
        ("thinking", AgentStatus.UNKNOWN, False),
        (None, AgentStatus.UNKNOWN, False),
        (7, AgentStatus.UNKNOWN, False),
    ],
)
def test_status_parsing_and_at_prompt(wire: object, status: AgentStatus, at_prompt: bool) -> None:
    """Known statuses parse; anything else is UNKNOWN; idle and done are both at the prompt."""
    parsed = AgentStatus.parse(wire)
    assert parsed is status
    assert parsed.at_prompt is at_prompt


def test_agent_info_fills_defaults_for_omitted_optional_fields() -> None:
    """herdr omits empty/false optionals; they come back as None/False/0."""
    agent = AgentInfo.from_wire(AGENT)
    assert agent.agent_status is AgentStatus.DONE
    assert agent.state_change_seq == 0
    assert agent.name is None
    assert agent.agent is None
    assert not agent.launch_pending
    assert not agent.interactive_ready


def test_agent_info_reads_every_field_fleetd_uses() -> None:
    """All documented AgentInfo fields fleetd needs are carried over."""
    agent = AgentInfo.from_wire(
        AGENT
        | {
            "state_change_seq": 9,
            "name": "m1",
            "agent": "claude",
            "title": "✳ x",
            "launch_pending": True,
            "interactive_ready": True,
            "cwd": "/w",
            "focused": True,
        }
    )
    assert (agent.state_change_seq, agent.name, agent.agent, agent.cwd) == (9, "m1", "claude", "/w")
    assert agent.launch_pending
    assert agent.interactive_ready
    assert agent.focused
    assert agent.title == "✳ x"


@pytest.mark.parametrize("missing", ["terminal_id", "pane_id", "workspace_id", "tab_id"])
def test_missing_required_field_is_invalid_response(missing: str) -> None:
    """A required id missing from AgentInfo is reported as invalid_response."""
    wire = {k: v for k, v in AGENT.items() if k != missing}
    with pytest.raises(HerdrError) as info:
        AgentInfo.from_wire(wire)
    assert info.value.code == "invalid_response"


def test_wrongly_typed_counter_is_invalid_response() -> None:
    """A non-integer revision is rejected rather than guessed."""
    with pytest.raises(HerdrError):
        AgentInfo.from_wire(AGENT | {"revision": "3"})


def test_pane_without_agent_is_unknown_status() -> None:
    """A shell pane's PaneInfo has no agent and normally unknown status."""
    pane = PaneInfo.from_wire({k: v for k, v in AGENT.items() if k != "agent_status"})
    assert pane.agent is None
    assert pane.agent_status is AgentStatus.UNKNOWN


def test_read_result_source_must_be_known() -> None:
    """ReadResult parses its source enum and refuses an unknown one."""
    read = ReadResult.from_wire(
        {"pane_id": "w1:p1", "source": "recent_unwrapped", "text": "x", "truncated": True}
    )
    assert read.source is ReadSource.RECENT_UNWRAPPED
    assert read.truncated
    with pytest.raises(HerdrError):
        ReadResult.from_wire({"pane_id": "w1:p1", "source": "recent-unwrapped", "text": "x"})


def test_snapshot_parses_nested_lists() -> None:
    """session.snapshot parses workspaces, tabs, panes and agents and ignores layouts."""
    snap = SessionSnapshot.from_wire(
        {
            "version": "0.8.2",
            "protocol": 20,
            "workspaces": [
                {
                    "workspace_id": "w1",
                    "number": 1,
                    "label": "a",
                    "focused": True,
                    "pane_count": 1,
                    "tab_count": 1,
                    "active_tab_id": "w1:t1",
                    "agent_status": "idle",
                }
            ],
            "tabs": [
                {
                    "tab_id": "w1:t1",
                    "workspace_id": "w1",
                    "number": 1,
                    "label": "1",
                    "focused": True,
                    "pane_count": 1,
                    "agent_status": "idle",
                }
            ],
            "panes": [AGENT],
            "layouts": [{"whatever": True}],
            "agents": [AGENT],
        }
    )
    assert snap.workspaces[0].active_tab_id == "w1:t1"
    assert snap.tabs[0].tab_id == "w1:t1"
    assert snap.agents[0].pane_id == "w1:p2"
    assert snap.panes[0].pane_id == "w1:p2"


def test_process_info_tolerates_nulls() -> None:
    """Nullable pids, tty and argv are accepted."""
    info = ProcessInfo.from_wire(
        {
            "pane_id": "w1:p1",
            "shell_pid": None,
            "tty": None,
            "foreground_processes": [{"pid": 5, "name": "claude", "argv": None}],
        }
    )
    assert info.shell_pid is None
    assert info.foreground_processes[0].argv == ()


def test_builders_spell_params_as_herdr_does() -> None:
    """Builders use herdr's param names and leave out unset optionals."""
    split = calls.pane_split(target_pane_id="w1:p1", cwd="/x", env={"A": "1"})
    assert split.method == "pane.split"
    assert split.params == {
        "target_pane_id": "w1:p1",
        "direction": "right",
        "cwd": "/x",
        "env": {"A": "1"},
        "focus": False,
    }
    read = calls.pane_read("w1:p1", ReadSource.VISIBLE)
    assert read.params == {"pane_id": "w1:p1", "source": "visible"}
    wait = calls.agent_prompt("m1", "hi", calls.PromptWait(until=(AgentStatus.DONE,)))
    assert wait.params["wait"] == {"until": ["done"]}
    assert calls.agent_wait("m1").params == {"target": "m1"}
