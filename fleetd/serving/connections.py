"""Bounds on the connections ``fleetd serve`` holds, which uvicorn itself does not set.

uvicorn's HTTP/1.1 protocol waits for a request's line and headers as long as a client likes
and accepts connections until the process runs out of file descriptors; then ``/livez`` stops
answering and asyncio logs every failed ``accept``. :class:`BoundedH11` adds two bounds:

* **a request head must arrive in time**: its line and headers within :data:`HEADER_SECONDS`
  of the connection (the first request) or of the first byte after the previous answer (the
  next ones on a kept-alive connection). A client that stalls is answered ``408``
  ``request_timeout`` with ``Connection: close`` and let go. (A body has its own deadline, in
  the routes: :data:`~fleetd.api.tools.BODY_READ_SECONDS`.)
* **at most so many connections at once**: ``api.maxConnections`` (hot), and never more than
  half the process's open-file limit, so herdr's socket, the databases and the broker always
  have descriptors left. One past the bound is answered ``503`` ``too_many_connections`` with
  ``Retry-After: 1`` and closed as it is accepted, and never counts against the bound itself. A
  WARNING says when refusals begin (then at most once a minute, with how many since the last
  line) and an INFO when a connection is held again, with how many were refused meanwhile.

Both answers are the tool-result envelope every other refusal uses. Then fleetd ends its side
(the client reads the answer and the end of it) and drops whatever else arrives for
:data:`LINGER_SECONDS` before it closes: closing a socket with unread bytes would reset it,
and the client might never read the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar, Final

from uvicorn.protocols.http.h11_impl import H11Protocol

from fleetd.api import ToolFailure, ToolResult

__all__ = ["HEADER_SECONDS", "LINGER_SECONDS", "BoundedH11", "bounded_protocol", "descriptor_cap"]

_log = logging.getLogger("fleetd.api")

HEADER_SECONDS: Final = 10.0
"""A request's line and headers must arrive within this long."""
_WARN_EVERY: Final = 60.0  # seconds between two WARNINGs about refused connections
LINGER_SECONDS: Final = 1.0
"""How long a refused connection is read (and what arrives dropped) before it is closed."""


def _raw(failure: ToolFailure, extra: str = "") -> bytes:
    """``failure`` as a whole HTTP/1.1 answer that ends the connection, written as bytes: it
    goes out before any of the request is read, outside the app."""
    body = json.dumps(ToolResult.failure(failure).to_json()).encode()
    status = HTTPStatus(failure.http_status)
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-type: application/json\r\n"
        f"{extra}connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


_TOO_SLOW: Final = _raw(
    ToolFailure(
        code="request_timeout",
        message=f"the request line and headers did not arrive within {HEADER_SECONDS:g} seconds",
        http_status=408,
    )
)
_TOO_MANY: Final = _raw(
    ToolFailure(
        code="too_many_connections",
        message="fleetd holds as many connections as api.maxConnections allows; try again",
        http_status=503,
    ),
    "retry-after: 1\r\n",
)


def descriptor_cap() -> int | None:
    """Half the process's open-file limit (``None``: unlimited): the most connections fleetd
    holds whatever ``api.maxConnections`` says."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else max(16, soft // 2)


class _Bound:
    """One server's connection bound (read at each new connection: it is hot) and the
    connections refused at it since the last WARNING, said at most once a minute."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.count = 0  # refused since the last WARNING
        self.total = 0  # refused since refusals began
        self.said_at: float | None = None

    def refused(self, limit: int) -> None:
        """One connection refused at ``limit``."""
        self.count += 1
        self.total += 1
        now = time.monotonic()
        if self.said_at is None or now - self.said_at >= _WARN_EVERY:
            _log.warning(
                "%d connections open, the most fleetd holds (api.maxConnections, or half the "
                "open-file limit): new ones are refused with 503 (%d since the last such line)",
                limit,
                self.count,
            )
            self.said_at = now
            self.count = 0

    def held(self) -> None:
        """A connection held again: say how many were refused since refusals began."""
        if self.total:
            _log.info("connections are held again; %d were refused with 503", self.total)
            self.total = self.count = 0
            self.said_at = None


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with the two bounds of this module. :func:`bounded_protocol`
    makes the class uvicorn is given, with its connection bound."""

    bound: ClassVar[_Bound] = _Bound(lambda: 1_000)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._leaving = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.bound.limit()
        if len(self.connections) > limit:
            self.connections.discard(self)  # a refused one never counts against the bound
            self.bound.refused(limit)
            self._leave(_TOO_MANY)
            return
        self.bound.held()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._leaving:
            return  # answered and ending: what still arrives is dropped
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self._head_timer is None:  # the first byte of the next request
            self._arm()
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:  # its head arrived: the request is under way
            self._disarm()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        if self.cycle is not cycle:  # a pipelined request's head was already here
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(HEADER_SECONDS, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is under way: its body has its own deadline
        self._leave(_TOO_SLOW)

    def _leave(self, answer: bytes) -> None:
        """Write ``answer``, end this side, and close after :data:`LINGER_SECONDS`."""
        self._leaving = True
        self._disarm()
        transport = self.transport
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, transport.close)


def bounded_protocol(limit: Callable[[], int]) -> type[BoundedH11]:
    """The protocol class for one server, holding at most ``limit()`` connections (read at
    each new connection: the bound is hot)."""
    return type("FleetdH11", (BoundedH11,), {"bound": _Bound(limit)})
