"""The quarantine lane: byte-for-byte copies of invalid inbox entries (M4 §7.2).

An entry of a known format that does not decode is not dropped and not retried forever: it is
copied, body unchanged and properties kept, to the durable queue ``agent.<key>.inbox.quarantine``
where an operator can inspect it. The lane publishes on its own confirm-mode channel, so a copy
counts as made only when the broker has confirmed the persistent message, and a broken quarantine
channel cannot disturb the inbox channels. The caller acknowledges the original only after
:meth:`QuarantineLane.copy` returns; if it raises, the original stays unacknowledged.

The copy keeps every property except two the broker would act on: ``expiration`` (it would expire
the evidence) and ``user_id`` (the broker rejects a user id that is not the publisher's). Those two
are kept as headers instead, next to ``x-fleet-quarantine-reason``. The copy is always persistent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import aio_pika
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractRobustChannel,
    AbstractRobustConnection,
)

from fleetd.errors import InboxError
from fleetd.inbox.amqp_edge import translated
from fleetd.inbox.codec import DecodeReason, quarantine_queue_name

__all__ = [
    "REASON_HEADER",
    "AmqpQuarantineLane",
    "QuarantineLane",
    "QuarantineLaneFactory",
    "quarantine_copy",
]

REASON_HEADER = "x-fleet-quarantine-reason"


class QuarantineLane(Protocol):
    """Where invalid entries go before their original is acknowledged."""

    async def copy(self, key: str, message: AbstractIncomingMessage, reason: DecodeReason) -> None:
        """Store a confirmed copy of ``message`` for ``key``, or raise."""
        ...

    async def close(self) -> None:
        """Close the lane's channel."""
        ...


QuarantineLaneFactory = Callable[[AbstractRobustConnection, float], QuarantineLane]
"""Builds the lane from the adapter's connection and its operation timeout (seconds)."""


def quarantine_copy(message: AbstractIncomingMessage, reason: DecodeReason) -> aio_pika.Message:
    """The persistent copy of ``message``: same body, same properties, reason in a header."""
    headers = dict(message.headers or {})
    headers[REASON_HEADER] = reason.value
    if message.expiration is not None:
        headers["x-fleet-original-expiration"] = str(message.expiration)
    if message.user_id is not None:
        headers["x-fleet-original-user-id"] = message.user_id
    return aio_pika.Message(
        message.body,
        headers=headers,
        content_type=message.content_type,
        content_encoding=message.content_encoding,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        priority=message.priority,
        correlation_id=message.correlation_id,
        reply_to=message.reply_to,
        message_id=message.message_id,
        timestamp=message.timestamp,
        type=message.type,
        app_id=message.app_id,
    )


class AmqpQuarantineLane:
    """Publishes quarantine copies on a dedicated confirm-mode channel."""

    def __init__(self, connection: AbstractRobustConnection, timeout: float) -> None:
        self._connection = connection
        self._timeout = timeout
        self._channel: AbstractRobustChannel | None = None
        self._declared: set[str] = set()

    async def copy(self, key: str, message: AbstractIncomingMessage, reason: DecodeReason) -> None:
        name = quarantine_queue_name(key)
        try:
            with translated("quarantine"):
                channel = await self._open_channel()
                async with asyncio.timeout(self._timeout):
                    await channel.ready()
                if name not in self._declared:
                    await channel.declare_queue(
                        name, durable=True, robust=False, timeout=self._timeout
                    )
                    self._declared.add(name)
                await channel.default_exchange.publish(
                    quarantine_copy(message, reason),
                    routing_key=name,
                    mandatory=True,
                    timeout=self._timeout,
                )
        except InboxError:
            self._declared.discard(name)  # declare again next time: the queue may be gone
            raise

    async def close(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            with translated("quarantine close"):
                await self._channel.close()

    async def _open_channel(self) -> AbstractRobustChannel:
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._connection.channel(
                publisher_confirms=True, on_return_raises=True
            )
            self._declared.clear()
        return self._channel
