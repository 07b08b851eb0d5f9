"""Shared fixtures for the inbox contract suites: broker check, unique keys, raw broker, TCP proxy.

Test modules take its fixtures with ``pytest_plugins = ["tests.contract.inbox_fixtures"]`` and its
types with ``from tests.contract.inbox_fixtures import ...``, so this file needs no conftest.
Broker tests need RabbitMQ on 127.0.0.1:5672; when it is unreachable they fail under ``CI=true``
and skip otherwise, saying so.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import aio_pika
import aiormq
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection
from aiormq.abc import ChannelFrame
from aiormq.exceptions import ChannelNotFoundEntity
from pamqp import commands as spec
from pamqp.base import Frame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.codec import quarantine_queue_name, queue_name
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.port import ReplyInbox

AMQP_HOST, AMQP_PORT = "127.0.0.1", 5672
AMQP_URL = f"amqp://guest:guest@{AMQP_HOST}:{AMQP_PORT}/"


def _broker_reachable() -> bool:
    try:
        with socket.create_connection((AMQP_HOST, AMQP_PORT), timeout=1.0):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def inbox_amqp_url() -> str:
    """The local broker URL; fails in CI and skips elsewhere when the broker is down."""
    if not _broker_reachable():
        message = f"RabbitMQ is not reachable on {AMQP_HOST}:{AMQP_PORT}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI needs the broker for the inbox contract tests")
        pytest.skip(f"{message}; start it to run the AMQP inbox contract tests")
    return AMQP_URL


@pytest.fixture
def inbox_new_key() -> Callable[[], str]:
    """Makes unique inbox keys for one test."""
    return lambda: f"t{uuid.uuid4().hex[:16]}"


class RawBroker:
    """A plain aio-pika client: writes old wire data, inspects queues, deletes them afterwards."""

    def __init__(self, connection: AbstractRobustConnection) -> None:
        self.connection = connection
        self.keys: set[str] = set()

    def track(self, key: str) -> str:
        self.keys.add(key)
        return key

    async def publish(self, key: str, body: bytes, **properties: Any) -> None:
        """Publish like the previous build: persistent, confirmed, straight to the queue."""
        properties.setdefault("delivery_mode", aio_pika.DeliveryMode.PERSISTENT)
        async with self.connection.channel(publisher_confirms=True) as channel:
            await channel.default_exchange.publish(
                aio_pika.Message(body, **properties), routing_key=queue_name(key)
            )

    async def publish_without_id(self, key: str, body: bytes, content_type: str) -> None:
        """Publish persistent ``body`` with no ``message_id``, as the old build's client did.

        aiormq fills in a random id when a publish has none, so these frames are written to the
        channel directly; a passive declare on the same channel then answers only after the
        broker has taken the publish (a channel is processed in order).
        """
        async with self.connection.channel(publisher_confirms=False) as channel:
            # the connector's write queue is on aiormq's Channel, not on its abstract type
            underlay = cast(aiormq.Channel, await channel.get_underlay_channel())
            properties = spec.Basic.Properties(content_type=content_type, delivery_mode=2)
            frames: list[Frame | ContentHeader | ContentBody] = [
                spec.Basic.Publish(exchange="", routing_key=queue_name(key)),
                ContentHeader(properties=properties, body_size=len(body)),
                ContentBody(body),
            ]
            await underlay.write_queue.put(
                ChannelFrame.marshall(frames=frames, channel_number=underlay.number)
            )
            await channel.declare_queue(queue_name(key), passive=True, robust=False)

    async def ready(self, name: str) -> int | None:
        """Ready messages in queue ``name``; None when the queue does not exist."""
        try:
            async with self.connection.channel() as channel:
                queue = await channel.declare_queue(name, passive=True, robust=False)
                return int(queue.declaration_result.message_count or 0)
        except ChannelNotFoundEntity:
            return None

    async def drain(self, name: str) -> list[AbstractIncomingMessage]:
        """Take (and ack) every ready message of queue ``name``."""
        taken: list[AbstractIncomingMessage] = []
        async with self.connection.channel() as channel:
            queue = await channel.declare_queue(name, passive=True, robust=False)
            while (message := await queue.get(fail=False)) is not None:
                await message.ack()
                taken.append(message)
        return taken

    async def cleanup(self) -> None:
        async with self.connection.channel() as channel:
            for key in self.keys:
                for name in (queue_name(key), quarantine_queue_name(key)):
                    await channel.queue_delete(name)


@pytest.fixture
async def inbox_broker(inbox_amqp_url: str) -> AsyncIterator[RawBroker]:
    """A raw broker client; every key it tracked has its queues deleted after the test."""
    connection = await aio_pika.connect_robust(inbox_amqp_url)
    raw = RawBroker(connection)
    try:
        yield raw
    finally:
        await raw.cleanup()
        await connection.close()


@dataclass
class InboxKit:
    """One adapter kind under test: ``build()`` makes an inbox, ``key()`` a unique key."""

    kind: str
    build: Callable[[], ReplyInbox]
    key: Callable[[], str]


@pytest.fixture(params=["memory", pytest.param("amqp", marks=pytest.mark.amqp)])
async def inbox_kit(
    request: pytest.FixtureRequest, inbox_new_key: Callable[[], str]
) -> AsyncIterator[InboxKit]:
    """Both adapters run every test that uses this; AMQP queues of the test's keys are deleted."""
    inboxes: list[ReplyInbox] = []
    keys: list[str] = []
    url = request.getfixturevalue("inbox_amqp_url") if request.param == "amqp" else ""

    def build() -> ReplyInbox:
        if request.param == "memory":
            inboxes.append(InMemoryInbox())
        else:
            inboxes.append(AmqpInbox(url))
        return inboxes[-1]

    def key() -> str:
        keys.append(inbox_new_key())
        return keys[-1]

    try:
        yield InboxKit(kind=request.param, build=build, key=key)
    finally:
        for inbox in inboxes:
            await inbox.close()
        if url:
            connection = await aio_pika.connect_robust(url)
            raw = RawBroker(connection)
            raw.keys.update(keys)
            await raw.cleanup()
            await connection.close()


