"""One builder per herdr method fleetd uses: params in herdr's spelling, plus the result parser.

Each function returns a :class:`~fleetd.herdr.protocol.Call`; nothing here touches a socket.
Optional params are left out rather than sent as ``null`` (herdr treats both the same).
Names follow herdr's dotted method names in snake_case (``pane.send_input`` -> ``pane_send_input``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetd.errors import InvalidResponseError
from fleetd.herdr.agent_list import AgentListDecoder
from fleetd.herdr.model import (
    AgentInfo,
    AgentStarted,
    AgentStatus,
    PaneInfo,
    Pong,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SessionSnapshot,
    SplitDirection,
    TabCreated,
    Wire,
    WorkspaceCreated,
    items,
    obj,
)
from fleetd.herdr.protocol import Call

__all__ = [
    "PromptWait",
    "agent_focus",
    "agent_get",
    "agent_list",
    "agent_prompt",
    "agent_read",
    "agent_send_keys",
    "agent_start",
    "agent_wait",
    "pane_close",
    "pane_get",
    "pane_list",
    "pane_process_info",
    "pane_read",
    "pane_send_input",
    "pane_send_keys",
    "pane_send_text",
    "pane_split",
    "ping",
    "session_snapshot",
    "tab_create",
    "workspace_create",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptWait:
    """``agent.prompt``'s ``wait``: hold the answer until the agent reaches one of ``until``."""

    until: tuple[AgentStatus, ...] = ()
    timeout_ms: int | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {}
        if self.until:
            wire["until"] = [str(s) for s in self.until]
        if self.timeout_ms is not None:
            wire["timeout_ms"] = self.timeout_ms
        return wire


def _agent(result: Wire) -> AgentInfo:
    return AgentInfo.from_wire(obj(result, "agent"))


def _pane(result: Wire) -> PaneInfo:
    return PaneInfo.from_wire(obj(result, "pane"))


def _read(result: Wire) -> ReadResult:
    return ReadResult.from_wire(obj(result, "read"))


def _agents(result: Wire) -> tuple[AgentInfo, ...]:
    return tuple(AgentInfo.from_wire(a) for a in _listed(result, "agent_list", "agents"))


def _panes(result: Wire) -> tuple[PaneInfo, ...]:
    return tuple(PaneInfo.from_wire(p) for p in _listed(result, "pane_list", "panes"))


def _listed(result: Wire, kind: str, key: str) -> Sequence[Wire]:
    """The list of a ``kind`` answer. An answer of another type, or one without its list, is
    refused: read as an empty list, it would say every member is gone."""
    if result.get("type") != kind:
        raise InvalidResponseError("invalid_response", f"result type must be {kind!r}")
    if key not in result:
        raise InvalidResponseError("invalid_response", f"result has no {key!r}")
    return items(result, key)


def _snapshot(result: Wire) -> SessionSnapshot:
    return SessionSnapshot.from_wire(obj(result, "snapshot"))


def _process_info(result: Wire) -> ProcessInfo:
    return ProcessInfo.from_wire(obj(result, "process_info"))


