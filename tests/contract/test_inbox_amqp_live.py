"""AmqpInbox against the live broker: old wire data, bad data, ownership and connection loss."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection
from aiormq.exceptions import ChannelPreconditionFailed

from fleetd.errors import InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.codec import (
    LEGACY_MEDIA_TYPE,
    MAX_ENTRY_BYTES,
    TARGET_HEADER,
    TYPED_MEDIA_TYPE,
    DecodeReason,
    quarantine_queue_name,
    queue_name,
)
from fleetd.inbox.failures import DecodeFailure, Disposition
from fleetd.inbox.quarantine import REASON_HEADER, AmqpQuarantineLane, QuarantineLane
from fleetd.inbox.records import InboxRecord, MessageKind, Severity

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import RawBroker, TcpProxy

pytest_plugins = ["tests.contract.inbox_fixtures"]
pytestmark = pytest.mark.amqp

ATTEMPTS = 500
"""Upper bound on repeated calls while the broker settles (each call is a real round trip)."""


def reply(key: str, msg_id: str, **changes: Any) -> InboxRecord:
    fields: dict[str, Any] = {
        "msg_id": msg_id,
        "kind": MessageKind.REPLY,
        "target": "term_member_7",
        "recipient_lead": key,
        "content": f"reply {msg_id}",
        "created_at_epoch_millis": 1_786_300_000_000,
    }
    return InboxRecord(**(fields | changes))


def v2_body(key: str, msg_id: str) -> bytes:
    return json.dumps(
        {"schemaVersion": 2, "msgId": msg_id, "recipientLead": key, "parts": []}
    ).encode()


@pytest.fixture
def key(inbox_broker: RawBroker, inbox_new_key: Callable[[], str]) -> str:
    """A fresh key whose queues are deleted after the test."""
    return inbox_broker.track(inbox_new_key())


@pytest.fixture
async def make_inbox(inbox_amqp_url: str) -> Any:
    """Builds AmqpInbox instances (default URL unless given) and closes them all afterwards."""
    made: list[AmqpInbox] = []

    def build(url: str = inbox_amqp_url, **kwargs: Any) -> AmqpInbox:
        made.append(AmqpInbox(url, **kwargs))
        return made[-1]

    yield build
    for inbox in made:
        await inbox.close()


class FlakyLane:
    """A quarantine lane whose first ``failures`` copies fail, as a broken publisher would."""

    def __init__(self, inner: QuarantineLane, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.attempts = 0

    async def copy(self, key: str, message: AbstractIncomingMessage, reason: DecodeReason) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise InboxUnavailableError("quarantine: injected publisher fault")
        await self.inner.copy(key, message, reason)

    async def close(self) -> None:
        await self.inner.close()


def flaky(failures: int) -> tuple[list[FlakyLane], Any]:
    lanes: list[FlakyLane] = []

    def factory(connection: AbstractRobustConnection, timeout: float) -> QuarantineLane:
        lanes.append(FlakyLane(AmqpQuarantineLane(connection, timeout), failures))
        return lanes[-1]

    return lanes, factory


async def test_old_wire_data_is_read_after_reconnect(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """Persistent text/plain written by the old build is read by a new adapter as exact replies."""
    first = make_inbox()
    await first.own(key)
    texts = ['{"status": "done"}', "Grüße ✓ 完成 🚀", "plain\nmultiline"]
    await inbox_broker.publish(key, texts[0].encode(), content_type="text/plain", message_id="o-1")
    await inbox_broker.publish(key, texts[1].encode(), content_type="text/plain")
    await inbox_broker.publish(key, texts[2].encode(), content_type="text/plain; charset=utf-8")
    await first.close()

    second = make_inbox()
    await second.own(key)
    records = await second.collect(key)
    assert [r.content for r in records] == texts
    assert {r.kind for r in records} == {MessageKind.REPLY}
    assert {r.schema_version for r in records} == {None}
    assert records[0].msg_id == "o-1"
    assert len({r.msg_id for r in records}) == 3
    assert second.failures() == []


async def test_distinct_legacy_replies_with_the_same_text_are_all_kept(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """Old-build replies without message ids and with equal text are distinct replies, never one."""
    inbox = make_inbox()
    await inbox.own(key)
    for _ in range(2):
        await inbox_broker.publish_without_id(key, b"done", LEGACY_MEDIA_TYPE)
    first = await inbox.collect(key)
    await inbox_broker.publish_without_id(key, b"done", LEGACY_MEDIA_TYPE)
    later = await inbox.collect(key)
    assert [r.content for r in first + later] == ["done", "done", "done"]
    assert len({r.msg_id for r in first + later}) == 3
    assert await inbox_broker.ready(queue_name(key)) == 0


async def test_mixed_legacy_and_typed_entries_keep_fifo(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """Legacy and typed entries interleave in one queue and come back in publication order."""
    inbox = make_inbox()
    await inbox.own(key)
    await inbox_broker.publish(key, b"legacy one", content_type=LEGACY_MEDIA_TYPE)
    await inbox.publish(reply(key, "t-1"))
    await inbox_broker.publish(key, b"{legacy two", content_type=LEGACY_MEDIA_TYPE)
    await inbox.publish(reply(key, "t-2", content="typed two"))
    records = await inbox.collect(key)
    assert [r.content for r in records] == ["legacy one", "reply t-1", "{legacy two", "typed two"]
    assert [r.schema_version for r in records] == [None, 1, None, 1]


async def test_typed_entries_carry_the_promised_properties(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """New entries are persistent, vendor-typed UTF-8 JSON v1 with the AMQP message id set."""
    inbox = make_inbox()
    await inbox.own(key)
    await inbox.publish(reply(key, "p-1", content="✓", created_at_epoch_millis=1_786_300_000_999))
    [message] = await inbox_broker.drain(queue_name(key))
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.content_type == TYPED_MEDIA_TYPE
    assert message.message_id == "p-1"
    assert message.headers[TARGET_HEADER] == "term_member_7"
    assert message.timestamp is not None
    assert int(message.timestamp.timestamp()) == 1_786_300_000
    document = json.loads(message.body.decode("utf-8"))
    assert document["schemaVersion"] == 1
    assert "✓".encode() in message.body


async def test_progress_past_poison(inbox_broker: RawBroker, key: str, make_inbox: Any) -> None:
    """Bad entries in between never reach the caller and never stop later valid ones."""
    seen: list[DecodeFailure] = []
    inbox = make_inbox(on_decode_failure=seen.append)
    await inbox.own(key)
    await inbox.publish(reply(key, "v-1"))
    await inbox_broker.publish(key, b'{"schemaVersion": 1,', content_type=TYPED_MEDIA_TYPE)
    await inbox_broker.publish(key, b"who knows", content_type="application/octet-stream")
    await inbox_broker.publish(key, b"\xff\xfe", content_type=LEGACY_MEDIA_TYPE)
    await inbox_broker.publish(
        key, v2_body(key, "v2-1"), content_type=TYPED_MEDIA_TYPE, message_id="v2-1"
    )
    await inbox_broker.publish(key, b"legacy after poison", content_type=LEGACY_MEDIA_TYPE)
    await inbox.publish(reply(key, "v-2"))

    records = await inbox.collect(key)
    assert [r.content for r in records] == ["reply v-1", "legacy after poison", "reply v-2"]
    reasons = sorted(f.reason for f in inbox.failures())
    assert reasons == sorted(
        [
            DecodeReason.MALFORMED_JSON,
            DecodeReason.UNKNOWN_MEDIA_TYPE,
            DecodeReason.MALFORMED_UTF8,
            DecodeReason.UNSUPPORTED_VERSION,
        ]
    )
    assert len(seen) == 4
    assert await inbox_broker.ready(quarantine_queue_name(key)) == 3
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 1  # only the newer version stays


async def test_quarantine_copy_is_confirmed_before_the_original_is_acked(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """The byte-identical persistent copy is in quarantine while the original is still unacked."""
    observed: list[tuple[bool, int | None]] = []

    class WatchingLane(AmqpQuarantineLane):
        async def copy(
            self, key: str, message: AbstractIncomingMessage, reason: DecodeReason
        ) -> None:
            await super().copy(key, message, reason)
            waiting = await inbox_broker.ready(quarantine_queue_name(key))
            observed.append((message.processed, waiting))

    inbox = make_inbox(quarantine=WatchingLane)
    await inbox.own(key)
    body = b'{"schemaVersion": 1, "kind": "reply", "msgId": "bad-1"}'
    await inbox_broker.publish(
        key,
        body,
        content_type=TYPED_MEDIA_TYPE,
        message_id="bad-1",
        correlation_id="corr-1",
        headers={"x-custom": "keep-me"},
        delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
    )
    assert await inbox.collect(key) == []
    assert observed == [(False, 1)]
    [copy] = await inbox_broker.drain(quarantine_queue_name(key))
    assert copy.body == body
    assert copy.content_type == TYPED_MEDIA_TYPE
    assert (copy.message_id, copy.correlation_id) == ("bad-1", "corr-1")
    assert copy.headers["x-custom"] == "keep-me"
    assert copy.headers[REASON_HEADER] == DecodeReason.MISSING_FIELD
    assert copy.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    [failure] = inbox.failures()
    assert (failure.disposition, failure.detail) == (Disposition.QUARANTINED, "content")
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 0


async def test_failed_quarantine_handoff_leaves_the_original_unacked(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """When the copy fails the original stays on its queue; later valid entries still flow."""
    lanes, factory = flaky(failures=10)
    inbox = make_inbox(quarantine=factory)
    await inbox.own(key)
    await inbox_broker.publish(key, b"[1, 2]", content_type=TYPED_MEDIA_TYPE, message_id="bad-2")
    await inbox.publish(reply(key, "after"))
    assert [r.msg_id for r in await inbox.collect(key)] == ["after"]
    assert [f.disposition for f in inbox.failures()] == [Disposition.QUARANTINE_PENDING]
    assert await inbox.release(key) is False
    assert await inbox_broker.ready(quarantine_queue_name(key)) in (None, 0)
    await inbox.close()
    [original] = await inbox_broker.drain(queue_name(key))
    assert (original.body, original.message_id) == (b"[1, 2]", "bad-2")
    assert lanes[0].attempts == 1


async def test_failed_quarantine_is_retried_on_the_next_collect(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """A held invalid entry is copied and acked once the quarantine publisher recovers."""
    seen: list[DecodeFailure] = []
    lanes, factory = flaky(failures=1)
    inbox = make_inbox(quarantine=factory, on_decode_failure=seen.append)
    await inbox.own(key)
    await inbox_broker.publish(key, b"{}", content_type=TYPED_MEDIA_TYPE, message_id="bad-3")
    assert await inbox.collect(key) == []
    assert await inbox.collect(key) == []
    [failure] = inbox.failures()
    assert failure.disposition is Disposition.QUARANTINED
    assert len(seen) == 1
    assert lanes[0].attempts == 2
    assert await inbox_broker.ready(quarantine_queue_name(key)) == 1
    assert await inbox.release(key) is True


async def test_unsupported_version_stays_on_the_queue_as_one_failure(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """A newer schema version is neither decoded nor acked, blocks nothing, and is one failure."""
    seen: list[DecodeFailure] = []
    inbox = make_inbox(on_decode_failure=seen.append)
    await inbox.own(key)
    body = v2_body(key, "v2-2")
    await inbox_broker.publish(key, body, content_type=TYPED_MEDIA_TYPE, message_id="v2-2")
    await inbox.publish(reply(key, "later"))
    waiting = await inbox.stats(key)  # not yet seen by a collect: still no backlog
    assert (waiting.depth, waiting.actionable, len(waiting.replies)) == (2, 1, 1)
    assert [r.msg_id for r in await inbox.collect(key)] == ["later"]
    assert await inbox.collect(key) == []
    held = await inbox.stats(key)
    assert (held.depth, held.actionable, held.replies) == (1, 0, ())  # not the lead's backlog
    assert await inbox.release(key) is False
    [failure] = inbox.failures()
    assert (failure.reason, failure.version, failure.disposition) == (
        DecodeReason.UNSUPPORTED_VERSION,
        2,
        Disposition.HELD,
    )
    assert len(seen) == 1
    await inbox.close()

    again = make_inbox()
    await again.own(key)
    assert await again.collect(key) == []
    assert [f.reason for f in again.failures()] == [DecodeReason.UNSUPPORTED_VERSION]
    await again.close()
    [original] = await inbox_broker.drain(queue_name(key))
    assert original.body == body
    assert original.redelivered


async def test_unsupported_redelivery_after_connection_loss_is_still_one_failure(
    inbox_broker: RawBroker, inbox_proxy: TcpProxy, key: str, make_inbox: Any
) -> None:
    """When the connection drops, the held entry returns and is held again without a new failure."""
    seen: list[DecodeFailure] = []
    url = f"amqp://guest:guest@127.0.0.1:{inbox_proxy.port}/?reconnect_interval=0.1"
    inbox = make_inbox(url, on_decode_failure=seen.append)
    await inbox.own(key)
    await inbox_broker.publish(
        key, v2_body(key, "v2-3"), content_type=TYPED_MEDIA_TYPE, message_id="v2-3"
    )
    assert await inbox.collect(key) == []
    inbox_proxy.sever()
    for _ in range(10):  # the first call may meet the dead link; later ones wait for the reconnect
        with contextlib.suppress(InboxUnavailableError):
            assert await inbox.publish(reply(key, "after-loss")) is True
            break
    collected: list[str] = []
    for _ in range(ATTEMPTS):  # the broker puts the held entry back a little after the loss
        collected += [r.msg_id for r in await inbox.collect(key)]
        if collected and inbox.failures()[0].occurrences == 2:
            break
    assert collected == ["after-loss"]
    [failure] = inbox.failures()
    assert failure.occurrences == 2
    assert len(seen) == 1


async def test_ownership_on_the_broker(inbox_broker: RawBroker, key: str, make_inbox: Any) -> None:
    """Only own declares the durable queue; release deletes it only when empty."""
    inbox = make_inbox()
    with pytest.raises(InboxOwnershipError):
        await inbox.publish(reply(key, "m-1"))
    assert await inbox_broker.ready(queue_name(key)) is None
    await inbox.own(key)
    assert await inbox_broker.ready(queue_name(key)) == 0
    async with inbox_broker.connection.channel() as channel:
        with pytest.raises(ChannelPreconditionFailed):
            await channel.declare_queue(queue_name(key), durable=False, robust=False)
    await inbox.publish(reply(key, "m-1"))
    assert await inbox.release(key) is False
    assert await inbox_broker.ready(queue_name(key)) == 1
    await inbox.collect(key)
    assert await inbox.release(key) is True
    assert await inbox_broker.ready(queue_name(key)) is None


async def test_publication_never_recreates_a_deleted_queue(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """If an owned queue vanishes, publish fails instead of claiming or silently dropping."""
    inbox = make_inbox()
    await inbox.own(key)
    async with inbox_broker.connection.channel() as channel:
        await channel.queue_delete(queue_name(key))
    with pytest.raises(InboxOwnershipError):
        await inbox.publish(reply(key, "m-1"))
    assert await inbox_broker.ready(queue_name(key)) is None


async def test_collection_acks_on_the_broker(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """Collected entries are acknowledged: closing the adapter returns nothing to the queue."""
    inbox = make_inbox()
    await inbox.own(key)
    for n in range(3):
        await inbox.publish(reply(key, f"a-{n}"))
    assert len(await inbox.collect(key, limit=2)) == 2
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 1


async def test_forced_connection_close_mid_consume_loses_and_duplicates_nothing(
    inbox_broker: RawBroker, inbox_proxy: TcpProxy, key: str, make_inbox: Any
) -> None:
    """The link drops while a collect is half way; the caller still sees each entry exactly once."""
    url = f"amqp://guest:guest@127.0.0.1:{inbox_proxy.port}/?reconnect_interval=0.1"
    batches: list[list[str]] = []
    cuts: list[int] = []

    def cut(failure: DecodeFailure) -> None:
        cuts.append(len(batches))  # how many collects had finished when the link was cut
        inbox_proxy.sever()

    inbox = make_inbox(url, on_decode_failure=cut)
    await inbox.own(key)
    expected = [f"f-{n:02d}" for n in range(20)]
    for msg_id in expected[:10]:
        await inbox.publish(reply(key, msg_id))
    await inbox_broker.publish(key, b"not json", content_type=TYPED_MEDIA_TYPE)  # cuts the link
    for msg_id in expected[10:]:
        await inbox.publish(reply(key, msg_id))

    async def drain() -> None:
        for _ in range(ATTEMPTS):  # each call waits (bounded) for the robust reconnect
            if sum(map(len, batches)) >= len(expected):
                return
            with contextlib.suppress(InboxUnavailableError):
                batches.append([r.msg_id for r in await inbox.collect(key)])

    await asyncio.wait_for(drain(), timeout=30)
    seen = [msg_id for batch in batches for msg_id in batch]
    assert cuts == [0]  # the link was cut inside the first collect, after ten entries
    assert seen == expected
    assert await inbox.collect(key) == []
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 0


async def test_stats_count_by_kind_and_leave_entries_in_place(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """stats browses without consuming: order and content survive a stats call."""
    inbox = make_inbox()
    await inbox.own(key)
    await inbox_broker.publish(key, b"legacy", content_type=LEGACY_MEDIA_TYPE)
    await inbox.publish(
        InboxRecord(
            msg_id="h-1",
            kind=MessageKind.HEALTH,
            target="term_member_7",
            subject_terminal="term_member_7",
            recipient_lead=key,
            severity=Severity.WARNING,
            state="MUTE",
            evidence={},
            created_at_epoch_millis=5,
            first_seen_epoch_millis=1,
            last_seen_epoch_millis=2,
            recovery_tried=False,
            suggested_tool_calls=(),
            content="mute",
        )
    )
    stats = await inbox.stats(key)
    assert stats.depth == 2
    assert dict(stats.by_kind) == {MessageKind.REPLY: 1, MessageKind.HEALTH: 1}
    assert stats.oldest_created_epoch_millis == 5
    assert [r.content for r in await inbox.collect(key)] == ["legacy", "mute"]


async def test_batch_acks_never_cover_an_entry_held_for_another_key(
    inbox_broker: RawBroker, inbox_new_key: Callable[[], str], make_inbox: Any
) -> None:
    """Collecting one key never acknowledges an unsupported entry held from another key."""
    holding, other = inbox_broker.track(inbox_new_key()), inbox_broker.track(inbox_new_key())
    inbox = make_inbox()
    await inbox.own(holding)
    await inbox.own(other)
    await inbox_broker.publish(
        holding, v2_body(holding, "v2-4"), content_type=TYPED_MEDIA_TYPE, message_id="v2-4"
    )
    assert await inbox.collect(holding) == []
    for n in range(3):
        await inbox.publish(reply(other, f"o-{n}"))
    assert len(await inbox.collect(other)) == 3
    await inbox.close()
    assert await inbox_broker.ready(queue_name(holding)) == 1
    assert await inbox_broker.ready(queue_name(other)) == 0


async def test_a_drain_larger_than_the_consumer_window_takes_several_rounds(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """With a small prefetch window, one collect still drains everything ready, in order."""
    inbox = make_inbox(collect_window=3)
    await inbox.own(key)
    for n in range(4):
        await inbox_broker.publish(
            key, v2_body(key, f"v2-w{n}"), content_type=TYPED_MEDIA_TYPE, message_id=f"v2-w{n}"
        )
    expected = [f"w-{n:02d}" for n in range(10)]
    for msg_id in expected:
        await inbox.publish(reply(key, msg_id))
    assert [r.msg_id for r in await inbox.collect(key)] == expected
    assert [r.msg_id for r in await inbox.collect(key, limit=2)] == []
    assert len(inbox.failures()) == 4


async def test_a_cancelled_collect_requeues_everything_in_place(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """Cancelling a collect mid-way returns its pulled entries to the queue, order intact."""
    entered = asyncio.Event()

    class StallingLane(AmqpQuarantineLane):
        stalls = 1

        async def copy(
            self, key: str, message: AbstractIncomingMessage, reason: DecodeReason
        ) -> None:
            if StallingLane.stalls:
                StallingLane.stalls -= 1
                entered.set()
                await asyncio.Event().wait()  # a quarantine publish that never completes
            await super().copy(key, message, reason)

    inbox = make_inbox(quarantine=StallingLane)
    await inbox.own(key)
    await inbox.publish(reply(key, "c-1"))
    await inbox.publish(reply(key, "c-2"))
    await inbox_broker.publish(key, b"{", content_type=TYPED_MEDIA_TYPE, message_id="bad-c")
    await inbox.publish(reply(key, "c-3"))
    collecting = asyncio.ensure_future(inbox.collect(key))
    await asyncio.wait_for(entered.wait(), timeout=10)
    collecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await collecting
    seen: list[str] = []
    for _ in range(ATTEMPTS):  # requeued entries become visible to a count a little later
        seen += [r.msg_id for r in await inbox.collect(key)]
        if len(seen) >= 3:
            break
    assert seen == ["c-1", "c-2", "c-3"]
    assert [f.disposition for f in inbox.failures()] == [Disposition.QUARANTINED]
    assert await inbox.release(key) is True


async def test_an_encoded_or_oversized_entry_is_quarantined_never_a_reply(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """A gzip-encoded body read as text would be garbage passed off as a reply, and a body past
    the entry bound would be parsed and handed to a poll whole: both are copied to quarantine
    (their content_encoding kept) and acked; the valid entry behind them is the only reply."""
    inbox = make_inbox()
    await inbox.own(key)
    await inbox_broker.publish(
        key,
        b"\x1f\x8b\x08\x00compressed",
        content_type=LEGACY_MEDIA_TYPE,
        content_encoding="gzip",
        message_id="zipped-1",
    )
    await inbox_broker.publish(
        key, b"x" * (MAX_ENTRY_BYTES + 1), content_type=LEGACY_MEDIA_TYPE, message_id="huge-1"
    )
    await inbox_broker.publish(
        key, b"plain", content_type=LEGACY_MEDIA_TYPE, content_encoding="utf-8", message_id="ok-1"
    )
    [record] = await inbox.collect(key)
    assert (record.msg_id, record.content) == ("ok-1", "plain")
    copies = {c.message_id: c for c in await inbox_broker.drain(quarantine_queue_name(key))}
    assert copies["zipped-1"].headers[REASON_HEADER] == DecodeReason.UNSUPPORTED_ENCODING
    assert copies["zipped-1"].content_encoding == "gzip"
    assert copies["huge-1"].headers[REASON_HEADER] == DecodeReason.TOO_LARGE
    assert len(copies["huge-1"].body) == MAX_ENTRY_BYTES + 1
    assert {f.disposition for f in inbox.failures()} == {Disposition.QUARANTINED}
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 0


async def test_another_body_under_a_taken_id_is_quarantined_a_redelivery_dropped(
    inbox_broker: RawBroker, key: str, make_inbox: Any
) -> None:
    """A publisher that reuses a message id does not lose the second reply unseen: the same body
    again is a redelivery (dropped), another body under the id is quarantined as reused_id —
    within one drain and across drains."""
    inbox = make_inbox()
    await inbox.own(key)
    for body in (b"first", b"first", b"second"):
        await inbox_broker.publish(key, body, content_type=LEGACY_MEDIA_TYPE, message_id="id-1")
    records = await inbox.collect(key)
    assert [(r.msg_id, r.content) for r in records] == [("id-1", "first")]
    await inbox_broker.publish(key, b"third", content_type=LEGACY_MEDIA_TYPE, message_id="id-1")
    await inbox_broker.publish(key, b"first", content_type=LEGACY_MEDIA_TYPE, message_id="id-1")
    assert await inbox.collect(key) == []
    copies = await inbox_broker.drain(quarantine_queue_name(key))
    assert [(c.body, c.headers[REASON_HEADER]) for c in copies] == [
        (b"second", DecodeReason.REUSED_ID),
        (b"third", DecodeReason.REUSED_ID),
    ]
    await inbox.close()
    assert await inbox_broker.ready(queue_name(key)) == 0


async def test_collect_after_collect_leaves_nothing_behind_on_the_connection(
    key: str, make_inbox: Any
) -> None:
    """Each collect consumes its entries in a round of its own. A round through aio-pika's
    queue iterator left a shielded future and its callback on the consumer channel's and the
    connection's close futures, freed only when the connection closed: about 2 KB per collect
    that found entries, for the life of the connection (a black-box soak measured some 140 KB a
    minute). Two hundred collects now leave the live futures where they were."""
    import gc  # noqa: PLC0415

    inbox = make_inbox()
    await inbox.own(key)

    async def one_round(n: int) -> None:
        assert await inbox.publish(reply(key, f"m-{n}"))
        assert [r.msg_id for r in await inbox.collect(key)] == [f"m-{n}"]

    def futures() -> int:
        gc.collect()
        return sum(isinstance(o, asyncio.Future) for o in gc.get_objects())

    for n in range(20):  # channels, QoS and caches settle first
        await one_round(n)
    before = futures()
    for n in range(20, 220):
        await one_round(n)
    assert futures() - before < 40
