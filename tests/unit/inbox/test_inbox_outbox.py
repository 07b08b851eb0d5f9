"""LeadOutbox holds what the inbox cannot take (bounded), flushes it oldest first, and drains a
lead's inbox so that a cancelled drain loses nothing."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

import fleetd.inbox.outbox as outbox_module
from fleetd.errors import InboxRetryError, InboxUnavailableError
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.inbox.registry import LeadInboxRegistry
from tests.inbox_records import typed_record


class FlakyInbox(InMemoryInbox):
    """An InMemoryInbox that can be down, and whose next collect can be held open."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.collecting = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def publish(self, record: InboxRecord) -> bool:
        if self.down:
            raise InboxUnavailableError("broker down")
        return await super().publish(record)

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        if self.down:
            raise InboxUnavailableError("broker down")
        gate, self.gate = self.gate, None
        if gate is not None:
            self.collecting.set()
            await gate.wait()
        return await super().collect(key, limit)


def _outbox() -> tuple[LeadOutbox, FlakyInbox]:
    inbox = FlakyInbox()
    return LeadOutbox(LeadInboxRegistry(inbox, lambda: ["lead"]), inbox), inbox


def _record(msg_id: str, kind: MessageKind = MessageKind.REPLY) -> InboxRecord:
    return typed_record(msg_id, kind)


def _ids(records: list[InboxRecord]) -> list[str]:
    return [record.msg_id for record in records]


async def test_a_record_is_held_once_and_past_the_bound_health_gives_way_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Held records are deduplicated by id; past HELD_MAX the oldest health record gives way,
    then the oldest record, each counted in gave_way."""
    monkeypatch.setattr(outbox_module, "HELD_MAX", 3)
    outbox, inbox = _outbox()
    inbox.down = True
    for msg_id, kind in [
        ("reply-1", MessageKind.REPLY),
        ("health-1", MessageKind.HEALTH),
        ("health-1", MessageKind.HEALTH),
        ("reply-2", MessageKind.REPLY),
        ("reply-3", MessageKind.REPLY),
    ]:
        await outbox.keep(_record(msg_id, kind))
    assert (_ids(outbox.held), outbox.gave_way) == (["reply-1", "reply-2", "reply-3"], 1)
    await outbox.keep(_record("reply-4"))
    assert (_ids(outbox.held), outbox.gave_way) == (["reply-2", "reply-3", "reply-4"], 2)


async def test_held_records_reach_the_inbox_oldest_first_once_it_is_back() -> None:
    """A flush publishes what waits in order and keeps nothing once the inbox takes it."""
    outbox, inbox = _outbox()
    inbox.down = True
    await outbox.keep(_record("reply-1"))
    await outbox.keep(_record("health-1", MessageKind.HEALTH))
    await outbox.flush()
    assert _ids(outbox.held) == ["reply-1", "health-1"]
    inbox.down = False
    await outbox.flush()
    assert outbox.held == []
    assert _ids(await outbox.drain("lead")) == ["reply-1", "health-1"]


async def test_a_stored_reply_goes_after_what_was_held_and_is_never_held_itself() -> None:
    """store() flushes held records first, and while the inbox is down it raises, holding
    nothing: the member is refused and retries."""
    outbox, inbox = _outbox()
    inbox.down = True
    await outbox.keep(_record("reply-1"))
    with pytest.raises(InboxUnavailableError):
        await outbox.store(_record("reply-2"))
    assert _ids(outbox.held) == ["reply-1"]
    inbox.down = False
    assert await outbox.store(_record("reply-2"))
    assert not await outbox.store(_record("reply-2"))  # its id is taken already
    assert _ids(await outbox.drain("lead")) == ["reply-1", "reply-2"]


async def test_a_drain_cancelled_mid_collect_carries_its_records_to_the_next_drain() -> None:
    """The collect is shielded: a caller gone mid-collect loses nothing, the next drain gets it
    first."""
    outbox, inbox = _outbox()
    await outbox.store(_record("reply-1"))
    await outbox.store(_record("reply-2"))
    inbox.gate = gate = asyncio.Event()
    draining = asyncio.ensure_future(outbox.drain("lead"))
    await inbox.collecting.wait()
    draining.cancel()
    with pytest.raises(asyncio.CancelledError):
        await draining
    gate.set()
    await outbox.store(_record("reply-3"))
    assert _ids(await outbox.drain("lead")) == ["reply-1", "reply-2", "reply-3"]
    assert await outbox.drain("lead") == []


async def test_an_unreachable_inbox_refuses_the_drain_and_takes_nothing() -> None:
    """A drain the inbox cannot serve is inbox_unavailable and retryable; the records stay."""
    outbox, inbox = _outbox()
    await outbox.store(_record("reply-1"))
    inbox.down = True
    with pytest.raises(InboxRetryError) as refused:
        await outbox.drain("lead")
    assert refused.value.code == "inbox_unavailable"
    inbox.down = False
    assert _ids(await outbox.drain("lead")) == ["reply-1"]


async def test_an_outage_is_logged_when_records_start_to_wait_and_when_they_all_went(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The push loop flushes every pass: one warning per outage, not one per flush."""
    outbox, inbox = _outbox()
    inbox.down = True
    with caplog.at_level("WARNING", logger="fleetd.bridge"):
        await outbox.keep(_record("h1", MessageKind.HEALTH))
        await outbox.keep(_record("h2", MessageKind.HEALTH))
        for _ in range(5):
            await outbox.flush()
        assert [r.getMessage() for r in caplog.records] == [
            "records wait for the inbox (1 held, the first for lead): InboxUnavailableError"
        ]
        inbox.down = False
        await outbox.flush()
        await outbox.flush()
        inbox.down = True
        await outbox.keep(_record("h3", MessageKind.HEALTH))
    assert [r.getMessage() for r in caplog.records] == [
        "records wait for the inbox (1 held, the first for lead): InboxUnavailableError",
        "the inbox took every held record again",
        "records wait for the inbox (1 held, the first for lead): InboxUnavailableError",
    ]
    assert _ids(outbox.held) == ["h3"]
    inbox.down = False
    assert _ids(await outbox.drain("lead")) == ["h1", "h2"]


