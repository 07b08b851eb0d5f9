"""The port the rest of fleetd uses to drive herdr: :class:`AgentControl`.

The core (bridge, health, runtime) needs a small slice of herdr — list and get agents, ping, read
a pane, prompt / type / press keys, start an agent, make and close panes, ask what process runs
in a pane — and nothing about sockets, ids or frames. :class:`HerdrAgentControl` maps that slice
onto the sans-IO :mod:`~fleetd.herdr.calls`, without business branching, and sends every one
through a single chokepoint, :meth:`HerdrAgentControl.call`;
:class:`~fleetd.herdr.fake.FakeAgentControl` is the in-memory double with its own single
chokepoint. Both run the same contract tests (``tests/contract/test_herdr_control_contract.py``).

Whatever must see every call — the control link's observer
(:class:`~fleetd.runtime.link.LinkObserver`) — is given to :meth:`AgentControl.observe` once and
runs :class:`Around` that chokepoint, labelled with the port method's name.

Errors raised through the port are the fleetd tree only:
:class:`~fleetd.errors.TargetNotFoundError` (target gone), :class:`~fleetd.errors.ControlLinkError`
(link down) and :class:`~fleetd.errors.HerdrError` with herdr's ``code`` (``agent_blocked``,
``agent_not_ready``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from fleetd.clock import Clock
from fleetd.herdr import calls
from fleetd.herdr.agent_list import AgentListDecoder
from fleetd.herdr.client import HerdrSocketClient, Limit
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
from fleetd.herdr.protocol import Call
from fleetd.observe import Around, direct

__all__ = ["AgentControl", "HerdrAgentControl", "HerdrCall"]

T = TypeVar("T")


class HerdrCall(Protocol):
    """Send one herdr :class:`~fleetd.herdr.protocol.Call` and return its parsed result."""

    async def __call__(self, call: Call[T], /) -> T: ...


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

    async def labelled_panes(self, label: str) -> tuple[PaneInfo, ...]:
        """The panes of every workspace labelled ``label`` (one ``session.snapshot``)."""
        ...

    async def process_info(self, pane_id: str) -> ProcessInfo:
        """Foreground processes of a pane."""
        ...

    def observe(self, around: Around) -> None:
        """Run every later call through ``around`` (at the adapter's one chokepoint)."""
        ...


class HerdrAgentControl:
    """:class:`AgentControl` over herdr: every port method builds one
    :class:`~fleetd.herdr.protocol.Call` and runs it through :meth:`call`."""

    def __init__(self, send: HerdrCall) -> None:
        self._send = send
        self._around: Around = direct
        self._agents = AgentListDecoder()  # the last list's agents, reused while unchanged

    @classmethod
    def over(cls, client: HerdrSocketClient) -> HerdrAgentControl:
        """Port calls on ``client``, each bounded by its request timeout."""
        return cls(client.short)

    @classmethod
    def for_socket(
        cls,
        socket_path: str | Path,
        *,
        clock: Clock,
        request_timeout: Limit,
        connect_timeout: Limit = 2.0,
    ) -> HerdrAgentControl:
        """Port calls on a socket client whose watchdogs may be read live (hot config keys)."""
        return cls.over(
            HerdrSocketClient(
                socket_path,
                clock=clock,
                request_timeout=request_timeout,
                connect_timeout=connect_timeout,
            )
        )

    def observe(self, around: Around) -> None:
        self._around = around

    async def call(self, method: str, call: Call[T]) -> T:
        """The chokepoint: port ``method`` sends ``call``, seen once by the observer."""
        return await self._around(method, self._send(call))

    async def ping(self) -> Pong:
        return await self.call("ping", calls.ping())

    async def list_agents(self) -> tuple[AgentInfo, ...]:
        return await self.call("list_agents", calls.agent_list(self._agents))

    async def get_agent(self, target: str) -> AgentInfo:
        return await self.call("get_agent", calls.agent_get(target))

    async def read(
        self, pane_id: str, source: ReadSource = ReadSource.VISIBLE, lines: int | None = None
    ) -> ReadResult:
        return await self.call("read", calls.pane_read(pane_id, source, lines))

    async def prompt(self, target: str, text: str) -> AgentInfo:
        return await self.call("prompt", calls.agent_prompt(target, text))

    async def send_input(self, pane_id: str, text: str = "", keys: Sequence[str] = ()) -> None:
        await self.call("send_input", calls.pane_send_input(pane_id, text, keys))

    async def send_keys(self, target: str, keys: Sequence[str]) -> None:
        await self.call("send_keys", calls.agent_send_keys(target, keys))

    async def start_agent(
        self,
        *,
        name: str,
        kind: str,
        pane_id: str,
        args: Sequence[str] = (),
        timeout_ms: int | None = None,
    ) -> AgentStarted:
        return await self.call(
            "start_agent", calls.agent_start(name, kind, pane_id, args, timeout_ms)
        )

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
            created = await self.call(
                "create_pane", calls.workspace_create(cwd=cwd, label=label, env=env)
            )
            return created.root_pane
        split = calls.pane_split(direction, target_pane_id=split_from, cwd=cwd, env=env)
        return await self.call("create_pane", split)

    async def close_pane(self, pane_id: str) -> None:
        await self.call("close_pane", calls.pane_close(pane_id))

    async def labelled_panes(self, label: str) -> tuple[PaneInfo, ...]:
        snapshot = await self.call("labelled_panes", calls.session_snapshot())
        spaces = {w.workspace_id for w in snapshot.workspaces if w.label == label}
        return tuple(pane for pane in snapshot.panes if pane.workspace_id in spaces)

    async def process_info(self, pane_id: str) -> ProcessInfo:
        return await self.call("process_info", calls.pane_process_info(pane_id))
