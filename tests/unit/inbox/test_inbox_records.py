"""Inbox records validate on construction and the pure modules import without I/O."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from fleetd.inbox.records import InboxRecord, MessageKind, Severity, check_key, is_valid_key

BASE: dict[str, Any] = {
    "msg_id": "m-1",
    "kind": MessageKind.REPLY,
    "target": "term_member_7",
    "recipient_lead": "term_lead_1",
    "content": "secret reply text",
    "created_at_epoch_millis": 1,
}
HEALTH: dict[str, Any] = BASE | {
    "kind": MessageKind.HEALTH,
    "subject_terminal": "term_member_7",
    "severity": Severity.WARNING,
    "state": "MUTE",
    "evidence": {"count": 3},
    "first_seen_epoch_millis": 1,
    "last_seen_epoch_millis": 2,
    "recovery_tried": False,
    "suggested_tool_calls": (),
}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (BASE | {"msg_id": ""}, "msgId"),
        (BASE | {"kind": "result"}, "kind"),
        (BASE | {"recipient_lead": "a/b"}, "recipientLead"),
        (BASE | {"created_at_epoch_millis": None}, "createdAtEpochMillis"),
        (BASE | {"schema_version": 2}, "schemaVersion"),
        (BASE | {"state": "GONE"}, "state"),
        (BASE | {"schema_version": None, "ticket": "tk"}, "kind"),
        (HEALTH | {"severity": None}, "severity"),
        (HEALTH | {"severity": "loud"}, "severity"),
        (HEALTH | {"evidence": {"x": float("nan")}}, "evidence"),
        (HEALTH | {"first_seen_epoch_millis": 3}, "firstSeenEpochMillis"),
        (HEALTH | {"source": "reply"}, "source"),
    ],
)
def test_invalid_records_cannot_be_built(fields: dict[str, Any], message: str) -> None:
    """Each broken rule raises ValueError naming the field."""
    with pytest.raises(ValueError, match=f"^{message}:"):
        InboxRecord(**fields)


def test_records_are_values_with_frozen_evidence() -> None:
    """Records compare by value, hash, and their evidence cannot be changed afterwards."""
    evidence = {"count": 3}
    record = InboxRecord(**(HEALTH | {"evidence": evidence}))
    evidence["count"] = 4
    assert record.evidence == {"count": 3}
    assert record == InboxRecord(**HEALTH)
    assert hash(record) == hash(InboxRecord(**HEALTH))
    with pytest.raises(TypeError):
        record.evidence["count"] = 5  # type: ignore[index]


def test_repr_never_shows_content() -> None:
    """A record's repr omits the reply text, so logging a record cannot leak it."""
    assert "secret reply text" not in repr(InboxRecord(**BASE))


@pytest.mark.parametrize(
    ("key", "valid"),
    [("term_lead_1", True), ("lead.a:b-c", True), ("", False), ("a b", False), ("_x", False)],
)
def test_inbox_keys(key: str, valid: bool) -> None:
    """Keys become AMQP queue names, so they are short plain identifiers."""
    assert is_valid_key(key) is valid
    if not valid:
        with pytest.raises(ValueError, match="inbox key"):
            check_key(key)


def test_pure_modules_import_with_io_blocked() -> None:
    """records and codec load with the AMQP client, sockets, asyncio and logging unavailable."""
    code = (
        "import sys\n"
        "for name in ('aio_pika', 'aiormq', 'socket', 'asyncio', 'logging', 'fleetd.clock'):\n"
        "    sys.modules[name] = None\n"
        "import fleetd.inbox.records, fleetd.inbox.codec\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
