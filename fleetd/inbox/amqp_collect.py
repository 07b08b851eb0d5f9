"""The consuming side of the AMQP inbox: drain, sort, hold, quarantine, acknowledge (M4 §7.2).

Ack policy, named: **ack after decode, at collection**. A collect counts the entries ready in the
key's queue and consumes exactly that many (``basic.consume`` with a prefetch window no larger
than what is ready and wanted, then ``basic.cancel``), decodes each by media type, and sorts it:

* a decoded record is returned; a record whose id was already returned is pulled but dropped
  (this is how a redelivery after a lost ack never reaches the caller twice) — when its body is
  the same. A *different* body under an id already taken (a publisher reusing ids) is not a
  redelivery: it is quarantined as ``reused_id``, never dropped unseen. A legacy entry
  without a message id gets a fresh serial in its id on every delivery, so two distinct replies
  with the same text both come back; the price is that its redelivery comes back too;
* an **unsupported schema version** is *held*: left unacknowledged on its original queue while
  the consumer moves on past it, so later valid messages still progress. It goes back to "ready"
  when the channel or connection closes and is held again (one deduplicated failure) on the next
  collect; a newer build will read it;
* an **invalid** entry is copied by the quarantine lane, and the original is acked (with the
  batch) only after the copy is confirmed. A failed copy leaves it unacknowledged and held; the
  copy is retried at the start of the next collect. An ack lost after a confirmed copy means the
  entry comes back and is copied again: quarantine is at-least-once.

Every delivery stays unacked until the batch ack, so a round's prefetch window (no larger than
the entries counted) can never pull in entries beyond the ones counted; a round ends when its
window is used and the next round opens a new consumer. A cancelled collect requeues what it
pulled, oldest first, before the consumer's buffer is returned: RabbitMQ puts a requeued message
back in its original position and applies requeues in order, so FIFO holds.

Acks: the caller serialises collections on one consumer channel, so the only other unacked
deliveries there are held entries. With none held, one ``multiple`` ack covers the batch;
otherwise each entry is acked alone. A lost ack means a redelivery, dropped by id.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustChannel

from fleetd.clock import Clock
from fleetd.errors import InboxError, InboxUnavailableError
from fleetd.inbox.amqp_edge import attempt, envelope_of, is_live, translated
from fleetd.inbox.codec import (
    Decoded,
    DecodeReason,
    Invalid,
    UnsupportedVersion,
    body_digest,
    decode,
    queue_name,
)
from fleetd.inbox.failures import Disposition, FailureLog
from fleetd.inbox.quarantine import QuarantineLane
from fleetd.inbox.records import InboxRecord
from fleetd.inbox.seen import SeenIds

__all__ = ["AmqpCollector"]

logger = logging.getLogger("fleetd.inbox")


class _Round:
    """One round of a collect: ``basic.consume`` on the key's queue, its deliveries taken one at
    a time, then ``basic.cancel``; a delivery that came but was not taken goes back (``nack``
    with requeue), as aio-pika's queue iterator does. Not that iterator: each one leaves a
    shielded future and its callback on the channel's and the connection's close futures until
    those close, about 2 KB per round for the life of the connection."""

    __slots__ = ("_buffer", "_queue", "_tag", "_timeout")

    def __init__(self, queue: AbstractQueue, timeout: float) -> None:
        self._queue = queue
        self._timeout = timeout
        self._buffer: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self._tag: str | None = None

    async def __aenter__(self) -> _Round:
        self._tag = await self._queue.consume(self._buffer.put, timeout=self._timeout)
        return self

    async def next(self) -> AbstractIncomingMessage:
        """The next delivery; :class:`TimeoutError` when none comes within the timeout."""
        return await asyncio.wait_for(self._buffer.get(), self._timeout)

    async def __aexit__(self, *_exc: object) -> None:
        channel = self._queue.channel
        if self._tag is not None and not channel.is_closed:
            await self._queue.cancel(self._tag, timeout=self._timeout)
        while not self._buffer.empty():
            message = self._buffer.get_nowait()
            if not channel.is_closed:  # closed: the broker has put it back already
                await message.nack(requeue=True)


@dataclass(slots=True)
class _Held:
    """An entry left unacknowledged on purpose, with why."""

    message: AbstractIncomingMessage
    outcome: Invalid | UnsupportedVersion
    digest: str


class AmqpCollector:
    """Pulls one key's ready entries and keeps what must stay unacknowledged."""

    def __init__(
        self,
        *,
        failures: FailureLog,
        seen_capacity: int,
        window: int,
        timeout: float,
        clock: Clock,
    ) -> None:
        self._failures = failures
        self._delivered = SeenIds(seen_capacity)
        self._max_window = window
        self.timeout = timeout  # the operation watchdog; the inbox keeps it current
        self._clock = clock
        self._held: defaultdict[str, list[_Held]] = defaultdict(list)
        self._qos: tuple[AbstractRobustChannel | None, int] = (None, 0)  # channel, prefetch
        self._serials = itertools.count(1)  # numbers deliveries for id-less legacy entries
        self._digests: dict[tuple[str, str], str] = {}  # returned, not yet remembered

    def held(self, key: str) -> int:
        """Entries of ``key`` held unacknowledged right now (their channel still open)."""
        self._held[key] = [held for held in self._held[key] if is_live(held.message)]
        return len(self._held[key])

    def remember(self, key: str, records: list[InboxRecord]) -> None:
        """Mark ``records`` as returned, so any redelivery of them is dropped."""
        for record in records:
            pair = (key, record.msg_id)
            self._delivered.add(pair, self._digests.pop(pair, ""))

    async def take(
        self, consumer: AbstractRobustChannel, lane: QuarantineLane, key: str, want: int | None
    ) -> tuple[list[InboxRecord], list[AbstractIncomingMessage]]:
        """Up to ``want`` new records of ``key``, and every message to ack with them, in order."""
        await self._retry_held(lane, key)
        for pair in [pair for pair in self._digests if pair[0] == key]:
            del self._digests[pair]  # a take never remembered (its answer failed): drop them
        records: list[InboxRecord] = []
        pulled: list[AbstractIncomingMessage] = []  # decoded or quarantined: acked as a batch
        queue = await attempt(
            "collect",
            consumer,
            lambda: consumer.declare_queue(
                queue_name(key), passive=True, robust=False, timeout=self.timeout
            ),
            within=self.timeout,
            clock=self._clock,
        )
        budget = int(queue.declaration_result.message_count or 0)  # drain these, not a stream
        try:
            with translated("collect"):
                while budget > 0 and (want is None or len(records) < want):
                    wanted = budget if want is None else want - len(records)
                    window = min(budget, wanted, self._max_window)
                    if self._qos != (consumer, window):  # a new connection starts at none
                        await consumer.set_qos(prefetch_count=window)
                        self._qos = (consumer, window)
                    used = 0  # every delivery stays unacked until the batch ack
                    async with _Round(queue, self.timeout) as deliveries:
                        try:
                            while True:
                                message = await deliveries.next()
                                budget, used = budget - 1, used + 1
                                record = await self._sort(lane, key, message, pulled)
                                if record is not None and await self._is_new(
                                    lane, key, record, message, pulled
                                ):
                                    records.append(record)
                                full = want is not None and len(records) >= want
                                if budget <= 0 or full or used >= window:
                                    break
                        except TimeoutError:
                            budget = 0  # fewer entries came than were counted: stop here
        except InboxError:
            if not records:
                raise
            logger.warning("inbox collect interrupted: key=%s returned=%d", key, len(records))
        except BaseException as exc:
            # Cancelled (or failed in a way the adapter does not know) anywhere in the rounds —
            # including the consumer's cancel and QoS round trips: nothing pulled here will be
            # returned or acked, so all of it goes back now, in order. Left unacked on the open
            # channel it would be swept away by the next collect's multiple ack.
            await self._requeue(pulled)
            if isinstance(exc, Exception):
                raise InboxUnavailableError("inbox collect interrupted") from exc
            raise
        return records, pulled

    async def ack(self, pulled: list[AbstractIncomingMessage]) -> None:
        """Acknowledge what a collect pulled: one ``multiple`` ack when nothing is held."""
        if not pulled:
            return
        holding = any(self.held(key) for key in list(self._held))
        for message in pulled if holding else pulled[-1:]:
            with suppress(InboxError), translated("ack"):
                await message.ack(multiple=not holding)

    async def _is_new(
        self,
        lane: QuarantineLane,
        key: str,
        record: InboxRecord,
        message: AbstractIncomingMessage,
        pulled: list[AbstractIncomingMessage],
    ) -> bool:
        """True for a record to return: its id not taken yet. The same body again is a
        redelivery, dropped; another body under a taken id is quarantined (``reused_id``)."""
        pair = (key, record.msg_id)
        digest = body_digest(message.body)
        taken = self._digests.get(pair)
        if taken is None:
            taken = self._delivered.digest(pair)
        if taken is None:
            self._digests[pair] = digest
            return True
        if taken in ("", digest):
            return False  # a redelivery (or an id remembered without its body): dropped
        pulled.remove(message)  # acked only once its copy is confirmed
        held = _Held(message=message, outcome=Invalid(reason=DecodeReason.REUSED_ID), digest=digest)
        self._held[key].append(held)
        if await self._quarantine(lane, key, held):
            self._held[key].remove(held)
            pulled.append(message)
        return False

    async def _sort(
        self,
        lane: QuarantineLane,
        key: str,
        message: AbstractIncomingMessage,
        pulled: list[AbstractIncomingMessage],
    ) -> InboxRecord | None:
        """The record of a decodable entry; anything else is held or quarantined here.

        Decoded and quarantined entries join ``pulled`` for the batch ack. A quarantined
        original is acked only after its copy is confirmed; deferring that ack to the batch
        keeps the consumer window from pulling in entries beyond the ones counted.
        """
        outcome = decode(envelope_of(message), key=key, serial=next(self._serials))
        if isinstance(outcome, Decoded):
            pulled.append(message)
            return outcome.record
        held = _Held(message=message, outcome=outcome, digest=body_digest(message.body))
        if isinstance(outcome, UnsupportedVersion):
            self._report(key, held, Disposition.HELD)
            self._held[key].append(held)
            return None
        self._held[key].append(held)  # until the copy is confirmed
        try:
            copied = await self._quarantine(lane, key, held)
        except asyncio.CancelledError:
            self._held[key].remove(held)
            pulled.append(message)  # requeued with the rest
            raise
        if copied:
            self._held[key].remove(held)
            pulled.append(message)
        return None

    async def _quarantine(self, lane: QuarantineLane, key: str, held: _Held) -> bool:
        """Copy and confirm; True when the copy is safe (the caller then acks the original)."""
        if not isinstance(held.outcome, Invalid):
            return False
        try:
            await lane.copy(key, held.message, held.outcome.reason)
        except Exception as exc:  # noqa: BLE001 - any failed handoff leaves the original unacked
            logger.warning("inbox quarantine failed: key=%s error=%s", key, type(exc).__name__)
            self._report(key, held, Disposition.QUARANTINE_PENDING)
            return False
        self._report(key, held, Disposition.QUARANTINED)
        return True

    async def _retry_held(self, lane: QuarantineLane, key: str) -> None:
        """Retry pending quarantine copies; forget entries whose channel closed (redelivered)."""
        self.held(key)
        for held in list(self._held[key]):
            if await self._quarantine(lane, key, held):
                with suppress(InboxError), translated("ack"):
                    await held.message.ack()
                self._held[key].remove(held)

    @staticmethod
    async def _requeue(messages: list[AbstractIncomingMessage]) -> None:
        """Return pulled entries to their queue one by one, oldest first.

        The broker applies the requeues in order, so whatever becomes visible to the next
        collect is always the oldest part: FIFO holds even before all of them are back.
        """
        for message in messages:
            with suppress(InboxError), translated("requeue"):
                await message.nack(requeue=True)

    def _report(self, key: str, held: _Held, disposition: Disposition) -> None:
        self._failures.report(
            key=key,
            outcome=held.outcome,
            message_id=held.message.message_id,
            digest=held.digest,
            disposition=disposition,
        )
