"""The herdr socket client with one typed method per herdr method, and event subscriptions.

:class:`SimClient` is :class:`~fleetd.herdr.client.HerdrSocketClient` (the same connection
model, deadlines and error translation, in one place) plus what only the tests and the simulator
use: a typed wrapper per herdr method (protocol coverage against the simulator) and the
long-lived ``events.subscribe`` connection (:mod:`fleetd.sim.event_stream`). fleetd's own port,
:class:`~fleetd.herdr.control.HerdrAgentControl`, builds :mod:`~fleetd.herdr.calls` and sends
them through :meth:`~fleetd.herdr.client.HerdrSocketClient.short`; it never calls these.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path

from fleetd.clock import Clock
from fleetd.herdr import calls
from fleetd.herdr.calls import PromptWait
from fleetd.herdr.client import HerdrSocketClient, Limit
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
    WorkspaceCreated,
)
from fleetd.sim.event_stream import EventStream
from fleetd.sim.events import Event, Subscription, events_subscribe

__all__ = ["SimClient"]


class SimClient(HerdrSocketClient):
    """herdr's whole JSON API, typed, over :class:`HerdrSocketClient`'s connections."""

    def __init__(
        self,
        socket_path: str | Path,
        *,
        clock: Clock,
        request_timeout: Limit,
        connect_timeout: Limit = 2.0,
        jitter: Callable[[], float] = random.random,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        reconnect_base: float = 0.25,
        reconnect_cap: float = 10.0,
    ) -> None:
        super().__init__(
            socket_path,
            clock=clock,
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
            new_id=new_id,
        )
        self._jitter = jitter
        self._reconnect_base = reconnect_base
        self._reconnect_cap = reconnect_cap

    # -- health and listing ---------------------------------------------------------------

    async def ping(self) -> Pong:
        return await self.short(calls.ping())

    async def agent_list(self) -> tuple[AgentInfo, ...]:
        return await self.short(calls.agent_list())

    async def agent_get(self, target: str) -> AgentInfo:
        return await self.short(calls.agent_get(target))

    async def agent_focus(self, target: str) -> AgentInfo:
        return await self.short(calls.agent_focus(target))

    async def pane_list(self, workspace_id: str | None = None) -> tuple[PaneInfo, ...]:
        return await self.short(calls.pane_list(workspace_id))

    async def pane_get(self, pane_id: str) -> PaneInfo:
        return await self.short(calls.pane_get(pane_id))

    async def session_snapshot(self) -> SessionSnapshot:
        return await self.short(calls.session_snapshot())

    # -- reading --------------------------------------------------------------------------

    async def pane_read(
        self, pane_id: str, source: ReadSource, lines: int | None = None
    ) -> ReadResult:
        return await self.short(calls.pane_read(pane_id, source, lines))

    async def agent_read(
        self, target: str, source: ReadSource, lines: int | None = None
    ) -> ReadResult:
        return await self.short(calls.agent_read(target, source, lines))

    # -- input ----------------------------------------------------------------------------

    async def pane_send_text(self, pane_id: str, text: str) -> None:
        await self.short(calls.pane_send_text(pane_id, text))

    async def pane_send_keys(self, pane_id: str, keys: Sequence[str]) -> None:
        await self.short(calls.pane_send_keys(pane_id, keys))

    async def pane_send_input(self, pane_id: str, text: str = "", keys: Sequence[str] = ()) -> None:
        await self.short(calls.pane_send_input(pane_id, text, keys))

    async def agent_prompt(
        self,
        target: str,
        text: str,
        wait: PromptWait | None = None,
        *,
        max_wait: float | None = None,
    ) -> AgentInfo:
        """Type a prompt and Enter. With ``wait`` the answer is held (no deadline by default)."""
        limit = self._request_limit() if wait is None and max_wait is None else max_wait
        return await self.call(calls.agent_prompt(target, text, wait), limit=limit)

    async def agent_send_keys(self, target: str, keys: Sequence[str]) -> None:
        await self.short(calls.agent_send_keys(target, keys))

    # -- lifecycle ------------------------------------------------------------------------

    async def agent_start(
        self,
        name: str,
        kind: str,
        pane_id: str,
        args: Sequence[str] = (),
        timeout_ms: int | None = None,
    ) -> AgentStarted:
        return await self.short(calls.agent_start(name, kind, pane_id, args, timeout_ms))

    async def workspace_create(
        self,
        cwd: str | None = None,
        label: str | None = None,
        env: Mapping[str, str] | None = None,
        focus: bool = False,
    ) -> WorkspaceCreated:
        return await self.short(calls.workspace_create(cwd, label, env, focus))

    async def tab_create(
        self,
        workspace_id: str | None = None,
        cwd: str | None = None,
        label: str | None = None,
        env: Mapping[str, str] | None = None,
        focus: bool = False,
    ) -> TabCreated:
        return await self.short(calls.tab_create(workspace_id, cwd, label, env, focus))

    async def pane_split(
        self,
        direction: SplitDirection = SplitDirection.RIGHT,
        *,
        target_pane_id: str | None = None,
        workspace_id: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        focus: bool = False,
    ) -> PaneInfo:
        call = calls.pane_split(
            direction,
            target_pane_id=target_pane_id,
            workspace_id=workspace_id,
            cwd=cwd,
            env=env,
            focus=focus,
        )
        return await self.short(call)

    async def pane_close(self, pane_id: str) -> None:
        await self.short(calls.pane_close(pane_id))

    async def pane_process_info(self, pane_id: str) -> ProcessInfo:
        return await self.short(calls.pane_process_info(pane_id))

    # -- waiting and events ---------------------------------------------------------------

    async def agent_wait(
        self,
        target: str,
        until: Iterable[AgentStatus] | None = None,
        timeout_ms: int | None = None,
        *,
        max_wait: float | None = None,
    ) -> AgentInfo:
        """Hold a connection until the agent reaches ``until``; no client deadline by default."""
        return await self.call(calls.agent_wait(target, until, timeout_ms), limit=max_wait)

    def events_subscribe(
        self,
        subscriptions: Iterable[Subscription],
        *,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        max_attempts: int | None = None,
    ) -> AsyncIterator[Event]:
        """Pushed events on a dedicated connection, reconnecting with jittered backoff.

        After every *re*connection ``on_reconnect`` runs (re-``session.snapshot`` there: events
        may have been missed). ``max_attempts`` consecutive failed reconnects end the iterator
        with :class:`ControlLinkError`; ``None`` retries forever. A subscription herdr refuses
        (for instance ``pane_not_found`` for a pane that closed) is raised, not retried.
        """
        stream = EventStream(
            self,
            events_subscribe(subscriptions),
            clock=self._clock,
            ack_timeout=self._request_limit(),
            jitter=self._jitter,
            base=self._reconnect_base,
            cap=self._reconnect_cap,
            on_reconnect=on_reconnect,
            max_attempts=max_attempts,
        )
        return stream.events()
