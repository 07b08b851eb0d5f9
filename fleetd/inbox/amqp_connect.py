"""Opening one broker connection and its channels, and naming how a connect or call failed.

:func:`open_generation` dials one broker URL with aio-pika's robust connection, within the connect
watchdog, opens one channel per job (and the quarantine lane) within the operation watchdog, and
returns them as a :class:`Generation`. Everything that goes wrong is translated once, by
:func:`~fleetd.inbox.amqp_edge.translated`, into :class:`~fleetd.errors.InboxUnavailableError`;
:func:`classify` reads the cause chain of such an error into the
:class:`~fleetd.resilience.ErrorClass` the breakers and health records speak.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass

import aio_pika
from aio_pika.abc import AbstractRobustChannel, AbstractRobustConnection
from aiormq import exceptions as amqp
from yarl import URL

from fleetd.errors import InboxUnavailableError
from fleetd.inbox.amqp_edge import redact_url, translated
from fleetd.inbox.quarantine import QuarantineLane, QuarantineLaneFactory
from fleetd.resilience import ErrorClass

__all__ = [
    "RECONNECT_INTERVAL",
    "Channels",
    "Generation",
    "OnConnect",
    "classify",
    "close_quietly",
    "open_generation",
]

logger = logging.getLogger("fleetd.inbox")

#: How often a robust connection tries to reconnect (aio-pika's default is 5 s).
RECONNECT_INTERVAL = 1.0


@dataclass(slots=True)
class Channels:
    """The channels of one connection, one per job."""

    admin: AbstractRobustChannel  # declare, passive declare, delete
    publisher: AbstractRobustChannel  # confirms + mandatory
    consumer: AbstractRobustChannel  # consume and ack; holds unsupported entries
    browser: AbstractRobustChannel  # stats: get then requeue
    lane: QuarantineLane


@dataclass(slots=True, eq=False)
class Generation:
    """One connection to broker ``index``; a retired one closes when its last lease ends."""

    index: int
    url: str
    connection: AbstractRobustConnection
    channels: Channels
    leases: int = 0
    retired: bool = False

    @property
    def up(self) -> bool:
        """The connection is open now (not reconnecting)."""
        return self.connection.connected.is_set()


OnConnect = Callable[[Channels], Awaitable[None]]
"""Run on a new connection before it serves (re-declaring the owned queues)."""


async def open_generation(
    index: int,
    url: str,
    *,
    connect_timeout: float,
    operation_timeout: float,
    lane_factory: QuarantineLaneFactory,
    on_connect: OnConnect | None = None,
    label: str = "",
) -> Generation:
    """Connect to ``url`` and open its channels, each step within its watchdog."""
    with translated("connect"):
        target = URL(url)
        if "reconnect_interval" not in target.query:
            target = target.update_query(reconnect_interval=RECONNECT_INTERVAL)
        # aio_pika.connect_robust, but keeping the connection: one that fails to connect is
        # closed here, not left to its __del__ (which schedules a close nobody awaits).
        connection = aio_pika.RobustConnection(
            target, client_properties={"connection_name": "fleetd-inbox"}
        )
        try:
            async with asyncio.timeout(connect_timeout):
                await connection.connect(timeout=connect_timeout)
        except BaseException:
            await close_quietly(connection)
            raise
        try:
            async with asyncio.timeout(operation_timeout):
                channels = Channels(
                    admin=await connection.channel(publisher_confirms=False),
                    publisher=await connection.channel(
                        publisher_confirms=True, on_return_raises=True
                    ),
                    consumer=await connection.channel(publisher_confirms=False),
                    browser=await connection.channel(publisher_confirms=False),
                    lane=lane_factory(connection, operation_timeout),
                )
                if on_connect is not None:
                    await on_connect(channels)
        except BaseException:
            await close_quietly(connection)
            raise
    logger.info("inbox connected to %s%s", redact_url(url), label)
    return Generation(index=index, url=url, connection=connection, channels=channels)


async def close_quietly(connection: AbstractRobustConnection) -> None:
    """Close ``connection``; a broker that is already gone is not an error here."""
    with suppress(InboxUnavailableError), translated("close"):
        await connection.close()


def classify(error: BaseException) -> ErrorClass:
    """The error class of a failed connect or call, read from its cause chain."""
    seen: BaseException | None = error
    visited: set[int] = set()  # a chain can loop back on itself
    while seen is not None and id(seen) not in visited:
        visited.add(id(seen))
        if isinstance(seen, amqp.ProbableAuthenticationError):
            return ErrorClass.AUTH
        if isinstance(seen, TimeoutError):
            return ErrorClass.TIMEOUT
        if isinstance(seen, ConnectionRefusedError | socket.gaierror):
            return ErrorClass.REFUSED
        seen = seen.__cause__ or seen.__context__
    return ErrorClass.RESET
