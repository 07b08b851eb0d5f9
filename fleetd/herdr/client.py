"""The asyncio adapter for herdr's JSON socket: one request per connection, never a hang.

Each call opens the Unix socket, writes one request line, reads one answer line and closes,
which is herdr's own connection model (a second request on a connection is never answered).
Connecting is bounded by ``connect_timeout``; the exchange by ``request_timeout`` unless the call
is a blocking wait (``agent.wait``, ``agent.prompt`` with ``wait``), which has no client deadline
unless the caller passes one. Every way the link can fail — socket missing, refused, reset, EOF
before an answer, deadline passed — becomes :class:`~fleetd.errors.ControlLinkError`, in one
place (:meth:`HerdrSocketClient.call`). Deadlines run on the injected :class:`~fleetd.clock.Clock`.

Frames are built and parsed by :mod:`fleetd.herdr.protocol` / :mod:`fleetd.herdr.calls`.
fleetd's port (:class:`~fleetd.herdr.control.HerdrAgentControl`) sends through
:meth:`HerdrSocketClient.short` only. The typed per-method wrappers and the long-lived
``events.subscribe`` connection, which only the tests and the simulator use, are
:class:`fleetd.sim.client.SimClient`'s.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fleetd.clock import Clock
from fleetd.errors import ControlLinkError, LinkCause
from fleetd.herdr.deadline import bounded
from fleetd.herdr.protocol import Call

__all__ = ["HerdrSocketClient", "Limit", "link_cause"]

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
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self.socket_path = Path(socket_path)
        self._clock = clock
        self._request_limit = _supplier(request_timeout)
        self._connect_limit = _supplier(connect_timeout)
        self._new_id = new_id

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
