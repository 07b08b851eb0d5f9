"""Typed values for what herdr answers, parsed leniently at the edge.

herdr's docs ask clients to "handle unknown fields gracefully", and the JSON API grows fields
between releases (protocol 20 -> 22 added several). So every ``from_wire`` here reads only the
fields fleetd uses, ignores the rest, fills documented defaults for optional ones, and raises
:class:`~fleetd.errors.InvalidResponseError` (code ``invalid_response``) only when a field fleetd
cannot do without is missing or has the wrong type. An unknown ``agent_status`` spelling maps
to :attr:`AgentStatus.UNKNOWN` rather than failing: ``unknown`` is never proof of anything, so
a future status can only make fleetd more careful, not crash it.

Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar, dataclass_transform

from fleetd.errors import InvalidResponseError

__all__ = [
    "AgentInfo",
    "AgentStarted",
    "AgentStatus",
    "ForegroundProcess",
    "PaneInfo",
    "Pong",
    "ProcessInfo",
    "ReadResult",
    "ReadSource",
    "SessionSnapshot",
    "SplitDirection",
    "TabCreated",
    "TabInfo",
    "WorkspaceCreated",
    "WorkspaceInfo",
]

Wire = Mapping[str, Any]


class AgentStatus(StrEnum):
    """herdr's live status of an agent pane (exact wire spelling)."""

    IDLE = "idle"
    WORKING = "working"
    BLOCKED = "blocked"
    DONE = "done"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: object) -> AgentStatus:
        """The status for a wire value; anything unrecognised is ``UNKNOWN``."""
        if isinstance(value, str) and value in cls._value2member_map_:
            return cls(value)
        return cls.UNKNOWN

    @property
    def at_prompt(self) -> bool:
        """``idle`` and ``done`` both mean the agent sits at its prompt, ready for input."""
        return self in (AgentStatus.IDLE, AgentStatus.DONE)


class ReadSource(StrEnum):
    """What ``pane.read`` / ``agent.read`` return (snake_case on the socket)."""

    VISIBLE = "visible"
    RECENT = "recent"
    RECENT_UNWRAPPED = "recent_unwrapped"
    DETECTION = "detection"


class SplitDirection(StrEnum):
    """Where ``pane.split`` puts the new pane."""

    RIGHT = "right"
    DOWN = "down"


def _bad(key: str, want: str) -> InvalidResponseError:
    return InvalidResponseError("invalid_response", f"field {key!r} must be {want}")


