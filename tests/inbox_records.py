"""Typed inbox records for tests: a reply, or a health report with every field it must carry."""

from __future__ import annotations

from typing import Any

from fleetd.inbox.records import InboxRecord, MessageKind, Severity


def typed_record(
    msg_id: str, kind: MessageKind = MessageKind.REPLY, *, lead: str = "lead", target: str = "m"
) -> InboxRecord:
    """A version-1 record of ``kind`` for ``lead`` whose content is its id."""
    fields: dict[str, Any] = {}
    if kind is MessageKind.HEALTH:
        fields = {
            "subject_terminal": target,
            "severity": Severity.WARNING,
            "state": "MUTE",
            "evidence": {},
            "first_seen_epoch_millis": 1,
            "last_seen_epoch_millis": 1,
            "recovery_tried": False,
            "suggested_tool_calls": [],
        }
    return InboxRecord(
        msg_id=msg_id,
        kind=kind,
        target=target,
        recipient_lead=lead,
        content=msg_id,
        created_at_epoch_millis=1,
        **fields,
    )
