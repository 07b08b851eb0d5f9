"""``AmqpInbox``: the production ``ReplyInbox`` on RabbitMQ/LavinMQ through aio-pika (M4 §7.2).

One durable queue ``agent.<key>.inbox`` per owned key. New entries are typed v1 JSON under the
vendor media type, persistent, with the AMQP ``message_id`` set to the record's ``msgId``, and are
published with publisher confirms and ``mandatory`` (a missing queue is an error, never a silent
drop; publication never declares a queue). ``own`` declares the queue, ``release`` deletes it only
when it is empty.

``collect`` drains the entries ready in the key's queue and acknowledges what it returns; how it
sorts, holds and quarantines bad entries is the :mod:`collector's <fleetd.inbox.amqp_collect>`
story. A key is released only when its queue is empty and nothing of it is held unacknowledged.
If the connection fails mid-collect, what was already pulled is returned (a lost ack only means a
redelivery, dropped by id). If a collect is cancelled, pulled entries are requeued; records
already marked delivered are kept and returned by the next collect.

Dedup guarantee (first id wins, per key): exact within this process for the most recent
``seen_capacity`` ids; across a restart, a duplicate is dropped at collection when the original
is still queued, but one published after the original was collected by an earlier process is
not detected. A legacy entry without a message id has no identity to dedup on: each delivery
of it is a new record (distinct replies with equal text are never folded into one).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel, AbstractRobustConnection
from aio_pika.message import IncomingMessage
from aiormq import spec
from aiormq.abc import DeliveredMessage

from fleetd.clock import Clock, SystemClock
from fleetd.errors import InboxError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp_collect import AmqpCollector
from fleetd.inbox.amqp_edge import (
    attempt,
    envelope_of,
    millis_to_datetime,
    redact_url,
    translated,
)
from fleetd.inbox.codec import (
    Decoded,
    decode,
    encode,
    queue_name,
)
from fleetd.inbox.failures import DecodeFailure, DecodeFailureHook, FailureLog
from fleetd.inbox.quarantine import AmqpQuarantineLane, QuarantineLane, QuarantineLaneFactory
from fleetd.inbox.records import (
    InboxRecord,
    InboxStats,
    MessageKind,
    WaitingReply,
    check_key,
)
from fleetd.inbox.seen import SeenIds

__all__ = ["AmqpInbox"]

logger = logging.getLogger("fleetd.inbox")

_T = TypeVar("_T")
_SETTLE_POLL_SECONDS = 0.01
#: After a failed connect, calls fail fast for this long before the next connect is tried.
RECONNECT_SECONDS = 5.0
#: How long a call waits for a reconnecting connection before it is refused.
RIDE_OUT_SECONDS = 1.0
#: How often the robust connection tries to reconnect (aio-pika's default is 5 s).
RECONNECT_INTERVAL = 1.0


@dataclass(slots=True)
class _Channels:
    admin: AbstractRobustChannel  # declare, passive declare, delete
    publisher: AbstractRobustChannel  # confirms + mandatory
    consumer: AbstractRobustChannel  # consume and ack; holds unsupported entries
    browser: AbstractRobustChannel  # stats: get then requeue
    lane: QuarantineLane


class AmqpInbox:
    """Per-lead inbox queues on an AMQP 0-9-1 broker."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        on_decode_failure: DecodeFailureHook | None = None,
        seen_capacity: int = 65_536,
        stats_scan_limit: int = 1_000,
        collect_window: int = 200,
        operation_timeout: float = 10.0,
        quarantine: QuarantineLaneFactory = AmqpQuarantineLane,
    ) -> None:
        self._url = url
        self._timeout = operation_timeout
        self._scan_limit = stats_scan_limit
        self._lane_factory = quarantine
        self._clock = clock or SystemClock()
        self._failures = FailureLog(clock=self._clock, on_decode_failure=on_decode_failure)
        self._collector = AmqpCollector(
            failures=self._failures,
            seen_capacity=seen_capacity,
            window=collect_window,
            timeout=operation_timeout,
            clock=self._clock,
        )
        self._seen = SeenIds(seen_capacity)
        self._owned: set[str] = set()
        self._handover: defaultdict[str, list[InboxRecord]] = defaultdict(list)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._browse_lock = asyncio.Lock()
        self._consume_lock = asyncio.Lock()
        self._connect_lock = asyncio.Lock()
        self._connection: AbstractRobustConnection | None = None
        self._channels: _Channels | None = None
        self._closed = False
        self._reachable = True  # until an attempt says otherwise
        self._connect_failed_at: float | None = None  # monotonic, of the last failed connect

    # -- the port ------------------------------------------------------------------------------

    async def own(self, key: str) -> None:
        check_key(key)
        channels = await self._connected()
        await self._attempt(
            "own",
            channels.admin,
            lambda: channels.admin.declare_queue(
                queue_name(key), durable=True, robust=False, timeout=self._timeout
            ),
        )
        self._owned.add(key)

    async def release(self, key: str) -> bool:
        check_key(key)
        channels = await self._connected()
        async with self._locks[key]:
            if self._collector.held(key) or self._handover[key]:
                return False
            try:
                if await self._ready_count(channels, key):
                    return False
                await self._attempt(
                    "release",
                    channels.admin,
                    lambda: channels.admin.queue_delete(
                        queue_name(key), if_unused=True, if_empty=True, timeout=self._timeout
                    ),
                )
            except InboxOwnershipError:
                pass  # the queue is already gone
            except InboxUnavailableError:
                raise
            except InboxError:
                return False  # not empty (or in use) at delete time: keep the key
            self._owned.discard(key)
            return True

    async def publish(self, record: InboxRecord) -> bool:
        key = record.recipient_lead
        self._require_owned(key)
        pair = (key, record.msg_id)
        if pair in self._seen:
            return False
        channels = await self._connected()
        if pair in self._seen:  # the same id may have been published while we connected
            return False
        wire = encode(record)
        message = aio_pika.Message(
            wire.body,
            content_type=wire.content_type,
            message_id=wire.message_id,
            headers={name: str(value) for name, value in wire.headers.items()},
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            timestamp=millis_to_datetime(wire.timestamp_epoch_millis),
            type=record.kind.value,
            app_id="fleetd",
        )
        self._seen.add(pair)  # reserve the id before the first await: first id wins
        try:
            await self._attempt(
                "publish",
                channels.publisher,
                lambda: channels.publisher.default_exchange.publish(
                    message, routing_key=queue_name(key), mandatory=True, timeout=self._timeout
                ),
            )
        except BaseException:
            self._seen.discard(pair)
            raise
        return True

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        self._require_owned(key)
        channels = await self._connected()
        async with self._locks[key]:
            ready = self._handover.pop(key, [])
            if limit is not None and len(ready) >= limit:
                self._handover[key] = ready[limit:]
                return ready[:limit]
            async with self._consume_lock:
                want = None if limit is None else limit - len(ready)
                try:
                    records, pulled = await self._collector.take(
                        channels.consumer, channels.lane, key, want
                    )
                except InboxError:
                    if ready:
                        return ready
                    raise
                except BaseException:
                    self._handover[key] = ready
                    raise
                self._collector.remember(key, records)
                self._handover[key] = ready + records  # survives a cancelled ack phase
                await self._collector.ack(pulled)
            return self._handover.pop(key)

    async def stats(self, key: str) -> InboxStats:
        self._require_owned(key)
        channels = await self._connected()
        async with self._locks[key], self._browse_lock:
            waiting = await self._ready_count(channels, key)
            records = list(self._handover[key])
            browsed: list[AbstractIncomingMessage] = []
            try:
                for _ in range(min(waiting, self._scan_limit)):
                    message = await self._get(channels.browser, key)
                    if message is None:
                        break
                    browsed.append(message)
                    outcome = decode(envelope_of(message), key=key)
                    if isinstance(outcome, Decoded):
                        records.append(outcome.record)
            finally:
                if browsed:
                    with suppress(InboxError), translated("stats requeue"):
                        await browsed[-1].nack(multiple=True, requeue=True)
                    await self._settle(channels, key, waiting)
        kinds = Counter(record.kind for record in records)
        created = [r.created_at_epoch_millis for r in records]
        known = [millis for millis in created if millis is not None]
        return InboxStats(
            depth=waiting + self._collector.held(key) + len(self._handover[key]),
            oldest_created_epoch_millis=min(known) if known else None,
            by_kind={kind: kinds[kind] for kind in MessageKind},
            replies=tuple(
                WaitingReply(target=r.target, created_epoch_millis=r.created_at_epoch_millis)
                for r in records
                if r.kind is MessageKind.REPLY
            ),
            unscanned=max(0, waiting - len(browsed)),
        )

    def failures(self) -> list[DecodeFailure]:
        return self._failures.summaries()

    def reachable(self) -> bool:
        return self._reachable and not self._closed

    async def close(self) -> None:
        self._closed = True
        channels, connection = self._channels, self._connection
        self._channels = self._connection = None
        if channels is not None:
            with suppress(InboxError):
                await channels.lane.close()
        if connection is not None:
            with suppress(InboxError), translated("close"):
                await connection.close()

    # -- plumbing ------------------------------------------------------------------------------

    async def _get(self, channel: AbstractRobustChannel, key: str) -> IncomingMessage | None:
        async def basic_get() -> DeliveredMessage:
            underlay = await channel.get_underlay_channel()
            return await underlay.basic_get(queue_name(key), no_ack=False)

        delivered = await self._attempt("collect", channel, basic_get)
        if isinstance(delivered.delivery, spec.Basic.GetEmpty):
            return None
        return IncomingMessage(delivered, no_ack=False)

    async def _ready_count(self, channels: _Channels, key: str) -> int:
        queue = await self._attempt(
            "inspect",
            channels.admin,
            lambda: channels.admin.declare_queue(
                queue_name(key), passive=True, robust=False, timeout=self._timeout
            ),
        )
        return int(queue.declaration_result.message_count or 0)

    async def _settle(self, channels: _Channels, key: str, waiting: int) -> None:
        """Wait (bounded) until browsed entries are visibly back, so the next collect counts them.

        The broker applies a requeue after answering later requests, so a count taken right
        away can still miss the entries just put back.
        """
        with suppress(InboxError, TimeoutError):
            async with asyncio.timeout(self._timeout):
                while await self._ready_count(channels, key) < waiting:
                    await self._clock.sleep(_SETTLE_POLL_SECONDS)

    async def _attempt(
        self, name: str, channel: AbstractRobustChannel, action: Callable[[], Awaitable[_T]]
    ) -> _T:
        try:
            return await attempt(name, channel, action, within=self._timeout, clock=self._clock)
        except InboxUnavailableError:
            self._reachable = False
            raise

    def _require_owned(self, key: str) -> None:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        if key not in self._owned:
            raise InboxOwnershipError(f"inbox key {key!r} is not owned")

    async def _connected(self) -> _Channels:
        """The channels of a live connection, or soon :class:`InboxUnavailableError`.

        While the broker is away — the robust connection is reconnecting (every
        :data:`RECONNECT_INTERVAL` seconds unless the URL says otherwise), or a connect failed
        less than :data:`RECONNECT_SECONDS` ago — the first call to notice waits at most
        :data:`RIDE_OUT_SECONDS` for the connection and later ones not at all, instead of each
        waiting its whole operation timeout. So a broker outage never makes ``fleet_reply``,
        ``fleet_poll``, ``fleet_list`` or the loops take seconds per lead, while a short blip is
        still ridden out.
        """
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        failed_at = self._connect_failed_at
        if failed_at is not None and self._clock.monotonic() - failed_at < RECONNECT_SECONDS:
            raise InboxUnavailableError("connect: the broker was unreachable moments ago")
        async with self._connect_lock:
            if self._channels is not None:
                await self._ride_out()
                self._reachable = True
                return self._channels
            try:
                channels = await self._connect()
            except InboxUnavailableError:
                self._connect_failed_at = self._clock.monotonic()
                self._reachable = False
                raise
            self._connect_failed_at = None
            self._reachable = True
            return channels

    async def wait_connected(self) -> None:
        """Wait until the connection is up (again); for tooling and tests that must not race
        the robust reconnect. Bound it with a timeout of your own."""
        connection = self._connection
        if connection is not None:
            await connection.connected.wait()

    async def _ride_out(self) -> None:
        """Wait (briefly) for a robust connection that is reconnecting — once: while the broker
        is known to be away, calls fail at once until the connection is back."""
        connection = self._connection
        if connection is None or connection.connected.is_set():
            return
        if not self._reachable:
            raise InboxUnavailableError("the broker connection is down (reconnecting)")
        try:
            async with asyncio.timeout(min(self._timeout, RIDE_OUT_SECONDS)):
                await connection.connected.wait()
        except TimeoutError:
            self._reachable = False
            raise InboxUnavailableError("the broker connection is down (reconnecting)") from None

    async def _connect(self) -> _Channels:
        """Open the connection and its channels (the caller holds the connect lock)."""
        query = parse_qs(urlsplit(self._url).query)
        with translated("connect"):
            connection = await aio_pika.connect_robust(
                self._url,
                timeout=self._timeout,
                client_properties={"connection_name": "fleetd-inbox"},
                reconnect_interval=None if "reconnect_interval" in query else RECONNECT_INTERVAL,
            )
            try:
                channels = _Channels(
                    admin=await connection.channel(publisher_confirms=False),
                    publisher=await connection.channel(
                        publisher_confirms=True, on_return_raises=True
                    ),
                    consumer=await connection.channel(publisher_confirms=False),
                    browser=await connection.channel(publisher_confirms=False),
                    lane=self._lane_factory(connection, self._timeout),
                )
            except BaseException:
                await connection.close()
                raise
        if self._closed:  # close() ran while we connected: do not leave this one open
            await connection.close()
            raise InboxUnavailableError("the inbox is closed")
        logger.info("inbox connected to %s", redact_url(self._url))
        self._connection, self._channels = connection, channels
        return channels
