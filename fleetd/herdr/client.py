"""The asyncio adapter for herdr's JSON socket: one request per connection, never a hang.

Each call opens the Unix socket, writes one request line, reads one answer line and closes,
which is herdr's own connection model (a second request on a connection is never answered).
Connecting is bounded by ``connect_timeout``; the exchange by ``request_timeout`` unless the call
is a blocking wait (``agent.wait``, ``agent.prompt`` with ``wait``), which has no client deadline
unless the caller passes one. Every way the link can fail — socket missing, refused, reset, EOF
before an answer, deadline passed — becomes :class:`~fleetd.errors.ControlLinkError`, in one
place (:meth:`HerdrSocketClient.call`). Deadlines run on the injected :class:`~fleetd.clock.Clock`.

Frames are built and parsed by :mod:`fleetd.herdr.protocol` / :mod:`fleetd.herdr.calls`; the
long-lived subscription connection is :mod:`fleetd.herdr.stream`. fleetd's port sends through
:meth:`HerdrSocketClient.short` only; the typed per-method wrappers below it are protocol coverage
for the tests.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from fleetd.clock import Clock
from fleetd.errors import ControlLinkError, LinkCause
from fleetd.herdr import calls
from fleetd.herdr.calls import PromptWait
from fleetd.herdr.deadline import bounded
from fleetd.herdr.events import Event, Subscription
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
from fleetd.herdr.protocol import Call
from fleetd.herdr.stream import EventStream

__all__ = ["HerdrSocketClient", "link_cause"]

T = TypeVar("T")
Limit = float | Callable[[], float]
"""A watchdog in seconds: a number, or a function read at each call (a hot config key)."""
_READ_LIMIT = 32 * 1024 * 1024  # a 1000-line pane read fits with room to spare


class HerdrSocketClient:
    """herdr's JSON API over a Unix socket (see the module docstring for the connection model)."""

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
        self.socket_path = Path(socket_path)
        self._clock = clock
        self._request_limit = _supplier(request_timeout)
        self._connect_limit = _supplier(connect_timeout)
        self._jitter = jitter
        self._new_id = new_id
        self._reconnect_base = reconnect_base
        self._reconnect_cap = reconnect_cap

    async def open(self, method: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A fresh connection, bounded by ``connect_timeout``."""
        try:
            return await bounded(
                self._clock,
                asyncio.open_unix_connection(str(self.socket_path), limit=_READ_LIMIT),
                self._connect_limit(),
                "connect_timeout",
                discard=_hang_up,
            )
        except ControlLinkError as exc:
            raise ControlLinkError(exc.code, exc.message, method=method, cause=exc.cause) from None
        except OSError as exc:
            raise ControlLinkError(
                "connect_failed", type(exc).__name__, method=method, cause=link_cause(exc)
            ) from None

    async def call(self, call: Call[T], *, limit: float | None) -> T:
        """Send one request on its own connection and parse the one answer."""
        request_id = self._new_id()
        line = call.request_line(request_id)
        reader, writer = await self.open(call.method)
        try:
            answer = await bounded(
                self._clock, _exchange(reader, writer, line), limit, "request_timeout"
            )
        except ControlLinkError as exc:
            raise ControlLinkError(
                exc.code, exc.message, method=call.method, cause=exc.cause
            ) from None
        except (OSError, ValueError) as exc:
            code = "response_too_large" if isinstance(exc, ValueError) else "connection_lost"
            raise ControlLinkError(
                code, type(exc).__name__, method=call.method, cause=link_cause(exc)
            ) from None
        finally:
            writer.close()
        if not answer:
            raise ControlLinkError(
                "connection_lost",
                "closed before answering",
                method=call.method,
                cause=LinkCause.CLOSED,
            )
        return call.parse_response(answer, request_id)

    async def short(self, call: Call[T]) -> T:
        """:meth:`call` bounded by ``request_timeout``: what every port call of
        :class:`~fleetd.herdr.control.HerdrAgentControl` sends through."""
        return await self.call(call, limit=self._request_limit())

    # -- protocol coverage ----------------------------------------------------------------
    # One typed method per herdr method, for the tests that drive the whole protocol against the
    # simulator (tests/integration). fleetd itself never calls them: its port builds the
    # :mod:`~fleetd.herdr.calls` and sends them through :meth:`short`.

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
            calls.events_subscribe(subscriptions),
            clock=self._clock,
            ack_timeout=self._request_limit(),
            jitter=self._jitter,
            base=self._reconnect_base,
            cap=self._reconnect_cap,
            on_reconnect=on_reconnect,
            max_attempts=max_attempts,
        )
        return stream.events()

    def next_id(self) -> str:
        """A fresh request id (uuid4 hex)."""
        return self._new_id()


def _supplier(limit: Limit) -> Callable[[], float]:
    return limit if callable(limit) else lambda: limit


def _hang_up(connection: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
    connection[1].close()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, line: bytes
) -> bytes:
    writer.write(line)
    await writer.drain()
    return await reader.readline()


#: The cause class of each OS error the socket can raise (subclasses first).
_OS_CAUSES: tuple[tuple[type[BaseException], LinkCause], ...] = (
    (ConnectionRefusedError, LinkCause.REFUSED),
    (FileNotFoundError, LinkCause.SOCKET_MISSING),
    (PermissionError, LinkCause.PERMISSION),
    (ConnectionError, LinkCause.RESET),  # reset, aborted, broken pipe
    (TimeoutError, LinkCause.TIMEOUT),
    (ValueError, LinkCause.TOO_LARGE),  # the reader's line limit
)


def link_cause(exc: BaseException) -> LinkCause:
    """The bounded class of a foreign error on herdr's socket (what a log may say of it)."""
    for kind, cause in _OS_CAUSES:
        if isinstance(exc, kind):
            return cause
    return LinkCause.OTHER
