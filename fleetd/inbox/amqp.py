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

The connection (one broker, or an ordered list with failover) is the
:mod:`link's <fleetd.inbox.amqp_link>` story: every operation runs on a lease of one live
connection, so a call in flight finishes on the connection it started on.

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
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TypeVar

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel
from aio_pika.message import IncomingMessage
from aiormq import spec
from aiormq.abc import DeliveredMessage

from fleetd.clock import Clock, SystemClock
from fleetd.errors import InboxError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp_collect import AmqpCollector
from fleetd.inbox.amqp_connect import Channels
from fleetd.inbox.amqp_edge import attempt, envelope_of, millis_to_datetime, translated
from fleetd.inbox.amqp_link import AmqpLink, BrokerReport
from fleetd.inbox.codec import Decoded, decode, encode, queue_name
from fleetd.inbox.failures import DecodeFailure, DecodeFailureHook, FailureLog
from fleetd.inbox.quarantine import AmqpQuarantineLane, QuarantineLaneFactory
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


class AmqpInbox:
    """Per-lead inbox queues on an AMQP 0-9-1 broker (or an ordered list of brokers)."""

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        clock: Clock | None = None,
        on_decode_failure: DecodeFailureHook | None = None,
        seen_capacity: int = 65_536,
        stats_scan_limit: int = 1_000,
        collect_window: int = 200,
        operation_timeout: float = 10.0,
        connect_timeout: float | None = None,
        quarantine: QuarantineLaneFactory = AmqpQuarantineLane,
    ) -> None:
        urls = (url,) if isinstance(url, str) else tuple(url)
        self._scan_limit = stats_scan_limit
        self._clock = clock or SystemClock()
        self._failures = FailureLog(clock=self._clock, on_decode_failure=on_decode_failure)
        self._collector = AmqpCollector(
            failures=self._failures,
            seen_capacity=seen_capacity,
            window=collect_window,
            timeout=operation_timeout,
            clock=self._clock,
        )
        self._link = AmqpLink(
            urls,
            clock=self._clock,
            connect_timeout=operation_timeout if connect_timeout is None else connect_timeout,
            operation_timeout=operation_timeout,
            lane_factory=quarantine,
            on_connect=self._declare_owned,
        )
        self._seen = SeenIds(seen_capacity)
        self._owned: set[str] = set()
        self._handover: defaultdict[str, list[InboxRecord]] = defaultdict(list)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._browse_lock = asyncio.Lock()
        self._consume_lock = asyncio.Lock()
        self._closed = False

    @property
    def _timeout(self) -> float:
        return self._link.operation_timeout

    # -- the port ------------------------------------------------------------------------------

    async def own(self, key: str) -> None:
        check_key(key)
        async with self._link.lease() as channels:
            await self._declare(channels, key)
        self._owned.add(key)

    async def release(self, key: str) -> bool:
        check_key(key)
        async with self._link.lease() as channels, self._locks[key]:
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
        async with self._link.lease() as channels:
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
                        message,
                        routing_key=queue_name(key),
                        mandatory=True,
                        timeout=self._timeout,
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
        async with self._link.lease() as channels, self._locks[key]:
            ready = self._handover.pop(key, [])
            if limit is not None and len(ready) >= limit:
                self._handover[key] = ready[limit:]
                return ready[:limit]
            async with self._consume_lock:
                want = None if limit is None else limit - len(ready)
                self._collector.timeout = self._timeout
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
        async with self._link.lease() as channels, self._locks[key], self._browse_lock:
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
        return self._link.reachable() and not self._closed

    async def close(self) -> None:
        self._closed = True
        await self._link.close()

    # -- the broker list -------------------------------------------------------------------------

    def broker_report(self) -> BrokerReport:
        """The brokers, the one in use and whether it is reachable (the dependencies view)."""
        return self._link.report()

    def repoint(
        self, urls: Sequence[str], *, connect_timeout: float, operation_timeout: float
    ) -> None:
        """Apply a reloaded broker list and watchdogs (see :meth:`AmqpLink.repoint`)."""
        self._link.repoint(
            urls, connect_timeout=connect_timeout, operation_timeout=operation_timeout
        )

    async def wait_connected(self) -> None:
        """Wait until a connection is up (again); for tooling and tests that must not race
        the reconnect. Bound it with a timeout of your own."""
        await self._link.wait_connected()

    # -- plumbing ------------------------------------------------------------------------------

    async def _declare(self, channels: Channels, key: str) -> None:
        await self._attempt(
            "own",
            channels.admin,
            lambda: channels.admin.declare_queue(
                queue_name(key), durable=True, robust=False, timeout=self._timeout
            ),
        )

    async def _declare_owned(self, channels: Channels) -> None:
        """A new broker connection serves the keys owned so far (declaring is idempotent)."""
        for key in sorted(self._owned):
            with translated("own"):
                await channels.admin.declare_queue(
                    queue_name(key), durable=True, robust=False, timeout=self._timeout
                )

    async def _get(self, channel: AbstractRobustChannel, key: str) -> IncomingMessage | None:
        async def basic_get() -> DeliveredMessage:
            underlay = await channel.get_underlay_channel()
            return await underlay.basic_get(queue_name(key), no_ack=False)

        delivered = await self._attempt("collect", channel, basic_get)
        if isinstance(delivered.delivery, spec.Basic.GetEmpty):
            return None
        return IncomingMessage(delivered, no_ack=False)

    async def _ready_count(self, channels: Channels, key: str) -> int:
        queue = await self._attempt(
            "inspect",
            channels.admin,
            lambda: channels.admin.declare_queue(
                queue_name(key), passive=True, robust=False, timeout=self._timeout
            ),
        )
        return int(queue.declaration_result.message_count or 0)

    async def _settle(self, channels: Channels, key: str, waiting: int) -> None:
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
        started = self._clock.monotonic()
        try:
            result = await attempt(name, channel, action, within=self._timeout, clock=self._clock)
        except InboxUnavailableError as exc:
            self._link.failed(exc)
            raise
        self._link.succeeded(self._clock.monotonic() - started)
        return result

    def _require_owned(self, key: str) -> None:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        if key not in self._owned:
            raise InboxOwnershipError(f"inbox key {key!r} is not owned")