class TcpProxy:
    """A TCP relay to the broker that a test can cut, to drop a live connection abruptly."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pumps: set[asyncio.Task[None]] = set()
        self._refusing = False
        self._flowing = asyncio.Event()
        self._flowing.set()
        self.port = 0
        self.accepted = 0  # connections relayed so far
        self.live: set[asyncio.StreamWriter] = set()  # client sides still open

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def sever(self) -> None:
        """Abort every relayed connection at once, as a network failure would."""
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones: the broker is unreachable."""
        self._refusing = True
        self.sever()

    def restore(self) -> None:
        """Relay new connections again."""
        self._refusing = False

    def freeze(self) -> None:
        """Keep every connection open but relay nothing: a broker that hangs (calls time out
        while the connection still looks up)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Relay again what waited, and everything after."""
        self._flowing.set()

    async def close(self) -> None:
        self.sever()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for pump in self._pumps:
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self._writers += [writer, up_writer]
        self.accepted += 1
        self.live.add(writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.ensure_future(self._pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)
            pump.add_done_callback(lambda _: self.live.discard(writer))

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65_536):
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            sink.transport.abort()


@pytest.fixture
async def inbox_proxy(inbox_amqp_url: str) -> AsyncIterator[TcpProxy]:
    """A cuttable relay in front of the local broker."""
    relay = TcpProxy(AMQP_HOST, AMQP_PORT)
    await relay.start()
    try:
        yield relay
    finally:
        await relay.close()


@pytest.fixture
async def inbox_second_proxy(inbox_amqp_url: str) -> AsyncIterator[TcpProxy]:
    """Another cuttable relay in front of the same broker (a second broker address)."""
    relay = TcpProxy(AMQP_HOST, AMQP_PORT)
    await relay.start()
    try:
        yield relay
    finally:
        await relay.close()
