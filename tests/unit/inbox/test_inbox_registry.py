"""LeadInboxRegistry owns lead keys explicitly, keeps them for missing leads, and moves safely."""

from __future__ import annotations

from typing import Any

import pytest

from fleetd.clock import FakeClock
from fleetd.compose import build_inbox
from fleetd.errors import ConfigError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord, InboxStats, MessageKind
from fleetd.inbox.registry import LeadInboxRegistry


class RecordingInbox:
    """An InMemoryInbox that logs calls and can fail publications on demand."""

    def __init__(self) -> None:
        self.inner = InMemoryInbox()
        self.calls: list[tuple[str, str]] = []
        self.fail_publish_after: int | None = None
        self.published = 0
        self.legacy: dict[str, list[InboxRecord]] = {}

    async def own(self, key: str) -> None:
        self.calls.append(("own", key))
        await self.inner.own(key)

    async def release(self, key: str) -> bool:
        self.calls.append(("release", key))
        return await self.inner.release(key)

    async def publish(self, record: InboxRecord) -> bool:
        self.calls.append(("publish", record.recipient_lead))
        if self.fail_publish_after is not None and self.published >= self.fail_publish_after:
            raise InboxUnavailableError("publish: injected outage")
        self.published += 1
        return await self.inner.publish(record)

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        self.calls.append(("collect", key))
        old = self.legacy.pop(key, [])  # entries read from the old wire format come first
        return old + await self.inner.collect(key, limit)

    async def stats(self, key: str) -> InboxStats:
        return await self.inner.stats(key)

    def failures(self) -> list[DecodeFailure]:
        return []

    def reachable(self) -> bool:
        return self.inner.reachable()

    async def close(self) -> None:
        await self.inner.close()


def reply(key: str, msg_id: str, **changes: Any) -> InboxRecord:
    fields: dict[str, Any] = {
        "msg_id": msg_id,
        "kind": MessageKind.REPLY,
        "target": "term_member_7",
        "recipient_lead": key,
        "content": f"reply {msg_id}",
        "created_at_epoch_millis": 1_000,
    }
    return InboxRecord(**(fields | changes))


def registry_for(expected: list[str], **kwargs: Any) -> tuple[LeadInboxRegistry, RecordingInbox]:
    inbox = RecordingInbox()
    return LeadInboxRegistry(inbox, lambda: expected, clock=FakeClock(), **kwargs), inbox


async def test_start_owns_every_configured_lead() -> None:
    """Startup owns the configured leads' keys, in a stable order."""
    registry, inbox = registry_for(["lead_b", "lead_a"])
    assert await registry.start() == {"lead_a", "lead_b"}
    assert inbox.calls == [("own", "lead_a"), ("own", "lead_b")]
    assert registry.owned == {"lead_a", "lead_b"}


async def test_sync_adds_new_leads_and_keeps_missing_ones() -> None:
    """A discovered lead is owned; a lead that went missing keeps its key and its entries."""
    expected = ["lead_a"]
    registry, inbox = registry_for(expected)
    await registry.start()
    await registry.publish(reply("lead_a", "m-1"))
    expected[:] = ["lead_b"]
    assert await registry.sync() == {"lead_b"}
    assert registry.owned == {"lead_a", "lead_b"}
    assert ("release", "lead_a") not in inbox.calls
    assert [r.msg_id for r in await inbox.collect("lead_a")] == ["m-1"]


async def test_sync_with_explicit_leads_after_a_config_change() -> None:
    """A config change that adds a lead owns it without a discovery round."""
    registry, _ = registry_for([])
    await registry.start(["lead_a"])
    assert await registry.sync(["lead_a", "lead_c"]) == {"lead_c"}


async def test_publication_owns_an_expected_lead_first() -> None:
    """Before publishing, the recipient's key is owned; an unexpected recipient is refused."""
    registry, inbox = registry_for(["lead_a"])
    assert await registry.publish(reply("lead_a", "m-1")) is True
    assert inbox.calls == [("own", "lead_a"), ("publish", "lead_a")]
    with pytest.raises(InboxOwnershipError):
        await registry.publish(reply("stranger", "m-2"))
    assert ("own", "stranger") not in inbox.calls


async def test_publication_to_a_lead_of_another_instance_owns_its_global_key() -> None:
    """A lead another fleetd instance serves (its key is global on the shared broker) may
    receive a record: its key is owned (declared alike) and published to, and stays owned when
    that instance is no longer listed; a start never owns it, and a stranger is still refused."""
    remote = {"lead_r"}
    registry, inbox = registry_for(["lead_a"], remote_leads=lambda: remote)
    assert await registry.start() == {"lead_a"}
    assert await registry.publish(reply("lead_r", "m-1")) is True
    assert inbox.calls[-2:] == [("own", "lead_r"), ("publish", "lead_r")]
    remote.clear()  # the other instance went down: what was owned stays owned
    assert await registry.publish(reply("lead_r", "m-2")) is True
    with pytest.raises(InboxOwnershipError):
        await registry.publish(reply("stranger", "m-3"))
    assert [r.msg_id for r in await inbox.collect("lead_r")] == ["m-1", "m-2"]


