"""Lead inbox lifecycle (M4 §7.5, Unit 4 criterion 15) on every adapter: in-memory and RabbitMQ.

The same cases run through :class:`~fleetd.inbox.registry.LeadInboxRegistry` on both adapters:
a configured lead's key is owned before anything is published to it; a restarted fleetd owns the
keys again and finds what was stored; a missing lead keeps its key and its records; a retired lead
is released only once it is no longer expected, its incidents are settled and its queue is empty;
a replacement key is owned before anything moves, and the records move oldest first. LavinMQ is
not checked here (only RabbitMQ runs on this machine).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from fleetd.errors import InboxOwnershipError
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.inbox.registry import LeadInboxRegistry

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import InboxKit

pytest_plugins = ["tests.contract.inbox_fixtures"]


def record(key: str, msg_id: str, at: int) -> InboxRecord:
    return InboxRecord(
        msg_id=msg_id,
        kind=MessageKind.REPLY,
        target="member-1",
        recipient_lead=key,
        content=f"reply {msg_id}",
        created_at_epoch_millis=1_786_300_000_000 + at,
    )


async def test_configured_leads_are_owned_at_start_and_only_expected_keys_are_claimed(
    inbox_kit: InboxKit,
) -> None:
    """At start the registry owns exactly the configured leads' keys and refuses to claim a key no
    lead expects."""
    lead, stranger = inbox_kit.key(), inbox_kit.key()
    expected = [lead]
    registry = LeadInboxRegistry(inbox_kit.build(), lambda: expected)
    assert await registry.start() == frozenset({lead})
    assert registry.owned == frozenset({lead})
    with pytest.raises(InboxOwnershipError):
        await registry.ensure_owned(stranger)
    assert registry.owned == frozenset({lead})


async def test_a_restarted_service_owns_the_keys_again_and_finds_what_was_stored(
    inbox_kit: InboxKit,
) -> None:
    """A restarted registry owns its keys again; the broker inbox still holds what was stored, the
    in-memory one starts empty."""
    lead = inbox_kit.key()
    first = inbox_kit.build()
    await LeadInboxRegistry(first, lambda: [lead]).start()
    assert await first.publish(record(lead, "m-1", 1))
    await first.close()
    second = inbox_kit.build()
    registry = LeadInboxRegistry(second, lambda: [lead])
    assert await registry.start() == frozenset({lead})
    collected = await second.collect(lead)
    if inbox_kit.kind == "amqp":
        assert [r.msg_id for r in collected] == ["m-1"]  # the broker kept it across the restart
    else:
        assert collected == []  # an in-memory inbox ends with its process: nothing is claimed


async def test_a_missing_lead_keeps_its_key_and_its_records(inbox_kit: InboxKit) -> None:
    """A lead that drops out of the supplier releases nothing: its key stays owned and its records
    stay."""
    lead, other = inbox_kit.key(), inbox_kit.key()
    expected = [lead, other]
    inbox = inbox_kit.build()
    registry = LeadInboxRegistry(inbox, lambda: expected)
    await registry.start()
    assert await inbox.publish(record(lead, "m-1", 1))
    expected.remove(lead)  # the lead vanished from the supplier: nothing is released
    assert await registry.sync() == frozenset()
    assert lead in registry.owned
    assert [r.msg_id for r in await inbox.collect(lead)] == ["m-1"]


async def test_retirement_needs_settled_incidents_an_unexpected_lead_and_an_empty_queue(
    inbox_kit: InboxKit,
) -> None:
    """A key is retired only when the lead is no longer expected, its incidents are settled and its
    queue is empty."""
    lead = inbox_kit.key()
    expected = [lead]
    inbox = inbox_kit.build()
    registry = LeadInboxRegistry(inbox, lambda: expected)
    await registry.start()
    assert await inbox.publish(record(lead, "m-1", 1))
    assert not await registry.retire(lead, incidents_settled=True)  # still expected
    expected.clear()
    assert not await registry.retire(lead, incidents_settled=False)  # incidents not settled
    assert not await registry.retire(lead, incidents_settled=True)  # its queue is not empty
    assert lead in registry.owned
    assert [r.msg_id for r in await inbox.collect(lead)] == ["m-1"]
    assert await registry.retire(lead, incidents_settled=True)
    assert lead not in registry.owned


async def test_a_replacement_key_is_owned_before_records_move_oldest_first(
    inbox_kit: InboxKit,
) -> None:
    """Replacing a lead's key owns the new key, then moves every record oldest first, readdressed to
    it, leaving the old key empty."""
    old, new = inbox_kit.key(), inbox_kit.key()
    expected = [old, new]
    inbox = inbox_kit.build()
    registry = LeadInboxRegistry(inbox, lambda: expected)
    await registry.sync([old])
    for at, msg_id in enumerate(("m-1", "m-2", "m-3")):
        assert await inbox.publish(record(old, msg_id, at))
    assert await registry.replace(old, new) == 3
    assert new in registry.owned
    moved = await inbox.collect(new)
    assert [r.msg_id for r in moved] == ["m-1", "m-2", "m-3"]
    assert {r.recipient_lead for r in moved} == {new}
    assert await inbox.collect(old) == []