def _drop_none(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _statuses(until: Iterable[AgentStatus] | None) -> list[str] | None:
    return None if until is None else [str(s) for s in until]


def ping() -> Call[Pong]:
    return Call(method="ping", params={}, parse=Pong.from_wire)


def agent_list(decoder: AgentListDecoder | None = None) -> Call[tuple[AgentInfo, ...]]:
    """``agent.list``, read from the answer's bytes by ``decoder`` (which keeps the agents that
    did not change since the last list it read) or by a fresh one."""
    reader = decoder if decoder is not None else AgentListDecoder()
    return Call(method="agent.list", params={}, parse=_agents, decode=reader.decode)


def agent_get(target: str) -> Call[AgentInfo]:
    return Call(method="agent.get", params={"target": target}, parse=_agent)


def agent_focus(target: str) -> Call[AgentInfo]:
    return Call(method="agent.focus", params={"target": target}, parse=_agent)


def pane_list(workspace_id: str | None = None) -> Call[tuple[PaneInfo, ...]]:
    return Call(method="pane.list", params=_drop_none({"workspace_id": workspace_id}), parse=_panes)


def pane_get(pane_id: str) -> Call[PaneInfo]:
    return Call(method="pane.get", params={"pane_id": pane_id}, parse=_pane)


def session_snapshot() -> Call[SessionSnapshot]:
    return Call(method="session.snapshot", params={}, parse=_snapshot)


def pane_read(pane_id: str, source: ReadSource, lines: int | None = None) -> Call[ReadResult]:
    params = _drop_none({"pane_id": pane_id, "source": str(ReadSource(source)), "lines": lines})
    return Call(method="pane.read", params=params, parse=_read)


def agent_read(target: str, source: ReadSource, lines: int | None = None) -> Call[ReadResult]:
    params = _drop_none({"target": target, "source": str(ReadSource(source)), "lines": lines})
    return Call(method="agent.read", params=params, parse=_read)


def pane_send_text(pane_id: str, text: str) -> Call[None]:
    return Call.ok("pane.send_text", {"pane_id": pane_id, "text": text})


def pane_send_keys(pane_id: str, keys: Sequence[str]) -> Call[None]:
    return Call.ok("pane.send_keys", {"pane_id": pane_id, "keys": list(keys)})


def pane_send_input(pane_id: str, text: str = "", keys: Sequence[str] = ()) -> Call[None]:
    return Call.ok("pane.send_input", {"pane_id": pane_id, "text": text, "keys": list(keys)})


def agent_prompt(target: str, text: str, wait: PromptWait | None = None) -> Call[AgentInfo]:
    params: dict[str, Any] = {"target": target, "text": text}
    if wait is not None:
        params["wait"] = wait.to_wire()
    return Call(method="agent.prompt", params=params, parse=_agent)


def agent_send_keys(target: str, keys: Sequence[str]) -> Call[None]:
    return Call.ok("agent.send_keys", {"target": target, "keys": list(keys)})


def agent_start(
    name: str,
    kind: str,
    pane_id: str,
    args: Sequence[str] = (),
    timeout_ms: int | None = None,
) -> Call[AgentStarted]:
    params = _drop_none(
        {
            "name": name,
            "kind": kind,
            "pane_id": pane_id,
            "args": list(args) or None,
            "timeout_ms": timeout_ms,
        }
    )
    return Call(method="agent.start", params=params, parse=AgentStarted.from_wire)


def workspace_create(
    cwd: str | None = None,
    label: str | None = None,
    env: Mapping[str, str] | None = None,
    focus: bool = False,
) -> Call[WorkspaceCreated]:
    params = _drop_none(
        {"cwd": cwd, "label": label, "env": dict(env) if env else None, "focus": focus}
    )
    return Call(method="workspace.create", params=params, parse=WorkspaceCreated.from_wire)


def tab_create(
    workspace_id: str | None = None,
    cwd: str | None = None,
    label: str | None = None,
    env: Mapping[str, str] | None = None,
    focus: bool = False,
) -> Call[TabCreated]:
    params = _drop_none(
        {
            "workspace_id": workspace_id,
            "cwd": cwd,
            "label": label,
            "env": dict(env) if env else None,
            "focus": focus,
        }
    )
    return Call(method="tab.create", params=params, parse=TabCreated.from_wire)


def pane_split(
    direction: SplitDirection = SplitDirection.RIGHT,
    *,
    target_pane_id: str | None = None,
    workspace_id: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    focus: bool = False,
) -> Call[PaneInfo]:
    params = _drop_none(
        {
            "target_pane_id": target_pane_id,
            "workspace_id": workspace_id,
            "direction": str(SplitDirection(direction)),
            "cwd": cwd,
            "env": dict(env) if env else None,
            "focus": focus,
        }
    )
    return Call(method="pane.split", params=params, parse=_pane)


def pane_close(pane_id: str) -> Call[None]:
    return Call.ok("pane.close", {"pane_id": pane_id})


def pane_process_info(pane_id: str) -> Call[ProcessInfo]:
    return Call(method="pane.process_info", params={"pane_id": pane_id}, parse=_process_info)


def agent_wait(
    target: str,
    until: Iterable[AgentStatus] | None = None,
    timeout_ms: int | None = None,
) -> Call[AgentInfo]:
    params = _drop_none({"target": target, "until": _statuses(until), "timeout_ms": timeout_ms})
    return Call(method="agent.wait", params=params, parse=_agent)
