"""The AMQP edge: foreign errors become the fleetd tree, and no password reaches a log."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import aio_pika
import pytest
from aiormq import exceptions as amqp

from fleetd.errors import InboxError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.amqp_edge import envelope_of, millis_to_datetime, redact_url, translated
from fleetd.inbox.codec import DecodeReason
from fleetd.inbox.quarantine import REASON_HEADER, quarantine_copy

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (amqp.PublishError.__new__(amqp.PublishError), InboxOwnershipError),
        (amqp.ChannelNotFoundEntity(404, "NOT_FOUND - no queue"), InboxOwnershipError),
        # aiormq types the frame as required; the mapping reads only the exception's class
        (amqp.DeliveryError(None, None), InboxUnavailableError),  # type: ignore[arg-type]
        (amqp.ChannelPreconditionFailed(406, "PRECONDITION_FAILED"), InboxError),
        (amqp.ConnectionClosed(320, f"amqp://u:{SECRET}@h"), InboxUnavailableError),
        (amqp.ChannelInvalidStateError("closed"), InboxUnavailableError),
        (ConnectionRefusedError(111, "refused"), InboxUnavailableError),
        (TimeoutError(), InboxUnavailableError),
        (InboxOwnershipError("already ours"), InboxOwnershipError),
    ],
)
def test_foreign_errors_are_translated_once(raised: Exception, expected: type) -> None:
    """Each foreign failure maps to one fleetd error whose text names only the operation."""
    with pytest.raises(expected) as caught, translated("publish"):
        raise raised
    assert type(caught.value) is expected
    assert SECRET not in str(caught.value)


def test_programming_errors_are_not_translated() -> None:
    """A bug (here a TypeError) is not disguised as a broker outage."""
    with pytest.raises(TypeError), translated("publish"):
        raise TypeError("bug")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"amqp://fleet:{SECRET}@rabbit:5672/prod", "amqp://rabbit:5672/prod"),
        (f"amqps://fleet:{SECRET}@rabbit/", "amqps://rabbit:5671/"),
        ("amqp://127.0.0.1/", "amqp://127.0.0.1:5672/"),
    ],
)
def test_redacted_url_drops_credentials(url: str, shown: str) -> None:
    """Only scheme, host, port and vhost of the broker URL can reach a log."""
    assert redact_url(url) == shown


async def test_unreachable_broker_is_unavailable_and_the_password_stays_out_of_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused connection is InboxUnavailableError; neither it nor any log shows the secret."""
    caplog.set_level(logging.DEBUG)
    inbox = AmqpInbox(f"amqp://fleet:{SECRET}@127.0.0.1:1/", operation_timeout=2.0)
    with pytest.raises(InboxUnavailableError) as caught:
        await inbox.own("lead1")
    await inbox.close()
    assert SECRET not in str(caught.value)
    assert SECRET not in caplog.text


def test_quarantine_copy_keeps_body_and_properties() -> None:
    """The copy is byte-identical, persistent, keeps headers and ids, and says why."""
    original = aio_pika.Message(
        b"\xff not utf-8",
        headers={"x-custom": "keep"},
        content_type="text/plain",
        content_encoding="identity",
        delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
        correlation_id="c-1",
        reply_to="somewhere",
        expiration=60,
        message_id="m-1",
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        type="reply",
        user_id="old-user",
        app_id="old-build",
    )
    copy = quarantine_copy(original, DecodeReason.MALFORMED_UTF8)  # type: ignore[arg-type]
    assert copy.body == original.body
    assert copy.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert copy.expiration is None
    assert copy.user_id is None
    assert copy.headers["x-custom"] == "keep"
    assert copy.headers[REASON_HEADER] == "malformed_utf8"
    assert copy.headers["x-fleet-original-user-id"] == "old-user"
    assert "x-fleet-original-expiration" in copy.headers
    for name in ("content_type", "content_encoding", "correlation_id", "reply_to", "message_id"):
        assert getattr(copy, name) == getattr(original, name)
    assert (copy.timestamp, copy.type, copy.app_id) == (original.timestamp, "reply", "old-build")


def test_envelope_reads_amqp_properties() -> None:
    """A delivered message becomes the codec's envelope; a naive timestamp is taken as UTC."""
    message = aio_pika.Message(
        b"hi",
        content_type="text/plain",
        message_id="m-1",
        headers={"x-fleet-target": "t"},
        timestamp=datetime(2026, 1, 1, 0, 0, 5),  # a naive wire value on purpose
    )
    envelope = envelope_of(message)  # type: ignore[arg-type]
    assert (envelope.body, envelope.content_type, envelope.message_id) == (
        b"hi",
        "text/plain",
        "m-1",
    )
    assert envelope.headers == {"x-fleet-target": "t"}
    assert envelope.timestamp_epoch_millis == int(
        datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC).timestamp() * 1000
    )
    assert millis_to_datetime(1_500) == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert millis_to_datetime(None) is None
