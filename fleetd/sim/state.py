"""The simulated herd's mutable records and how herdr would describe them on the wire.

herdr keeps an internal agent state per pane (``idle | working | blocked | unknown``, what
integrations report) and a ``seen`` flag; the wire status is derived from both
(``src/app/api_helpers.rs::pane_agent_status``): idle+unseen is ``done``, idle+seen is ``idle``.
Workspace and tab statuses are max-priority rollups (blocked > working > done > idle > unknown).

These records belong to the simulator's single event loop; nothing here locks or awaits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from fleetd.herdr.model import AgentStatus

__all__ = ["AgentState", "Occupant", "Pane", "Tab", "Workspace", "rollup", "wire_status"]

JsonObject = dict[str, Any]


class AgentState(StrEnum):
    """herdr's internal agent state (``PaneAgentState``)."""

    IDLE = "idle"
    WORKING = "working"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"


def wire_status(state: AgentState, seen: bool) -> AgentStatus:
    """The ``agent_status`` herdr reports for an internal state and the seen flag."""
    if state is AgentState.IDLE:
        return AgentStatus.IDLE if seen else AgentStatus.DONE
    return AgentStatus(state.value)


_PRIORITY = {
    AgentStatus.BLOCKED: 4,
    AgentStatus.WORKING: 3,
    AgentStatus.DONE: 2,
    AgentStatus.IDLE: 1,
    AgentStatus.UNKNOWN: 0,
}


def rollup(statuses: list[AgentStatus]) -> AgentStatus:
    """Max-priority status of a tab or workspace."""
    return max(statuses, key=_PRIORITY.__getitem__, default=AgentStatus.UNKNOWN)


class Occupant(Protocol):
    """What a pane's record reads of the agent running in it: the fields herdr puts on the wire.

    The simulator's agent (:class:`fleetd.sim.agent.SimAgent`) is the one occupant; naming only
    this much here keeps the records below the agent that acts in them.
    """

    @property
    def kind(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def status(self) -> AgentStatus: ...


AgentT = TypeVar("AgentT", bound=Occupant)


@dataclass(eq=False, kw_only=True)
class Pane(Generic[AgentT]):
    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    shell_pid: int
    cwd: str | None = None
    label: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    screen: list[str] = field(default_factory=list)
    scrollback: list[str] = field(default_factory=list)
    shell_history: list[str] = field(default_factory=list)
    input_buffer: str = ""
    agent: AgentT | None = None
    alive: bool = True

    @property
    def agent_status(self) -> AgentStatus:
        return AgentStatus.UNKNOWN if self.agent is None else self.agent.status

    def to_wire(self, *, focused: bool) -> JsonObject:
        wire: JsonObject = {
            "pane_id": self.pane_id,
            "terminal_id": self.terminal_id,
            "workspace_id": self.workspace_id,
            "tab_id": self.tab_id,
            "focused": focused,
            "agent_status": str(self.agent_status),
            "revision": 0,
        }
        if self.cwd:
            wire["cwd"] = self.cwd
        if self.label:
            wire["label"] = self.label
        if self.agent is not None:
            wire["agent"] = self.agent.kind
            wire["title"] = self.agent.title
        return wire


@dataclass(eq=False, kw_only=True)
class Tab:
    tab_id: str
    workspace_id: str
    number: int
    label: str
    pane_ids: list[str] = field(default_factory=list)
    focused_pane_id: str | None = None

    def to_wire(self, *, focused: bool, statuses: list[AgentStatus]) -> JsonObject:
        return {
            "tab_id": self.tab_id,
            "workspace_id": self.workspace_id,
            "number": self.number,
            "label": self.label,
            "focused": focused,
            "pane_count": len(self.pane_ids),
            "agent_status": str(rollup(statuses)),
        }


@dataclass(eq=False, kw_only=True)
class Workspace:
    workspace_id: str
    number: int
    label: str
    tab_ids: list[str] = field(default_factory=list)
    active_tab_id: str = ""
    next_tab: int = 1
    next_pane: int = 1

    def to_wire(self, *, focused: bool, pane_count: int, statuses: list[AgentStatus]) -> JsonObject:
        return {
            "workspace_id": self.workspace_id,
            "number": self.number,
            "label": self.label,
            "focused": focused,
            "pane_count": pane_count,
            "tab_count": len(self.tab_ids),
            "active_tab_id": self.active_tab_id,
            "agent_status": str(rollup(statuses)),
        }
