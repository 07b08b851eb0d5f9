"""The edge between aio-pika and fleetd's types, in one place.

Everything the AMQP adapter and its quarantine lane need from the foreign library passes through
here: delivered messages become :class:`~fleetd.inbox.codec.WireEnvelope` values, aio-pika/aiormq
and socket exceptions become the fleetd error tree (:func:`translated`), and the broker URL is
redacted before it can reach a log. Error texts are fixed phrases naming the operation; they never
carry the foreign exception's text, which may hold a host, a queue argument or worse.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel
from aiormq import exceptions as amqp
from yarl import URL

from fleetd.clock import Clock
from fleetd.errors import InboxError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.codec import WireEnvelope

__all__ = ["attempt", "envelope_of", "is_live", "millis_to_datetime", "redact_url", "translated"]

_T = TypeVar("_T")
_REOPEN_POLL_SECONDS = 0.05

_DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}


def redact_url(url: str) -> str:
    """``scheme://host:port/vhost`` of a broker URL: never the user name or the password."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return "<amqp url>"
    port = parsed.explicit_port or _DEFAULT_PORTS.get(parsed.scheme, 0)
    return f"{parsed.scheme}://{parsed.host}:{port}{parsed.path}"


def millis_to_datetime(millis: int | None) -> datetime | None:
    """An AMQP timestamp (second precision) for an epoch-millisecond value."""
    return None if millis is None else datetime.fromtimestamp(millis // 1000, tz=UTC)


def envelope_of(message: AbstractIncomingMessage) -> WireEnvelope:
    """The codec's view of a delivered message."""
    stamp = message.timestamp
    millis = None
    if isinstance(stamp, datetime):
        aware = stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
        millis = int(aware.timestamp()) * 1000
    return WireEnvelope(
        body=message.body,
        content_type=message.content_type,
        message_id=message.message_id,
        headers=dict(message.headers or {}),
        timestamp_epoch_millis=millis,
        content_encoding=message.content_encoding,
    )


def is_live(message: AbstractIncomingMessage) -> bool:
    """Whether the channel that delivered ``message`` is still open (so it can still be acked)."""
    try:
        return not message.channel.is_closed
    except amqp.ChannelInvalidStateError:
        return False


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """Run a broker operation, turning foreign failures into the fleetd error tree."""
    try:
        yield
    except InboxError:
        raise
    except amqp.PublishError as exc:
        raise InboxOwnershipError(f"{operation}: no queue accepted the message") from exc
    except amqp.ChannelNotFoundEntity as exc:
        raise InboxOwnershipError(f"{operation}: the queue does not exist") from exc
    except amqp.DeliveryError as exc:
        raise InboxUnavailableError(f"{operation}: the broker refused the message") from exc
    except amqp.ChannelPreconditionFailed as exc:
        raise InboxError(f"{operation}: the broker refused a precondition") from exc
    except (
        amqp.AMQPError,
        amqp.ChannelInvalidStateError,
        ConnectionError,
        OSError,
        TimeoutError,
    ) as exc:
        raise InboxUnavailableError(f"{operation}: the broker is unavailable") from exc


async def attempt(
    name: str,
    channel: AbstractRobustChannel,
    action: Callable[[], Awaitable[_T]],
    *,
    within: float,
    clock: Clock,
) -> _T:
    """Run one broker operation within ``within`` seconds, riding out a reconnect.

    A call on a channel that is closed fails before anything is sent, so it is safe to wait for
    the robust channel to come back and try again; any other failure is translated.
    """
    with translated(name):
        async with asyncio.timeout(within):
            while True:
                await channel.ready()
                try:
                    return await action()
                except amqp.ChannelInvalidStateError:
                    await clock.sleep(_REOPEN_POLL_SECONDS)
