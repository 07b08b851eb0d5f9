"""An in-memory :class:`~fleetd.herdr.control.AgentControl` for unit tests of the core.

Tests put agents and shell panes in, set their status and screen, and read back every call the
code under test made (:attr:`FakeAgentControl.calls`; none with ``keep_calls=False``). The fake
refuses what herdr refuses — unknown targets as ``*_not_found``, prompts to blocked
(``agent_blocked``) or launching (``agent_not_ready``) agents, bad names and kinds on start — and
can be told to fail like a broken link (:meth:`FakeAgentControl.link_down`) or with any error
for chosen methods (:meth:`FakeAgentControl.fail`). It never changes an agent's status by itself
except that a started agent becomes ready at once unless ``ready_on_start=False``: status is the
test's to set.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from fleetd.errors import ControlLinkError, FleetdError, HerdrError, TargetNotFoundError
from fleetd.herdr.model import (
    AgentInfo,
    AgentStarted,
    AgentStatus,
    ForegroundProcess,
    PaneInfo,
    Pong,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SplitDirection,
)
from fleetd.herdr.rules import (
    canonical_kind,
    is_valid_agent_name,
    is_valid_start_timeout,
)
from fleetd.observe import Around, direct

__all__ = ["FakeAgentControl", "FakeCall"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeCall:
    """One recorded port call."""

    method: str
    args: Mapping[str, Any]


@dataclass(slots=True, kw_only=True)
class _Pane:
    info: PaneInfo
    env: dict[str, str] = field(default_factory=dict)
    screen: str = "$ "
    agent: AgentInfo | None = None


def _port(
    body: Callable[Concatenate[FakeAgentControl, P], T],
) -> Callable[Concatenate[FakeAgentControl, P], Coroutine[Any, Any, T]]:
    """A port method of the fake: its body runs through the one chokepoint, :meth:`_call`."""

    async def run(fake: FakeAgentControl, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return body(fake, *args, **kwargs)

    async def method(fake: FakeAgentControl, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await fake._call(body.__name__, run(fake, *args, **kwargs))

    return method


class FakeAgentControl:
    """In-memory herdr for tests; see the module docstring."""

    def __init__(
        self, *, ready_on_start: bool = True, version: str = "0.8.2", keep_calls: bool = True
    ) -> None:
        self.calls: list[FakeCall] = []
        self.keep_calls, self.ready_on_start = keep_calls, ready_on_start
        self._version = version
        self._panes: dict[str, _Pane] = {}
        self._names: dict[str, str] = {}  # agent name -> pane id of the first pane with it
        self._workspaces = itertools.count(1)
        self._labels: dict[str, str] = {}  # workspace id -> its label
        self._terminals = itertools.count(1)
        self._failures: dict[str | tuple[str, str] | None, FleetdError] = {}
        self._around: Around = direct

    # -- test controls --------------------------------------------------------------------

    def add_pane(
        self,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        workspace_id: str | None = None,
    ) -> PaneInfo:
        """A new shell pane in a new workspace (labelled ``label`` when given). ``workspace_id``
        names it as herdr that restarted does, numbering its workspaces from the start again (its
        pane then has the id a pane of before the restart had)."""
        ws = workspace_id or f"w{next(self._workspaces)}"
        if label:
            self._labels[ws] = label
        info = PaneInfo(
            pane_id=f"{ws}:p1",
            terminal_id=f"term_{next(self._terminals):012x}",
            workspace_id=ws,
            tab_id=f"{ws}:t1",
            cwd=cwd,
        )
        self._panes[info.pane_id] = _Pane(info=info, env=dict(env or {}))
        return info

    def add_agent(
        self,
        name: str | None = None,
        *,
        kind: str = "claude",
        status: AgentStatus = AgentStatus.IDLE,
        cwd: str | None = None,
        screen: str = "",
        env: Mapping[str, str] | None = None,
        ready: bool = True,
    ) -> AgentInfo:
        """An agent already running in its own pane."""
        pane = self.add_pane(cwd=cwd, env=env)
        agent = AgentInfo(
            terminal_id=pane.terminal_id,
            agent_status=status,
            workspace_id=pane.workspace_id,
            tab_id=pane.tab_id,
            pane_id=pane.pane_id,
            name=name,
            agent=kind,
            cwd=cwd,
            interactive_ready=ready,
            launch_pending=not ready,
        )
        self._panes[pane.pane_id].agent = agent
        self._panes[pane.pane_id].screen = screen
        self._index(agent)
        return agent

    def set_status(self, target: str, status: AgentStatus) -> AgentInfo:
        """Change an agent's live status (``state_change_seq`` moves when it changes)."""
        pane = self._agent_pane(target)
        assert pane.agent is not None
        if pane.agent.agent_status != status:
            pane.agent = dataclasses.replace(
                pane.agent, agent_status=status, state_change_seq=pane.agent.state_change_seq + 1
            )
        return pane.agent

    def set_ready(self, target: str, ready: bool = True) -> AgentInfo:
        """Finish (or undo) an agent's launch."""
        pane = self._agent_pane(target)
        assert pane.agent is not None
        pane.agent = dataclasses.replace(
            pane.agent, interactive_ready=ready, launch_pending=not ready
        )
        return pane.agent

    def fail_launch(self, target: str) -> AgentInfo:
        """herdr gave up on the launch: no longer pending, never interactive."""
        pane = self._agent_pane(target)
        assert pane.agent is not None
        pane.agent = dataclasses.replace(pane.agent, interactive_ready=False, launch_pending=False)
        return pane.agent

    def set_screen(self, pane_id: str, text: str) -> None:
        self._pane(pane_id).screen = text

    def env_of(self, pane_id: str) -> Mapping[str, str]:
        """The env a pane was created with."""
        return dict(self._pane(pane_id).env)

    def remove(self, target: str) -> None:
        """The pane (and its agent) disappears: later calls on it get ``*_not_found``."""
        pane = self._panes.get(target) or self._agent_pane(target)
        self._drop(pane.info.pane_id)

    def link_down(self) -> None:
        """Every call fails as if herdr's socket were gone."""
        self._failures[None] = ControlLinkError("connect_failed", "fake link down")

    def link_up(self) -> None:
        self._failures.pop(None, None)

    def fail(self, method: str, error: FleetdError | None, *, target: str | None = None) -> None:
        """Make one port method (``"prompt"``, ``"list_agents"``, ...) raise ``error`` — for
        every call, or with ``target`` only for calls on that target."""
        key: str | tuple[str, str] = method if target is None else (method, target)
        if error is None:
            self._failures.pop(key, None)
        else:
            self._failures[key] = error

    def calls_to(self, method: str) -> list[FakeCall]:
        return [c for c in self.calls if c.method == method]

    # -- lookups --------------------------------------------------------------------------

    def _record(self, method: str, **args: Any) -> None:
        if self.keep_calls:
            self.calls.append(FakeCall(method=method, args=args))
        error = (
            self._failures.get(None)
            or self._failures.get((method, str(args.get("target"))))
            or self._failures.get(method)
        )
        if error is not None:
            raise error

    def _pane(self, pane_id: str, code: str = "pane_not_found") -> _Pane:
        pane = self._panes.get(pane_id)
        if pane is None:
            raise TargetNotFoundError(code, f"pane {pane_id} not found")
        return pane

    def _agent_pane(self, target: str) -> _Pane:
        named = self._panes.get(self._names.get(target, ""))
        if named is not None and named.agent is not None and named.agent.name == target:
            return named
        for pane in self._panes.values():
            agent = pane.agent
            if agent is not None and target in (agent.name, agent.pane_id):
                return pane
        raise TargetNotFoundError("agent_not_found", f"agent {target} not found")

    def _index(self, agent: AgentInfo) -> None:
        if agent.name is not None:
            self._names.setdefault(agent.name, agent.pane_id)

    def _drop(self, pane_id: str) -> None:
        """Remove a pane (its workspace's label with its last pane); its agent's name goes to
        the next pane with that name, if any."""
        pane = self._panes.pop(pane_id)
        workspace = pane.info.workspace_id
        if not any(p.info.workspace_id == workspace for p in self._panes.values()):
            self._labels.pop(workspace, None)
        agent = pane.agent
        if agent is not None and agent.name and self._names.get(agent.name) == pane_id:
            del self._names[agent.name]
            for other in self._panes.values():
                if other.agent is not None:
                    self._index(other.agent)

    # -- the port -------------------------------------------------------------------------

    def observe(self, around: Around) -> None:
        self._around = around

    async def _call(self, method: str, body: Coroutine[Any, Any, T]) -> T:
        """The chokepoint every port method runs through, seen once by the observer."""
        return await self._around(method, body)

    @_port
    def ping(self) -> Pong:
        self._record("ping")
        return Pong(version=self._version, protocol=20)

    @_port
    def list_agents(self) -> tuple[AgentInfo, ...]:
        self._record("list_agents")
        return tuple(p.agent for p in self._panes.values() if p.agent is not None)

    @_port
    def get_agent(self, target: str) -> AgentInfo:
        self._record("get_agent", target=target)
        agent = self._agent_pane(target).agent
        assert agent is not None
        return agent

    @_port
    def read(
        self, pane_id: str, source: ReadSource = ReadSource.VISIBLE, lines: int | None = None
    ) -> ReadResult:
        self._record("read", pane_id=pane_id, source=source, lines=lines)
        rows = self._pane(pane_id).screen.split("\n")
        kept = rows if lines is None else rows[-lines:] if lines else []
        return ReadResult(
            pane_id=pane_id, source=source, text="\n".join(kept), truncated=len(kept) < len(rows)
        )

    @_port
    def prompt(self, target: str, text: str) -> AgentInfo:
        self._record("prompt", target=target, text=text)
        agent = self._agent_pane(target).agent
        assert agent is not None
        if not text:
            raise HerdrError("empty_agent_prompt", "prompt text is empty", method="agent.prompt")
        if agent.launch_pending or not agent.interactive_ready:
            raise HerdrError("agent_not_ready", "agent is not ready", method="agent.prompt")
        if agent.agent_status is AgentStatus.BLOCKED:
            raise HerdrError("agent_blocked", "agent is blocked", method="agent.prompt")
        return agent

    @_port
    def send_input(self, pane_id: str, text: str = "", keys: Sequence[str] = ()) -> None:
        self._record("send_input", pane_id=pane_id, text=text, keys=tuple(keys))
        self._pane(pane_id)

    @_port
    def send_keys(self, target: str, keys: Sequence[str]) -> None:
        self._record("send_keys", target=target, keys=tuple(keys))
        self._agent_pane(target)

    @_port
    def start_agent(
        self,
        *,
        name: str,
        kind: str,
        pane_id: str,
        args: Sequence[str] = (),
        timeout_ms: int | None = None,
    ) -> AgentStarted:
        self._record(
            "start_agent",
            name=name,
            kind=kind,
            pane_id=pane_id,
            args=tuple(args),
            timeout_ms=timeout_ms,
        )
        label = _check_start(name, kind, timeout_ms)
        pane = self._pane(pane_id, "agent_pane_not_found")
        if pane.agent is not None:
            raise HerdrError("agent_pane_busy", "pane already hosts an agent", method="agent.start")
        if name in self._names:
            raise HerdrError("agent_name_taken", f"{name} is taken", method="agent.start")
        started = AgentInfo(
            terminal_id=pane.info.terminal_id,
            agent_status=AgentStatus.UNKNOWN,
            workspace_id=pane.info.workspace_id,
            tab_id=pane.info.tab_id,
            pane_id=pane_id,
            name=name,
            agent=label,
            cwd=pane.info.cwd,
            launch_pending=True,
        )
        pane.agent = started
        self._index(started)
        if self.ready_on_start:
            pane.agent = dataclasses.replace(
                started, agent_status=AgentStatus.IDLE, launch_pending=False, interactive_ready=True
            )
        return AgentStarted(agent=started, argv=(label, *args))

    @_port
    def create_pane(
        self,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        split_from: str | None = None,
        direction: SplitDirection = SplitDirection.RIGHT,
    ) -> PaneInfo:
        self._record(
            "create_pane",
            cwd=cwd,
            env=dict(env or {}),
            label=label,
            split_from=split_from,
            direction=direction,
        )
        if split_from is None:
            return self.add_pane(cwd=cwd, env=env, label=label)
        origin = self._pane(split_from).info
        siblings = sum(1 for p in self._panes.values() if p.info.tab_id == origin.tab_id)
        info = dataclasses.replace(
            origin,
            pane_id=f"{origin.workspace_id}:p{siblings + 1}",
            terminal_id=f"term_{next(self._terminals):012x}",
            cwd=cwd,
            focused=False,
        )
        self._panes[info.pane_id] = _Pane(info=info, env=dict(env or {}))
        return info

    @_port
    def close_pane(self, pane_id: str) -> None:
        self._record("close_pane", pane_id=pane_id)
        self._pane(pane_id)
        self._drop(pane_id)

    @_port
    def labelled_panes(self, label: str) -> tuple[PaneInfo, ...]:
        self._record("labelled_panes", label=label)
        return tuple(
            p.info for p in self._panes.values() if self._labels.get(p.info.workspace_id) == label
        )

    @_port
    def process_info(self, pane_id: str) -> ProcessInfo:
        self._record("process_info", pane_id=pane_id)
        pane = self._pane(pane_id)
        shell = ForegroundProcess(pid=1000, name="bash", argv=("bash",), cwd=pane.info.cwd)
        if pane.agent is None or pane.agent.agent is None:
            return ProcessInfo(pane_id=pane_id, shell_pid=1000, foreground_processes=(shell,))
        proc = ForegroundProcess(
            pid=1001, name=pane.agent.agent, argv=(pane.agent.agent,), cwd=pane.info.cwd
        )
        return ProcessInfo(pane_id=pane_id, shell_pid=1000, foreground_processes=(proc,))


def _check_start(name: str, kind: str, timeout_ms: int | None) -> str:
    if not is_valid_agent_name(name):
        raise HerdrError("invalid_agent_name", f"bad agent name {name!r}", method="agent.start")
    label = canonical_kind(kind)
    if label is None:
        raise HerdrError("unsupported_agent_kind", f"unknown kind {kind!r}", method="agent.start")
    if timeout_ms is not None and not is_valid_start_timeout(timeout_ms):
        raise HerdrError("invalid_agent_timeout", "timeout out of range", method="agent.start")
    return label
