"""One semantic contract for every ReplyInbox adapter: in-memory and AMQP run the same cases."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from fleetd.errors import InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import InboxRecord, MessageKind, ReplySource, Severity

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import InboxKit

pytest_plugins = ["tests.contract.inbox_fixtures"]


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


def health(key: str, msg_id: str, **changes: Any) -> InboxRecord:
    fields: dict[str, Any] = {
        "msg_id": msg_id,
        "kind": MessageKind.HEALTH,
        "target": "term_member_7",
        "subject_terminal": "term_member_7",
        "recipient_lead": key,
        "severity": Severity.CRITICAL,
        "state": "TURN_BOUNDARY_LOST",
        "evidence": {"snapshots": 2, "rawStatus": "idle", "age": 9.5, "repair": False, "x": None},
        "created_at_epoch_millis": 1_786_300_005_000,
        "first_seen_epoch_millis": 1_786_299_990_000,
        "last_seen_epoch_millis": 1_786_300_004_000,
        "recovery_tried": True,
        "suggested_tool_calls": ('fleet_poll(target="term_lead_1")',),
        "content": "turn boundary lost on term_member_7",
        "ticket": "tk_12",
    }
    return InboxRecord(**(fields | changes))


async def owned(inbox_kit: InboxKit) -> tuple[ReplyInbox, str]:
    inbox, key = inbox_kit.build(), inbox_kit.key()
    await inbox.own(key)
    return inbox, key


async def test_fields_are_preserved(inbox_kit: InboxKit) -> None:
    """A collected record equals the published one, for both kinds and optional fields."""
    inbox, key = await owned(inbox_kit)
    records = [
        reply(key, "r-1", content='{"a": 1} ✓ 日本語\n', ticket="tk_1", source=ReplySource.LATE),
        reply(key, "r-2", content=""),
        health(key, "h-1"),
        health(key, "h-2", evidence={}, suggested_tool_calls=(), severity=Severity.INFO),
    ]
    for record in records:
        assert await inbox.publish(record) is True
    assert await inbox.collect(key) == records


async def test_collect_is_fifo_and_honours_limit(inbox_kit: InboxKit) -> None:
    """Entries come back oldest first, at most ``limit`` at a time, each exactly once."""
    inbox, key = await owned(inbox_kit)
    for n in range(7):
        await inbox.publish(reply(key, f"m-{n}"))
    first = await inbox.collect(key, limit=3)
    none = await inbox.collect(key, limit=0)
    rest = await inbox.collect(key)
    assert [r.msg_id for r in first] == ["m-0", "m-1", "m-2"]
    assert none == []
    assert [r.msg_id for r in rest] == ["m-3", "m-4", "m-5", "m-6"]
    assert await inbox.collect(key) == []


async def test_first_id_wins(inbox_kit: InboxKit) -> None:
    """A second publication of an id into the same key is refused, even after collection."""
    inbox, key = await owned(inbox_kit)
    assert await inbox.publish(reply(key, "dup", content="first")) is True
    assert await inbox.publish(reply(key, "dup", content="second")) is False
    [only] = await inbox.collect(key)
    assert only.content == "first"
    assert await inbox.publish(reply(key, "dup", content="third")) is False
    assert await inbox.collect(key) == []


async def test_dedup_is_per_key(inbox_kit: InboxKit) -> None:
    """The same id may live under two keys (a move keeps its id)."""
    inbox, key = await owned(inbox_kit)
    other = inbox_kit.key()
    await inbox.own(other)
    assert await inbox.publish(reply(key, "same")) is True
    assert await inbox.publish(reply(other, "same")) is True
    assert [r.recipient_lead for r in await inbox.collect(other)] == [other]


async def test_ownership_is_required_and_publication_never_claims(inbox_kit: InboxKit) -> None:
    """publish, collect and stats on an unowned key raise; a refused publish stores nothing."""
    inbox, key = inbox_kit.build(), inbox_kit.key()
    with pytest.raises(InboxOwnershipError):
        await inbox.publish(reply(key, "m-1"))
    with pytest.raises(InboxOwnershipError):
        await inbox.collect(key)
    with pytest.raises(InboxOwnershipError):
        await inbox.stats(key)
    await inbox.own(key)
    assert await inbox.collect(key) == []
    assert await inbox.publish(reply(key, "m-1")) is True


async def test_own_is_idempotent_and_keeps_entries(inbox_kit: InboxKit) -> None:
    """Owning an owned key again changes nothing."""
    inbox, key = await owned(inbox_kit)
    await inbox.publish(reply(key, "m-1"))
    await inbox.own(key)
    assert [r.msg_id for r in await inbox.collect(key)] == ["m-1"]


async def test_collection_acknowledges_and_removes(inbox_kit: InboxKit) -> None:
    """What collect returned is gone: stats drop to zero and a new collect finds nothing."""
    inbox, key = await owned(inbox_kit)
    await inbox.publish(reply(key, "m-1"))
    await inbox.publish(health(key, "h-1"))
    assert len(await inbox.collect(key)) == 2
    stats = await inbox.stats(key)
    assert (stats.depth, stats.oldest_created_epoch_millis) == (0, None)
    assert await inbox.collect(key) == []


async def test_release_keeps_a_non_empty_key(inbox_kit: InboxKit) -> None:
    """A key holding entries is not released and stays usable; once empty it is released."""
    inbox, key = await owned(inbox_kit)
    await inbox.publish(reply(key, "m-1"))
    assert await inbox.release(key) is False
    assert await inbox.publish(reply(key, "m-2")) is True
    assert len(await inbox.collect(key)) == 2
    assert await inbox.release(key) is True
    with pytest.raises(InboxOwnershipError):
        await inbox.publish(reply(key, "m-3"))


async def test_release_of_an_unknown_key_is_a_no_op(inbox_kit: InboxKit) -> None:
    """Releasing a key that was never owned reports it as gone."""
    inbox = inbox_kit.build()
    assert await inbox.release(inbox_kit.key()) is True


async def test_stats_describe_what_waits(inbox_kit: InboxKit) -> None:
    """Depth, oldest creation time and counts by kind, without consuming anything."""
    inbox, key = await owned(inbox_kit)
    await inbox.publish(reply(key, "m-1", created_at_epoch_millis=3_000))
    await inbox.publish(health(key, "h-1", created_at_epoch_millis=2_000))
    await inbox.publish(reply(key, "m-2", created_at_epoch_millis=4_000))
    stats = await inbox.stats(key)
    assert stats.depth == 3
    assert stats.oldest_created_epoch_millis == 2_000
    assert dict(stats.by_kind) == {MessageKind.REPLY: 2, MessageKind.HEALTH: 1}
    assert stats.actionable == 3
    assert [(r.target, r.created_epoch_millis) for r in stats.replies] == [
        ("term_member_7", 3_000),
        ("term_member_7", 4_000),
    ]
    assert [r.msg_id for r in await inbox.collect(key)] == ["m-1", "h-1", "m-2"]


async def test_valid_traffic_reports_no_failures(inbox_kit: InboxKit) -> None:
    """Nothing decodes badly, so failures() stays empty."""
    inbox, key = await owned(inbox_kit)
    await inbox.publish(health(key, "h-1"))
    await inbox.collect(key)
    assert inbox.failures() == []


async def test_negative_limit_is_a_programming_error(inbox_kit: InboxKit) -> None:
    """limit must not be negative."""
    inbox, key = await owned(inbox_kit)
    with pytest.raises(ValueError, match="limit"):
        await inbox.collect(key, limit=-1)


async def test_legacy_records_are_not_published(inbox_kit: InboxKit) -> None:
    """Only typed records are written; a legacy record is refused before it is stored."""
    inbox, key = await owned(inbox_kit)
    legacy = InboxRecord(
        msg_id="old", kind=MessageKind.REPLY, target=key, recipient_lead=key, content="x",
        schema_version=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match="legacy"):
        await inbox.publish(legacy)
    assert await inbox.collect(key) == []


async def test_a_closed_inbox_refuses_calls(inbox_kit: InboxKit) -> None:
    """After close every call raises InboxUnavailableError."""
    inbox, key = await owned(inbox_kit)
    await inbox.close()
    with pytest.raises(InboxUnavailableError):
        await inbox.publish(reply(key, "m-1"))
    with pytest.raises(InboxUnavailableError):
        await inbox.collect(key)
