"""``AmqpInbox``: the production ``ReplyInbox`` on RabbitMQ/LavinMQ through aio-pika (M4 §7.2).

One durable queue ``agent.<key>.inbox`` per owned key. New entries are typed v1 JSON under the
vendor media type, persistent, with the AMQP ``message_id`` set to the record's ``msgId``, and are
published with publisher confirms and ``mandatory`` (a missing queue is an error, never a silent
drop; publication never declares a queue). ``own`` declares the queue, ``release`` deletes it only
when it is empty.

Ack policy, named: **ack after decode, at collection**. ``collect`` pulls with ``basic.get`` under
a per-key lock, decodes by media type, and acknowledges exactly the records it returns:

* a decoded record is returned and acked; a record whose id was already returned is acked and
  dropped (this is how a redelivery after a lost ack never reaches the caller twice);
* an **unsupported schema version** is *held*: left unacknowledged on its original queue, where
  ``basic.get`` steps past it, so later valid messages still progress. It goes back to "ready" when
  the channel or connection closes and is held again (one deduplicated failure) on the next
  collect. A newer build will read it. ``release`` refuses a key while anything is held;
* an **invalid** entry is copied by the :mod:`quarantine lane <fleetd.inbox.quarantine>`, and the
  original is acked only after the copy is confirmed. A failed copy leaves it unacknowledged and
  held; the copy is retried at the start of the next collect.

If the connection fails mid-collect, what was already pulled is returned (its acks may be lost:
the redelivery is then dropped by id). If the collect is cancelled, pulled entries are requeued;
records already marked delivered are kept and returned by the next collect.

Dedup guarantee (first id wins, per key): exact within this process for the most recent
``seen_capacity`` ids; across a restart, a duplicate is dropped at collection when the original
is still queued, but one published after the original was collected by an earlier process is
not detected.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TypeVar

import aio_pika
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel, AbstractRobustConnection
from aio_pika.message import IncomingMessage
from aiormq import spec
from aiormq.abc import DeliveredMessage
from aiormq.exceptions import ChannelInvalidStateError

from fleetd.clock import Clock, SystemClock
from fleetd.errors import InboxError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp_edge import (
    envelope_of,
    is_live,
    millis_to_datetime,
    redact_url,
    translated,
)
from fleetd.inbox.codec import (
    Decoded,
    Invalid,
    UnsupportedVersion,
    body_digest,
    decode,
    encode,
    queue_name,
)
from fleetd.inbox.failures import DecodeFailure, DecodeFailureHook, Disposition, FailureLog
from fleetd.inbox.quarantine import AmqpQuarantineLane, QuarantineLane, QuarantineLaneFactory
from fleetd.inbox.records import InboxRecord, InboxStats, MessageKind, check_key
from fleetd.inbox.seen import SeenIds

__all__ = ["AmqpInbox"]

logger = logging.getLogger("fleetd.inbox")

_T = TypeVar("_T")
_REOPEN_POLL_SECONDS = 0.05


@dataclass(slots=True)
class _Held:
    """An entry left unacknowledged on purpose, with why."""

    message: AbstractIncomingMessage
    outcome: Invalid | UnsupportedVersion
    digest: str


@dataclass(slots=True)
class _Channels:
    admin: AbstractRobustChannel  # declare, passive declare, delete
    publisher: AbstractRobustChannel  # confirms + mandatory
    consumer: AbstractRobustChannel  # basic.get and acks; holds unsupported entries
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
        operation_timeout: float = 10.0,
        quarantine: QuarantineLaneFactory = AmqpQuarantineLane,
    ) -> None:
        self._url = url
        self._timeout = operation_timeout
        self._scan_limit = stats_scan_limit
        self._lane_factory = quarantine
        self._clock = clock or SystemClock()
        self._failures = FailureLog(clock=self._clock, on_decode_failure=on_decode_failure)
        self._seen = SeenIds(seen_capacity)
        self._delivered = SeenIds(seen_capacity)
        self._owned: set[str] = set()
        self._held: defaultdict[str, list[_Held]] = defaultdict(list)
        self._handover: defaultdict[str, list[InboxRecord]] = defaultdict(list)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._browse_lock = asyncio.Lock()
        self._consume_lock = asyncio.Lock()
        self._connect_lock = asyncio.Lock()
        self._connection: AbstractRobustConnection | None = None
        self._channels: _Channels | None = None
        self._closed = False

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
            self._prune(key)
            if self._held[key] or self._handover[key]:
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
                try:
                    await self._retry_held(channels, key)
                    want = None if limit is None else limit - len(ready)
                    records, pulled = await self._take(channels, key, want)
                except InboxError:
                    if ready:
                        return ready
                    raise
                except BaseException:
                    self._handover[key] = ready
                    raise
                for record in records:
                    self._delivered.add((key, record.msg_id))
                self._handover[key] = ready + records  # survives a cancelled ack phase
                await self._ack(pulled)
            return self._handover.pop(key)

    async def stats(self, key: str) -> InboxStats:
        self._require_owned(key)
        channels = await self._connected()
        async with self._locks[key], self._browse_lock:
            self._prune(key)
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
        kinds = Counter(record.kind for record in records)
        created = [r.created_at_epoch_millis for r in records]
        known = [millis for millis in created if millis is not None]
        return InboxStats(
            depth=waiting + len(self._held[key]) + len(self._handover[key]),
            oldest_created_epoch_millis=min(known) if known else None,
            by_kind={kind: kinds[kind] for kind in MessageKind},
        )

    def failures(self) -> list[DecodeFailure]:
        return self._failures.summaries()

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

    # -- collection ----------------------------------------------------------------------------

    async def _take(
        self, channels: _Channels, key: str, want: int | None
    ) -> tuple[list[InboxRecord], list[AbstractIncomingMessage]]:
        """Pull up to ``want`` new records, and every decoded message pulled (to ack), in order.

        Bad entries are held or quarantined on the way; duplicates are pulled but not returned.
        """
        records: list[InboxRecord] = []
        pulled: list[AbstractIncomingMessage] = []
        batch: set[str] = set()
        budget: int | None = None  # entries ready when we started: drain those, not a stream
        try:
            while (want is None or len(records) < want) and (budget is None or budget > 0):
                message = await self._get(channels.consumer, key)
                if message is None:
                    break
                if budget is None:
                    budget = (message.message_count or 0) + 1
                budget -= 1
                record = await self._sort(channels, key, message)
                if record is None:
                    continue
                pulled.append(message)
                if (key, record.msg_id) not in self._delivered and record.msg_id not in batch:
                    batch.add(record.msg_id)
                    records.append(record)
        except asyncio.CancelledError:
            for unreturned in pulled:
                with suppress(InboxError), translated("requeue"):
                    await unreturned.nack(requeue=True)
            raise
        except InboxError:
            if not records:
                raise
            logger.warning("inbox collect interrupted: key=%s returned=%d", key, len(records))
        return records, pulled

    async def _ack(self, pulled: list[AbstractIncomingMessage]) -> None:
        """Acknowledge what a collect pulled: one ``multiple`` ack when nothing is held.

        Collections share the consumer channel under one lock, so the only other unacked
        deliveries there are held entries; with none, acking the last tag covers the batch.
        A lost ack means a redelivery, which the delivered-id memory drops.
        """
        if not pulled:
            return
        holding = any(is_live(h.message) for entries in self._held.values() for h in entries)
        for message in pulled if holding else pulled[-1:]:
            with suppress(InboxError), translated("ack"):
                await message.ack(multiple=not holding)

    async def _sort(
        self, channels: _Channels, key: str, message: AbstractIncomingMessage
    ) -> InboxRecord | None:
        """The record of a decodable entry; anything else is held or quarantined here."""
        outcome = decode(envelope_of(message), key=key)
        if isinstance(outcome, Decoded):
            return outcome.record
        held = _Held(message=message, outcome=outcome, digest=body_digest(message.body))
        if isinstance(outcome, UnsupportedVersion):
            self._report(key, held, Disposition.HELD)
            self._held[key].append(held)
        elif not await self._quarantine(channels, key, held):
            self._held[key].append(held)
        return None

    async def _quarantine(self, channels: _Channels, key: str, held: _Held) -> bool:
        """Copy, confirm, then ack; True when the original is gone from the inbox."""
        if not isinstance(held.outcome, Invalid):
            return False
        try:
            await channels.lane.copy(key, held.message, held.outcome.reason)
            with translated("ack"):
                await held.message.ack()
        except Exception as exc:  # noqa: BLE001 - any failed handoff leaves the original unacked
            logger.warning("inbox quarantine failed: key=%s error=%s", key, type(exc).__name__)
            self._report(key, held, Disposition.QUARANTINE_PENDING)
            return False
        self._report(key, held, Disposition.QUARANTINED)
        return True

    async def _retry_held(self, channels: _Channels, key: str) -> None:
        """Retry pending quarantine copies; forget entries whose channel closed (redelivered)."""
        self._prune(key)
        keep = []
        for held in self._held.pop(key, []):
            if not await self._quarantine(channels, key, held):
                keep.append(held)
        self._held[key] = keep

    def _prune(self, key: str) -> None:
        self._held[key] = [held for held in self._held[key] if is_live(held.message)]

    def _report(self, key: str, held: _Held, disposition: Disposition) -> None:
        self._failures.report(
            key=key,
            outcome=held.outcome,
            message_id=held.message.message_id,
            digest=held.digest,
            disposition=disposition,
        )

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

    async def _attempt(
        self, name: str, channel: AbstractRobustChannel, action: Callable[[], Awaitable[_T]]
    ) -> _T:
        """Run one broker operation within the timeout, riding out a reconnect.

        A call on a channel that is closed fails before anything is sent, so it is safe to wait
        for the robust channel to come back and try again; any other failure is translated.
        """
        with translated(name):
            async with asyncio.timeout(self._timeout):
                while True:
                    await channel.ready()
                    try:
                        return await action()
                    except ChannelInvalidStateError:
                        await self._clock.sleep(_REOPEN_POLL_SECONDS)

    def _require_owned(self, key: str) -> None:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        if key not in self._owned:
            raise InboxOwnershipError(f"inbox key {key!r} is not owned")

    async def _connected(self) -> _Channels:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        async with self._connect_lock:
            if self._channels is not None:
                return self._channels
            with translated("connect"):
                connection = await aio_pika.connect_robust(
                    self._url,
                    timeout=self._timeout,
                    client_properties={"connection_name": "fleetd-inbox"},
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
            logger.info("inbox connected to %s", redact_url(self._url))
            self._connection, self._channels = connection, channels
            return channels
