"""The port the rest of fleetd uses to drive herdr: :class:`AgentControl`.

The core (bridge, health, runtime) needs a small slice of herdr — list and get agents, ping, read
a pane, prompt / type / press keys, start an agent, make and close panes, ask what process runs
in a pane — and nothing about sockets, ids or frames. :class:`HerdrAgentControl` maps that slice
onto :class:`~fleetd.herdr.client.HerdrSocketClient` one call each, without business branching;
:class:`~fleetd.herdr.fake.FakeAgentControl` is the in-memory double. Both run the same contract
tests (``tests/contract/test_herdr_control_contract.py``).

Errors raised through the port are the fleetd tree only:
:class:`~fleetd.errors.TargetNotFoundError` (target gone), :class:`~fleetd.errors.ControlLinkError`
(link down) and :class:`~fleetd.errors.HerdrError` with herdr's ``code`` (``agent_blocked``,
``agent_not_ready``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from fleetd.clock import Clock
from fleetd.herdr.client import HerdrSocketClient
from fleetd.herdr.model import (
    AgentInfo,
    AgentStarted,
    PaneInfo,
    Pong,
    ProcessInfo,
    ReadResult,
    ReadSource,
    SplitDirection,
)

__all__ = ["AgentControl", "HerdrAgentControl"]


@runtime_checkable
class AgentControl(Protocol):
    """What fleetd asks of herdr."""

    async def ping(self) -> Pong:
        """Cheap liveness of the socket thread (not proof the app loop answers)."""
        ...

    async def list_agents(self) -> tuple[AgentInfo, ...]:
        """Every agent pane, in one call (one per health tick)."""
        ...

    async def get_agent(self, target: str) -> AgentInfo:
        """One agent by live name or hosting pane id."""
        ...

    async def read(
        self, pane_id: str, source: ReadSource = ReadSource.VISIBLE, lines: int | None = None
    ) -> ReadResult:
        """Pane text; health reads use ``visible`` or ``detection``, never large ``recent``."""
        ...

    async def prompt(self, target: str, text: str) -> AgentInfo:
        """Type ``text`` and Enter into an agent; refused while blocked or not ready."""
        ...

    async def send_input(self, pane_id: str, text: str = "", keys: Sequence[str] = ()) -> None:
        """Paste-aware text, then keys, into any pane."""
        ...

    async def send_keys(self, target: str, keys: Sequence[str]) -> None:
        """Keys to an agent (``esc`` interrupts a turn, ``ctrl+c``)."""
        ...

    async def start_agent(
        self,
        *,
        name: str,
        kind: str,
        pane_id: str,
        args: Sequence[str] = (),
        timeout_ms: int | None = None,
    ) -> AgentStarted:
        """Launch an agent in an idle shell pane; answers at once with ``launch_pending``."""
        ...

    async def create_pane(
        self,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        split_from: str | None = None,
        direction: SplitDirection = SplitDirection.RIGHT,
    ) -> PaneInfo:
        """A new shell pane: a new workspace, or a split of ``split_from`` when given."""
        ...

    async def close_pane(self, pane_id: str) -> None:
        """Kill the pane's terminal (and any agent in it)."""
        ...

    async def process_info(self, pane_id: str) -> ProcessInfo:
        """Foreground processes of a pane."""
        ...


class HerdrAgentControl:
    """:class:`AgentControl` over the real socket client, one herdr call per port call."""

    def __init__(self, client: HerdrSocketClient) -> None:
        self.client = client

    @classmethod
    def for_socket(
        cls, socket_path: str | Path, *, clock: Clock, request_timeout: float
    ) -> HerdrAgentControl:
        return cls(HerdrSocketClient(socket_path, clock=clock, request_timeout=request_timeout))

    async def ping(self) -> Pong:
        return await self.client.ping()

    async def list_agents(self) -> tuple[AgentInfo, ...]:
        return await self.client.agent_list()

    async def get_agent(self, target: str) -> AgentInfo:
        return await self.client.agent_get(target)

    async def read(
        self, pane_id: str, source: ReadSource = ReadSource.VISIBLE, lines: int | None = None
    ) -> ReadResult:
        return await self.client.pane_read(pane_id, source, lines)

    async def prompt(self, target: str, text: str) -> AgentInfo:
        return await self.client.agent_prompt(target, text)

    async def send_input(self, pane_id: str, text: str = "", keys: Sequence[str] = ()) -> None:
        await self.client.pane_send_input(pane_id, text, keys)

    async def send_keys(self, target: str, keys: Sequence[str]) -> None:
        await self.client.agent_send_keys(target, keys)

    async def start_agent(
        self,
        *,
        name: str,
        kind: str,
        pane_id: str,
        args: Sequence[str] = (),
        timeout_ms: int | None = None,
    ) -> AgentStarted:
        return await self.client.agent_start(name, kind, pane_id, args, timeout_ms)

    async def create_pane(
        self,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        split_from: str | None = None,
        direction: SplitDirection = SplitDirection.RIGHT,
    ) -> PaneInfo:
        if split_from is None:
            created = await self.client.workspace_create(cwd=cwd, label=label, env=env)
            return created.root_pane
        return await self.client.pane_split(direction, target_pane_id=split_from, cwd=cwd, env=env)

    async def close_pane(self, pane_id: str) -> None:
        await self.client.pane_close(pane_id)

    async def process_info(self, pane_id: str) -> ProcessInfo:
        return await self.client.pane_process_info(pane_id)