def req_str(data: Wire, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _bad(key, "a string")
    return value


def opt_str(data: Wire, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def flag(data: Wire, key: str) -> bool:
    return data.get(key) is True


def count(data: Wire, key: str, default: int = 0) -> int:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(key, "an integer")
    return value


def obj(data: Wire, key: str) -> Wire:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise _bad(key, "an object")
    return value


def items(data: Wire, key: str) -> Sequence[Wire]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise _bad(key, "a list of objects")
    return value


def strings(data: Wire, key: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise _bad(key, "a list of strings")
    return tuple(v for v in value if isinstance(v, str))


_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def _listed(cls: type[_T]) -> type[_T]:
    """A keyword-only, slotted, value-compared and hashable dataclass, frozen for the type checker
    (mypy refuses any assignment to a field) and a plain slotted dataclass at run time.

    ``agent.list`` is read every health tick, and an agent whose line changed is built anew: at
    10,000 agents with a tenth changed, a thousand a tick. A frozen dataclass assigns each of its
    fields through ``object.__setattr__``; :class:`AgentInfo` took 3.1 µs to build that way and
    0.8 µs as a plain slotted one (``benchmarks/README.md``). The same recipe as health's
    ``@fact`` values."""
    return dataclass(slots=True, kw_only=True, unsafe_hash=True)(cls)


@_listed
class AgentInfo:
    """One agent as ``agent.list`` / ``agent.get`` describe it."""

    terminal_id: str
    agent_status: AgentStatus
    workspace_id: str
    tab_id: str
    pane_id: str
    focused: bool = False
    revision: int = 0
    state_change_seq: int = 0
    name: str | None = None
    agent: str | None = None
    title: str | None = None
    launch_pending: bool = False
    interactive_ready: bool = False
    cwd: str | None = None

    @classmethod
    def from_wire(cls, data: Wire) -> AgentInfo:
        return cls(
            terminal_id=req_str(data, "terminal_id"),
            agent_status=AgentStatus.parse(data.get("agent_status")),
            workspace_id=req_str(data, "workspace_id"),
            tab_id=req_str(data, "tab_id"),
            pane_id=req_str(data, "pane_id"),
            focused=flag(data, "focused"),
            revision=count(data, "revision"),
            state_change_seq=count(data, "state_change_seq"),
            name=opt_str(data, "name"),
            agent=opt_str(data, "agent"),
            title=opt_str(data, "title"),
            launch_pending=flag(data, "launch_pending"),
            interactive_ready=flag(data, "interactive_ready"),
            cwd=opt_str(data, "cwd"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PaneInfo:
    """One pane (shell or agent) as ``pane.list`` / ``pane.get`` describe it."""

    pane_id: str
    terminal_id: str
    workspace_id: str
    tab_id: str
    focused: bool = False
    agent_status: AgentStatus = AgentStatus.UNKNOWN
    revision: int = 0
    cwd: str | None = None
    label: str | None = None
    agent: str | None = None
    title: str | None = None

    @classmethod
    def from_wire(cls, data: Wire) -> PaneInfo:
        return cls(
            pane_id=req_str(data, "pane_id"),
            terminal_id=req_str(data, "terminal_id"),
            workspace_id=req_str(data, "workspace_id"),
            tab_id=req_str(data, "tab_id"),
            focused=flag(data, "focused"),
            agent_status=AgentStatus.parse(data.get("agent_status")),
            revision=count(data, "revision"),
            cwd=opt_str(data, "cwd"),
            label=opt_str(data, "label"),
            agent=opt_str(data, "agent"),
            title=opt_str(data, "title"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TabInfo:
    tab_id: str
    workspace_id: str
    number: int = 0
    label: str = ""
    focused: bool = False
    pane_count: int = 0
    agent_status: AgentStatus = AgentStatus.UNKNOWN

    @classmethod
    def from_wire(cls, data: Wire) -> TabInfo:
        return cls(
            tab_id=req_str(data, "tab_id"),
            workspace_id=req_str(data, "workspace_id"),
            number=count(data, "number"),
            label=opt_str(data, "label") or "",
            focused=flag(data, "focused"),
            pane_count=count(data, "pane_count"),
            agent_status=AgentStatus.parse(data.get("agent_status")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceInfo:
    workspace_id: str
    number: int = 0
    label: str = ""
    focused: bool = False
    pane_count: int = 0
    tab_count: int = 0
    active_tab_id: str | None = None
    agent_status: AgentStatus = AgentStatus.UNKNOWN

    @classmethod
    def from_wire(cls, data: Wire) -> WorkspaceInfo:
        return cls(
            workspace_id=req_str(data, "workspace_id"),
            number=count(data, "number"),
            label=opt_str(data, "label") or "",
            focused=flag(data, "focused"),
            pane_count=count(data, "pane_count"),
            tab_count=count(data, "tab_count"),
            active_tab_id=opt_str(data, "active_tab_id"),
            agent_status=AgentStatus.parse(data.get("agent_status")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    """Text read from a pane; ``truncated`` says more lines existed than were returned."""

    pane_id: str
    source: ReadSource
    text: str
    truncated: bool = False

    @classmethod
    def from_wire(cls, data: Wire) -> ReadResult:
        source = data.get("source")
        if not isinstance(source, str) or source not in ReadSource._value2member_map_:
            raise _bad("source", "a read source")
        parsed = ReadSource(source)
        return cls(
            pane_id=req_str(data, "pane_id"),
            source=parsed,
            text=req_str(data, "text"),
            truncated=flag(data, "truncated"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Pong:
    """herdr's answer to ``ping``; logged, never compared for equality."""

    version: str
    protocol: int

    @classmethod
    def from_wire(cls, data: Wire) -> Pong:
        return cls(version=req_str(data, "version"), protocol=count(data, "protocol"))


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSnapshot:
    """The whole herd in one call (``session.snapshot``)."""

    version: str
    protocol: int
    focused_workspace_id: str | None = None
    focused_tab_id: str | None = None
    focused_pane_id: str | None = None
    workspaces: tuple[WorkspaceInfo, ...] = ()
    tabs: tuple[TabInfo, ...] = ()
    panes: tuple[PaneInfo, ...] = ()
    agents: tuple[AgentInfo, ...] = ()

    @classmethod
    def from_wire(cls, data: Wire) -> SessionSnapshot:
        return cls(
            version=req_str(data, "version"),
            protocol=count(data, "protocol"),
            focused_workspace_id=opt_str(data, "focused_workspace_id"),
            focused_tab_id=opt_str(data, "focused_tab_id"),
            focused_pane_id=opt_str(data, "focused_pane_id"),
            workspaces=tuple(WorkspaceInfo.from_wire(w) for w in items(data, "workspaces")),
            tabs=tuple(TabInfo.from_wire(t) for t in items(data, "tabs")),
            panes=tuple(PaneInfo.from_wire(p) for p in items(data, "panes")),
            agents=tuple(AgentInfo.from_wire(a) for a in items(data, "agents")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ForegroundProcess:
    pid: int
    name: str
    argv: tuple[str, ...] = ()
    cwd: str | None = None

    @classmethod
    def from_wire(cls, data: Wire) -> ForegroundProcess:
        return cls(
            pid=count(data, "pid"),
            name=req_str(data, "name"),
            argv=strings(data, "argv"),
            cwd=opt_str(data, "cwd"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessInfo:
    """The processes behind a pane (``pane.process_info``): tells a dead agent from a live one."""

    pane_id: str
    shell_pid: int | None = None
    foreground_process_group_id: int | None = None
    tty: str | None = None
    foreground_processes: tuple[ForegroundProcess, ...] = ()

    @classmethod
    def from_wire(cls, data: Wire) -> ProcessInfo:
        shell = data.get("shell_pid")
        group = data.get("foreground_process_group_id")
        return cls(
            pane_id=req_str(data, "pane_id"),
            shell_pid=shell if isinstance(shell, int) else None,
            foreground_process_group_id=group if isinstance(group, int) else None,
            tty=opt_str(data, "tty"),
            foreground_processes=tuple(
                ForegroundProcess.from_wire(p) for p in items(data, "foreground_processes")
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStarted:
    """``agent.start`` answers at once with ``launch_pending``; poll until ``interactive_ready``."""

    agent: AgentInfo
    argv: tuple[str, ...] = ()

    @classmethod
    def from_wire(cls, data: Wire) -> AgentStarted:
        return cls(agent=AgentInfo.from_wire(obj(data, "agent")), argv=strings(data, "argv"))


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceCreated:
    workspace: WorkspaceInfo
    tab: TabInfo
    root_pane: PaneInfo

    @classmethod
    def from_wire(cls, data: Wire) -> WorkspaceCreated:
        return cls(
            workspace=WorkspaceInfo.from_wire(obj(data, "workspace")),
            tab=TabInfo.from_wire(obj(data, "tab")),
            root_pane=PaneInfo.from_wire(obj(data, "root_pane")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TabCreated:
    tab: TabInfo
    root_pane: PaneInfo

    @classmethod
    def from_wire(cls, data: Wire) -> TabCreated:
        return cls(
            tab=TabInfo.from_wire(obj(data, "tab")),
            root_pane=PaneInfo.from_wire(obj(data, "root_pane")),
        )
