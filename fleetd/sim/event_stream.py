"""The long-lived ``events.subscribe`` connection, with reconnect.

A subscription is the one herdr request that keeps its connection: an ack line
(``subscription_started``), then id-less event lines until either side hangs up. Events are only
hints (the snapshot is authoritative), so losing the connection is routine: :class:`EventStream`
reconnects with capped, jittered exponential backoff and, after every reconnection, runs the
caller's ``on_reconnect`` hook so it can re-``session.snapshot`` and catch what it missed.
The ack is bounded by the request timeout; the event reads have no deadline (quiet is normal).
Randomness comes in through ``jitter`` and time through the :class:`~fleetd.clock.Clock`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Protocol

from fleetd.clock import Clock
from fleetd.errors import ControlLinkError, HerdrError
from fleetd.herdr.deadline import bounded
from fleetd.herdr.protocol import Call
from fleetd.sim.events import Event, decode_stream_line

__all__ = ["Connector", "EventStream", "reconnect_delay"]

_RESUBSCRIBE_CODES = frozenset({"events_lost"})


def reconnect_delay(attempt: int, rnd: float, *, base: float, cap: float) -> float:
    """Equal-jitter backoff: half of ``min(cap, base * 2**attempt)`` plus ``rnd`` of the rest."""
    ceiling = min(cap, base * float(2 ** min(attempt, 30)))
    return ceiling / 2 + max(0.0, min(1.0, rnd)) * ceiling / 2


class Connector(Protocol):
    """What the stream needs from the socket client: fresh connections and request ids."""

    async def open(self, method: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]: ...

    def next_id(self) -> str: ...


class EventStream:
    """One subscription request, kept alive across reconnects."""

    def __init__(
        self,
        client: Connector,
        call: Call[None],
        *,
        clock: Clock,
        ack_timeout: float,
        jitter: Callable[[], float],
        base: float,
        cap: float,
        on_reconnect: Callable[[], Awaitable[None]] | None,
        max_attempts: int | None,
    ) -> None:
        self._client = client
        self._call = call
        self._clock = clock
        self._ack_timeout = ack_timeout
        self._jitter = jitter
        self._base = base
        self._cap = cap
        self._on_reconnect = on_reconnect
        self._max_attempts = max_attempts

    async def events(self) -> AsyncIterator[Event]:
        """Events in arrival order; ends only by raising or by the caller closing it."""
        failures = 0
        attempts = 0
        while True:
            attempts += 1
            try:
                async with aclosing(self._one_connection(reconnect=attempts > 1)) as events:
                    async for event in events:
                        failures = 0  # acknowledged: the link works again
                        if event is not None:
                            yield event
                raise ControlLinkError("connection_lost", "subscription closed")
            except ControlLinkError:
                failures += 1
            except HerdrError as exc:
                if exc.code not in _RESUBSCRIBE_CODES:
                    raise
                failures += 1
            if self._max_attempts is not None and failures > self._max_attempts:
                raise ControlLinkError(
                    "subscription_lost", f"{failures} reconnects failed", method=self._call.method
                )
            delay = reconnect_delay(failures - 1, self._jitter(), base=self._base, cap=self._cap)
            await self._clock.sleep(delay)

    async def _one_connection(self, *, reconnect: bool) -> AsyncGenerator[Event | None, None]:
        method = self._call.method
        reader, writer = await self._client.open(method)
        try:
            request_id = self._client.next_id()
            try:
                writer.write(self._call.request_line(request_id))
                await writer.drain()
                ack = await bounded(
                    self._clock, reader.readline(), self._ack_timeout, "request_timeout"
                )
            except (OSError, ValueError) as exc:
                raise ControlLinkError("connection_lost", type(exc).__name__) from None
            if not ack:
                raise ControlLinkError("connection_lost", "closed before the ack", method=method)
            self._call.parse_response(ack, request_id)
            if reconnect and self._on_reconnect is not None:
                await self._on_reconnect()
            yield None
            while True:
                try:
                    line = await reader.readline()
                except (OSError, ValueError) as exc:
                    raise ControlLinkError("connection_lost", type(exc).__name__) from None
                if not line:
                    raise ControlLinkError("connection_lost", "stream closed", method=method)
                try:
                    event = decode_stream_line(line, method=method)
                except HerdrError as exc:
                    if exc.code != "invalid_response":
                        raise
                    continue  # one event fleetd cannot read must not end the subscription
                if event is not None:
                    yield event
        finally:
            writer.close()
