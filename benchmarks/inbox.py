"""Typed inbox throughput against the local broker, next to a bare aio-pika loop.

Both sides move the same number of messages with the same bodies and the same settings:
persistent delivery, publisher confirms awaited per message, ``mandatory`` routing to a durable
queue, then every message consumed and acknowledged. The typed side goes through
``AmqpInbox.publish`` (encode, dedup, confirms) and ``AmqpInbox.collect`` (count, consume with a
bounded window, decode by media type, batch ack). The bare side publishes the same encoded bytes
with the same message properties (made ahead of the clock) and consumes them the way the typed
side does, with nothing else: per chunk one consumer
(``basic.consume``) whose prefetch window is the chunk, and one ``multiple`` ack for the whole
chunk — so the ratio measures what the typed inbox adds, not a slower consume protocol. The sides
alternate in small chunks so that broker and disk noise hits both alike. The ratio typed/bare
over publish+consume is the figure to watch (target at least 0.7; exits 1 below it).

Run: ``.venv/bin/python benchmarks/inbox.py [--messages N] [--chunk N] [--url URL]``. Bounded to
well under a minute; the broker must be on 127.0.0.1:5672 unless ``--url`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from dataclasses import dataclass

import aio_pika

from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.amqp_edge import millis_to_datetime
from fleetd.inbox.codec import encode
from fleetd.inbox.records import InboxRecord, MessageKind

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
DEADLINE_SECONDS = 50.0


def records(key: str, count: int) -> list[InboxRecord]:
    return [
        InboxRecord(
            msg_id=f"bench-{n}",
            kind=MessageKind.REPLY,
            target="term_member_7",
            recipient_lead=key,
            content=f"member reply number {n}: all tests pass on the feature branch. " * 3,
            created_at_epoch_millis=1_786_300_000_000 + n,
        )
        for n in range(count)
    ]


@dataclass(slots=True)
class Tally:
    """Seconds spent publishing and consuming, summed over a side's chunks."""

    publish: float = 0.0
    consume: float = 0.0
    messages: int = 0

    def rates(self) -> tuple[float, float, float]:
        per = self.messages
        return per / self.publish, per / self.consume, per / (self.publish + self.consume)


class TypedSide:
    """``AmqpInbox.publish`` then ``AmqpInbox.collect`` on one owned key."""

    def __init__(self, url: str) -> None:
        self.inbox = AmqpInbox(url)
        self.key = f"bench{uuid.uuid4().hex[:12]}"
        self.tally = Tally()
        self.sent = 0

    async def start(self) -> None:
        await self.inbox.own(self.key)

    async def chunk(self, count: int) -> None:
        batch = records(self.key, self.sent + count)[self.sent :]
        self.sent += count
        started = time.perf_counter()
        for record in batch:
            await self.inbox.publish(record)
        published = time.perf_counter()
        collected = 0
        while collected < count:
            collected += len(await self.inbox.collect(self.key, limit=count - collected))
        done = time.perf_counter()
        self.tally.publish += published - started
        self.tally.consume += done - published
        self.tally.messages += count

    async def stop(self) -> None:
        await self.inbox.release(self.key)
        await self.inbox.close()


class BareSide:
    """Raw aio-pika: confirmed persistent publishes, then one consumer per chunk, batch ack."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = f"agent.bench{uuid.uuid4().hex[:12]}.inbox"
        self.tally = Tally()
        self.sent = 0

    async def start(self) -> None:
        self.connection = await aio_pika.connect_robust(self.url)
        self.publisher = await self.connection.channel(
            publisher_confirms=True, on_return_raises=True
        )
        self.consumer = await self.connection.channel(publisher_confirms=False)
        self.prefetch = 0
        self.queue = await self.consumer.declare_queue(self.name, durable=True)

    async def chunk(self, count: int) -> None:
        batch = records("bench", self.sent + count)[self.sent :]
        wires = [encode(record) for record in batch]  # the same bytes and properties, made ahead
        self.sent += count
        started = time.perf_counter()
        for record, wire in zip(batch, wires, strict=True):
            await self.publisher.default_exchange.publish(
                aio_pika.Message(
                    wire.body,
                    content_type=wire.content_type,
                    message_id=wire.message_id,
                    headers={name: str(value) for name, value in wire.headers.items()},
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    timestamp=millis_to_datetime(wire.timestamp_epoch_millis),
                    type=record.kind.value,
                    app_id="fleetd",
                ),
                routing_key=self.name,
                mandatory=True,
            )
        published = time.perf_counter()
        if self.prefetch != count:  # the typed side sizes its window the same way
            await self.consumer.set_qos(prefetch_count=count)
            self.prefetch = count
        received = 0
        async with self.queue.iterator() as messages:
            async for message in messages:
                received += 1
                if received == count:
                    await message.ack(multiple=True)  # one ack for the chunk
                    break
        done = time.perf_counter()
        self.tally.publish += published - started
        self.tally.consume += done - published
        self.tally.messages += count

    async def stop(self) -> None:
        await self.queue.delete(if_unused=False, if_empty=False)
        await self.connection.close()


TARGET_RATIO = 0.70


async def main(url: str, count: int, chunk: int) -> int:
    typed, bare = TypedSide(url), BareSide(url)
    await typed.start()
    await bare.start()
    try:
        await typed.chunk(50)  # warm both paths up once, outside the tally
        await bare.chunk(50)
        typed.tally, bare.tally = Tally(), Tally()
        for n in range(count // chunk):  # alternate small chunks: broker noise hits both alike
            for side in (typed, bare) if n % 2 else (bare, typed):
                await side.chunk(chunk)
    finally:
        await typed.stop()
        await bare.stop()
    print(f"{bare.tally.messages} messages per side in chunks of {chunk}, alternating sides")
    print("(persistent delivery, publisher confirms per message, mandatory; batch ack per chunk)")
    print(f"{'msg/s':32}{'publish':>10}{'consume':>10}{'both':>10}")
    for label, side in (
        ("bare aio-pika publish/consume", bare),
        ("typed inbox publish/collect", typed),
    ):
        print(f"{label:32}" + "".join(f"{figure:10.0f}" for figure in side.tally.rates()))
    ratio = typed.tally.rates()[2] / bare.tally.rates()[2]
    met = ratio >= TARGET_RATIO
    print(f"ratio typed/bare (publish+consume): {ratio:.2f}")
    print(f"target >= {TARGET_RATIO:.2f}: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--url", default=DEFAULT_URL)
    arguments = parser.parse_args()
    work = main(arguments.url, arguments.messages, arguments.chunk)
    sys.exit(asyncio.run(asyncio.wait_for(work, DEADLINE_SECONDS)))