async def test_ensure_owned_does_not_repeat_ownership() -> None:
    """An owned key is not owned again on every publication."""
    registry, inbox = registry_for(["lead_a"])
    await registry.publish(reply("lead_a", "m-1"))
    await registry.publish(reply("lead_a", "m-2"))
    assert inbox.calls.count(("own", "lead_a")) == 1


@pytest.mark.parametrize(
    ("settled", "still_expected", "waiting", "released"),
    [
        (False, False, 0, False),
        (True, True, 0, False),
        (True, False, 1, False),
        (True, False, 0, True),
    ],
)
async def test_retire_releases_only_a_confirmed_empty_key(
    settled: bool, still_expected: bool, waiting: int, released: bool
) -> None:
    """Release needs settled incidents, a lead no longer expected, and an empty queue."""
    expected = ["lead_a", "lead_b"]
    registry, inbox = registry_for(expected)
    await registry.start()
    for n in range(waiting):
        await registry.publish(reply("lead_a", f"m-{n}"))
    if not still_expected:
        expected.remove("lead_a")
    assert await registry.retire("lead_a", incidents_settled=settled) is released
    assert ("lead_a" in registry.owned) is not released
    if waiting:
        assert len(await inbox.collect("lead_a")) == waiting


async def test_replace_owns_the_new_key_before_moving_in_order() -> None:
    """The replacement key is owned before the first collect; entries keep ids and order."""
    registry, inbox = registry_for(["old_lead"])
    await registry.start()
    for n in range(5):
        await registry.publish(reply("old_lead", f"m-{n}", content=f"c{n}"))
    assert await registry.replace("old_lead", "new_lead") == 5
    assert inbox.calls.index(("own", "new_lead")) < inbox.calls.index(("collect", "old_lead"))
    moved = await inbox.collect("new_lead")
    assert [(r.msg_id, r.content, r.recipient_lead) for r in moved] == [
        (f"m-{n}", f"c{n}", "new_lead") for n in range(5)
    ]
    assert await inbox.collect("old_lead") == []


async def test_replace_turns_legacy_entries_into_typed_records() -> None:
    """A legacy entry keeps its text and id and gets a creation time when it had none."""
    clock = FakeClock()
    inbox = RecordingInbox()
    registry = LeadInboxRegistry(inbox, lambda: ["old_lead"], clock=clock)
    await registry.start()
    inbox.legacy["old_lead"] = [
        InboxRecord(
            msg_id="legacy-1", kind=MessageKind.REPLY, target="old_lead",
            recipient_lead="old_lead", content="{old text", schema_version=None,
        )
    ]  # fmt: skip
    assert await registry.replace("old_lead", "new_lead") == 1
    [moved] = await inbox.collect("new_lead")
    assert (moved.msg_id, moved.content, moved.schema_version) == ("legacy-1", "{old text", 1)
    assert moved.created_at_epoch_millis == int(clock.now().timestamp() * 1000)


async def test_a_failed_move_keeps_the_collected_records() -> None:
    """If publishing to the new key fails, nothing collected is lost: the next replace finishes."""
    registry, inbox = registry_for(["old_lead"], move_batch=3)
    await registry.start()
    for n in range(5):
        await registry.publish(reply("old_lead", f"m-{n}"))
    inbox.fail_publish_after = inbox.published + 1
    with pytest.raises(InboxUnavailableError):
        await registry.replace("old_lead", "new_lead")
    assert await registry.retire("old_lead", incidents_settled=True) is False
    inbox.fail_publish_after = None
    assert await registry.replace("old_lead", "new_lead") == 4
    assert [r.msg_id for r in await inbox.collect("new_lead")] == [f"m-{n}" for n in range(5)]


async def test_an_in_memory_key_with_entries_is_never_released() -> None:
    """Even a direct release of a non-empty in-memory key is refused and keeps the data."""
    inbox = InMemoryInbox()
    await inbox.own("lead_a")
    await inbox.publish(reply("lead_a", "m-1"))
    assert await inbox.release("lead_a") is False
    assert [r.msg_id for r in await inbox.collect("lead_a")] == ["m-1"]


def test_build_inbox_picks_the_adapter_from_plain_values() -> None:
    """memory and amqp build their adapter; a bad backend or a missing URL names the key."""
    assert isinstance(build_inbox("memory"), InMemoryInbox)
    assert isinstance(build_inbox("amqp", "amqp://guest:guest@127.0.0.1/"), AmqpInbox)
    with pytest.raises(ConfigError) as missing:
        build_inbox("amqp", None)
    assert missing.value.key == "inbox.amqp.url"
    with pytest.raises(ConfigError) as unknown:
        build_inbox("kafka")
    assert unknown.value.key == "inbox.backend"
