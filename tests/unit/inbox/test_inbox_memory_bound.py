"""The in-memory inbox lives in fleetd's process, so one lead's key holds a bounded number of
entries: a lead that never polls cannot grow the service without limit, and nothing a member sent
is dropped to keep the bound."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fleetd.errors import InboxUnavailableError
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.testing import build_test_fleet
from tests.inbox_records import typed_record

LEAD = "lead"


def _record(msg_id: str, kind: MessageKind) -> InboxRecord:
    return typed_record(msg_id, kind, lead=LEAD, target="sess-x")


async def test_at_the_bound_the_oldest_health_report_gives_way_once_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A full key takes a new entry by letting its oldest health report go (counted, warned once
    while it stays full); replies are never the ones that go."""
    inbox = InMemoryInbox(key_max=3)
    await inbox.own(LEAD)
    for msg_id, kind in (
        ("r1", MessageKind.REPLY),
        ("h1", MessageKind.HEALTH),
        ("h2", MessageKind.HEALTH),
    ):
        assert await inbox.publish(_record(msg_id, kind))
    with caplog.at_level(logging.WARNING, logger="fleetd.inbox"):
        assert await inbox.publish(_record("r2", MessageKind.REPLY))
        assert await inbox.publish(_record("h3", MessageKind.HEALTH))
    assert [r.msg_id for r in await inbox.collect(LEAD)] == ["r1", "r2", "h3"]
    assert inbox.gave_way == 2
    assert sum("is full" in r.getMessage() for r in caplog.records) == 1


async def test_a_key_full_of_replies_refuses_one_more_and_takes_it_after_a_drain() -> None:
    """With nothing but replies waiting, one more entry is refused (unavailable: retry), none is
    dropped; once the lead drains, the same entry is taken."""
    inbox = InMemoryInbox(key_max=2)
    await inbox.own(LEAD)
    await inbox.publish(_record("r1", MessageKind.REPLY))
    await inbox.publish(_record("r2", MessageKind.REPLY))
    with pytest.raises(InboxUnavailableError, match="full"):
        await inbox.publish(_record("r3", MessageKind.REPLY))
    assert [r.msg_id for r in await inbox.collect(LEAD)] == ["r1", "r2"]
    assert await inbox.publish(_record("r3", MessageKind.REPLY))
    assert [r.msg_id for r in await inbox.collect(LEAD)] == ["r3"]


async def test_a_members_reply_to_a_full_inbox_is_refused_as_retryable_and_lands_later(
    tmp_path: Path,
) -> None:
    """On the path fleet_reply runs: a lead whose inbox is full of replies gets no more; the
    member's reply is refused with inbox_unavailable, the ticket stays pending, and the same reply
    lands once the lead has polled."""
    fleet = build_test_fleet(tmp_path, inbox=InMemoryInbox(key_max=2))
    await fleet.service.own_lead_keys()
    await fleet.bridge.outbox.store(_record("r1", MessageKind.REPLY))
    await fleet.bridge.outbox.store(_record("r2", MessageKind.REPLY))
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="do it"))["ticket"]
    refused = (await fleet.call("fleet_reply", fleet.member(sid), content="the answer")).to_json()
    assert refused["ok"] is False
    assert refused["error"]["code"] == "inbox_unavailable"
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    assert len((await fleet.ok("fleet_poll"))["messages"]) == 2
    accepted = await fleet.ok("fleet_reply", fleet.member(sid), content="the answer")
    assert accepted == {"accepted": True, "ticket": ticket, "late": False}
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [m["content"] for m in messages] == ["the answer"]