async def test_a_record_for_a_retired_lead_waits_without_holding_back_the_others() -> None:
    """A held record whose lead left the config and was retired is refused for its key alone:
    the records behind it reach their inboxes, it stays held (warned once), and it is delivered
    if the lead comes back."""
    inbox = InMemoryInbox()
    expected = ["lead", "gone"]
    registry = LeadInboxRegistry(inbox, lambda: list(expected))
    outbox = LeadOutbox(registry, inbox)
    await registry.start()
    expected.remove("gone")
    assert await registry.retire("gone", incidents_settled=True)
    await outbox.keep(dataclasses.replace(_record("of-gone"), recipient_lead="gone"))
    await outbox.keep(_record("of-lead"))
    for _ in range(3):
        await outbox.flush()
    assert _ids(await inbox.collect("lead")) == ["of-lead"]
    assert _ids(outbox.held) == ["of-gone"]
    expected.append("gone")
    await registry.sync()
    await outbox.flush()
    assert _ids(await inbox.collect("gone")) == ["of-gone"]
    assert outbox.held == []


async def test_a_full_inbox_holds_back_only_its_own_lead() -> None:
    """One lead's in-memory key is full of replies: its held records wait (in order), while
    another lead's held records reach their inbox at once."""
    inbox = InMemoryInbox(key_max=2)
    registry = LeadInboxRegistry(inbox, lambda: ["lead", "lead-b"])
    outbox = LeadOutbox(registry, inbox)
    await registry.start()
    await outbox.store(_record("reply-a1"))
    await outbox.store(_record("reply-a2"))  # lead's key is full of replies now
    await outbox.keep(_record("h-a1", MessageKind.HEALTH))
    await outbox.keep(_record("h-a2", MessageKind.HEALTH))
    await outbox.keep(dataclasses.replace(_record("h-b"), recipient_lead="lead-b"))
    assert _ids(await inbox.collect("lead-b")) == ["h-b"]
    assert _ids(outbox.held) == ["h-a1", "h-a2"]
    assert _ids(await outbox.drain("lead")) == ["reply-a1", "reply-a2"]
    await outbox.flush()
    assert _ids(await outbox.drain("lead")) == ["h-a1", "h-a2"]
    assert outbox.held == []


async def test_a_record_that_gives_way_while_a_flush_publishes_it_breaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flush is publishing the oldest held record when a new one pushes it out of the bound:
    the flush ends without an error and every record is published or held exactly once."""
    monkeypatch.setattr(outbox_module, "HELD_MAX", 2)
    outbox, inbox = _outbox()
    inbox.down = True
    await outbox.keep(_record("h-1", MessageKind.HEALTH))
    await outbox.keep(_record("h-2", MessageKind.HEALTH))
    inbox.down = False
    entered, release = asyncio.Event(), asyncio.Event()
    publish = inbox.publish

    async def slow_first(record: InboxRecord) -> bool:
        if record.msg_id == "h-1":
            entered.set()
            await release.wait()
        return await publish(record)

    monkeypatch.setattr(inbox, "publish", slow_first)
    flushing = asyncio.ensure_future(outbox.flush())
    await entered.wait()
    keeping = asyncio.ensure_future(outbox.keep(_record("h-3", MessageKind.HEALTH)))
    await asyncio.sleep(0)  # h-1 gives way to h-3 while it is being published
    release.set()
    await flushing
    await keeping
    assert _ids(await outbox.drain("lead")) == ["h-1", "h-2", "h-3"]
    assert outbox.held == []
