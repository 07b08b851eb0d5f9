"""fleet_poll's drained messages are built from ``InboxMessage``: on the wire they are exactly the
record's fields in the contract's order, absent where the record has nothing to say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetd.api import fleet_tools
from fleetd.inbox.records import InboxRecord, MessageKind, ReplySource, Severity
from fleetd.testing import build_test_fleet

LEAD = "lead"


def _reply() -> InboxRecord:
    return InboxRecord(
        msg_id="m-1",
        kind=MessageKind.REPLY,
        target="sess-1",
        recipient_lead=LEAD,
        content="done \u00e9",
        created_at_epoch_millis=1_700_000_000_000,
        ticket="t-1",
        source=ReplySource.LATE,
    )


def _health() -> InboxRecord:
    return InboxRecord(
        msg_id="m-2",
        kind=MessageKind.HEALTH,
        target="sess-2",
        recipient_lead=LEAD,
        content="member gone",
        created_at_epoch_millis=1_700_000_000_001,
        subject_terminal="sess-2",
        severity=Severity.CRITICAL,
        state="GONE",
        evidence={"count": 3, "ratio": 0.5, "seen": True, "why": "x", "none": None},
        first_seen_epoch_millis=1,
        last_seen_epoch_millis=2,
        recovery_tried=False,
        suggested_tool_calls=("fleet_list()",),
    )


def _bare() -> InboxRecord:
    return InboxRecord(
        msg_id="m-3",
        kind=MessageKind.REPLY,
        target="sess-3",
        recipient_lead=LEAD,
        content="plain",
        created_at_epoch_millis=5,
    )


EXPECTED = (
    '{"inbox":"lead","messages":['
    '{"msgId":"m-1","kind":"reply","target":"sess-1","content":"done \u00e9",'
    '"createdAtEpochMillis":1700000000000,"ticket":"t-1","source":"late"},'
    '{"msgId":"m-2","kind":"health","target":"sess-2","content":"member gone",'
    '"createdAtEpochMillis":1700000000001,"severity":"critical","state":"GONE",'
    '"subjectTerminal":"sess-2","suggestedToolCalls":["fleet_list()"],'
    '"evidence":{"count":3,"ratio":0.5,"seen":true,"why":"x","none":null}},'
    '{"msgId":"m-3","kind":"reply","target":"sess-3","content":"plain",'
    '"createdAtEpochMillis":5}]}'
)


async def test_drained_messages_are_the_records_fields_in_contract_order(tmp_path: Path) -> None:
    """A reply, a health report and a bare reply drain as the same bytes the hand-built answer
    gave: camelCase names, enum values, evidence kept as given (bool, int, float, null), nothing
    for an absent field."""
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    for record in (_reply(), _health(), _bare()):
        await fleet.service.bridge.outbox.keep(record)
    answer = await fleet.ok("fleet_poll")
    encoded = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    assert encoded == EXPECTED


async def test_a_drain_whose_answer_cannot_be_built_gives_its_records_to_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox acknowledges what it hands out: when the answer fails after that (here the
    second message cannot be shown), the call fails and the next fleet_poll gives every record,
    in order, once."""
    fleet = build_test_fleet(tmp_path)
    await fleet.service.own_lead_keys()
    for record in (_reply(), _health(), _bare()):
        await fleet.service.bridge.outbox.keep(record)
    shown = fleet_tools._message

    def breaks_on_health(record: InboxRecord) -> object:
        if record.kind is MessageKind.HEALTH:
            raise RuntimeError("cannot show it")
        return shown(record)

    monkeypatch.setattr(fleet_tools, "_message", breaks_on_health)
    failed = await fleet.call("fleet_poll")
    assert not failed.ok
    monkeypatch.setattr(fleet_tools, "_message", shown)
    answer = await fleet.ok("fleet_poll")
    assert json.dumps(answer, ensure_ascii=False, separators=(",", ":")) == EXPECTED
    assert (await fleet.ok("fleet_poll"))["messages"] == []
