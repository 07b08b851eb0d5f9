"""The inbox codec picks its decoder by media type and turns every bad entry into a value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetd.inbox.codec import (
    LEGACY_MEDIA_TYPE,
    MAX_ENTRY_BYTES,
    TARGET_HEADER,
    TYPED_MEDIA_TYPE,
    Decoded,
    DecodeReason,
    Invalid,
    UnsupportedVersion,
    WireEnvelope,
    body_digest,
    decode,
    encode,
    quarantine_queue_name,
    queue_name,
    safe_log_id,
)
from fleetd.inbox.records import InboxRecord, MessageKind, ReplySource, Severity

KEY = "term_lead_1"


def reply(**changes: Any) -> InboxRecord:
    fields: dict[str, Any] = {
        "msg_id": "m-1",
        "kind": MessageKind.REPLY,
        "target": "term_member_7",
        "recipient_lead": KEY,
        "content": "all green",
        "created_at_epoch_millis": 1_786_300_000_000,
    }
    return InboxRecord(**(fields | changes))


def health(**changes: Any) -> InboxRecord:
    fields: dict[str, Any] = {
        "msg_id": "h-1",
        "kind": MessageKind.HEALTH,
        "target": "term_member_7",
        "subject_terminal": "term_member_7",
        "recipient_lead": KEY,
        "severity": Severity.CRITICAL,
        "state": "TURN_BOUNDARY_LOST",
        "evidence": {"snapshots": 2, "rawStatus": "idle", "ageSeconds": 12.5, "repair": False},
        "created_at_epoch_millis": 1_786_300_005_000,
        "first_seen_epoch_millis": 1_786_299_990_000,
        "last_seen_epoch_millis": 1_786_300_004_000,
        "recovery_tried": True,
        "suggested_tool_calls": ('fleet_status(target="term_member_7")',),
        "content": "turn boundary lost",
    }
    return InboxRecord(**(fields | changes))


def typed(document: dict[str, Any], **envelope: Any) -> WireEnvelope:
    props: dict[str, Any] = {
        "content_type": TYPED_MEDIA_TYPE,
        "message_id": document.get("msgId"),
        "headers": {TARGET_HEADER: document.get("target")},
    }
    return WireEnvelope(body=json.dumps(document).encode(), **(props | envelope))


def document_of(record: InboxRecord) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(encode(record).body)
    return loaded


def legacy(body: bytes, **envelope: Any) -> WireEnvelope:
    return WireEnvelope(body=body, content_type=LEGACY_MEDIA_TYPE, **envelope)


# -- legacy v0 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "health", "schemaVersion": 1}',
        "{",
        "",
        "plain words",
        "Grüße ✓ 完成 🚀\n",
        "\ufeffwith a byte order mark",
        "line one\r\nline two\x00nul",
    ],
)
def test_legacy_text_is_a_reply_with_exact_content(text: str) -> None:
    """text/plain is a reply holding exactly its UTF-8 text, even when it starts with {."""
    outcome = decode(legacy(text.encode("utf-8"), message_id="old-1"), key=KEY)
    assert isinstance(outcome, Decoded)
    record = outcome.record
    assert (record.kind, record.content, record.msg_id) == (MessageKind.REPLY, text, "old-1")
    assert record.schema_version is None
    assert record.recipient_lead == KEY
    assert record.target == KEY
    assert (record.severity, record.state, record.evidence, record.ticket) == (None,) * 4


def test_legacy_without_message_id_gets_a_stable_content_derived_id() -> None:
    """A legacy entry without a usable message id is named by a digest of its body."""
    body = b"no id here"
    first = decode(legacy(body), key=KEY)
    again = decode(legacy(body, message_id="has spaces so unusable"), key=KEY)
    assert isinstance(first, Decoded)
    assert isinstance(again, Decoded)
    assert first.record.msg_id == again.record.msg_id == f"legacy-{body_digest(body)}"


def test_legacy_without_message_id_is_numbered_by_the_reader() -> None:
    """With the reader's delivery serial, equal legacy texts get distinct ids; a real id stays."""
    body = b"same text"
    one = decode(legacy(body), key=KEY, serial=1)
    two = decode(legacy(body), key=KEY, serial=2)
    named = decode(legacy(body, message_id="old-9"), key=KEY, serial=3)
    assert isinstance(one, Decoded)
    assert isinstance(two, Decoded)
    assert isinstance(named, Decoded)
    assert one.record.msg_id == f"legacy-{body_digest(body)}-1"
    assert two.record.msg_id == f"legacy-{body_digest(body)}-2"
    assert named.record.msg_id == "old-9"


def test_legacy_keeps_target_header_and_timestamp() -> None:
    """Legacy metadata that the wire does carry (target header, timestamp) is kept."""
    envelope = legacy(
        b"ok", headers={TARGET_HEADER: b"term_member_3"}, timestamp_epoch_millis=1_000
    )
    outcome = decode(envelope, key=KEY)
    assert isinstance(outcome, Decoded)
    assert outcome.record.target == "term_member_3"
    assert outcome.record.created_at_epoch_millis == 1_000


@pytest.mark.parametrize(
    ("content_type", "decoded"),
    [
        ("text/plain", True),
        ("Text/Plain; charset=UTF-8", True),
        ('text/plain; charset="utf8"', True),
        ("text/plain; charset=iso-8859-1", False),
        ("application/json", False),
        ("application/vnd.ltms.fleet.inbox-message", False),
        ("", False),
        (None, False),
    ],
)
def test_media_type_alone_selects_legacy_decoding(content_type: str | None, decoded: bool) -> None:
    """Only text/plain (UTF-8) is legacy; other or missing media types are invalid."""
    outcome = decode(WireEnvelope(body=b"hello", content_type=content_type), key=KEY)
    assert isinstance(outcome, Decoded) is decoded


def test_typed_json_under_text_plain_stays_text() -> None:
    """A typed body published as text/plain is not sniffed: it is a reply holding the JSON text."""
    envelope = encode(health())
    outcome = decode(legacy(envelope.body, message_id="h-1"), key=KEY)
    assert isinstance(outcome, Decoded)
    assert outcome.record.kind is MessageKind.REPLY
    assert outcome.record.content == envelope.body.decode()


def test_typed_body_without_media_type_is_not_sniffed() -> None:
    """A perfect typed body with no content_type is invalid, not guessed."""
    envelope = encode(reply())
    bare = WireEnvelope(body=envelope.body, content_type=None, message_id="m-1")
    assert decode(bare, key=KEY) == Invalid(reason=DecodeReason.UNKNOWN_MEDIA_TYPE)


@pytest.mark.parametrize("media", [LEGACY_MEDIA_TYPE, TYPED_MEDIA_TYPE])
@pytest.mark.parametrize("body", [b"\xff\xfe", b"caf\xe9", b"\xed\xa0\x80", b"ok\xc3"])
def test_malformed_utf8_is_invalid(media: str, body: bytes) -> None:
    """Bytes that are not UTF-8 are invalid in both formats."""
    outcome = decode(WireEnvelope(body=body, content_type=media, message_id="m"), key=KEY)
    assert outcome == Invalid(reason=DecodeReason.MALFORMED_UTF8)


@pytest.mark.parametrize("field", ["content", "target"])
def test_a_lone_surrogate_escape_in_a_typed_body_is_invalid(field: str) -> None:
    """Valid JSON and valid UTF-8 bytes, but a ``\\ud800`` escape alone decodes to text no
    answer can carry: quarantined as malformed UTF-8, never handed to the lead's drain (where
    encoding the answer would fail and take the drain's other records with it)."""
    document = document_of(reply())
    document[field] = "\ud800 lone"
    outcome = decode(typed(document), key=KEY)
    assert outcome == Invalid(reason=DecodeReason.MALFORMED_UTF8, detail="lone surrogate")


def test_a_surrogate_pair_escape_in_a_typed_body_is_one_character() -> None:
    """An escaped pair (an emoji written as ``\\ud83d\\ude00``) is a character like any other."""
    document = document_of(reply(content="smile \U0001f600"))
    outcome = decode(typed(document), key=KEY)
    assert isinstance(outcome, Decoded)
    assert outcome.record.content == "smile \U0001f600"


# -- typed v1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        reply(),
        reply(content='{"looks": "like json"} ✓ 日本語', ticket="tk_1", source=ReplySource.LATE),
        reply(content="", created_at_epoch_millis=0),
        health(),
        health(evidence={}, suggested_tool_calls=(), recovery_tried=False, ticket="tk_2"),
    ],
)
def test_typed_round_trip_preserves_every_field(record: InboxRecord) -> None:
    """encode then decode returns an equal record."""
    envelope = encode(record)
    assert envelope.content_type == TYPED_MEDIA_TYPE
    assert envelope.message_id == record.msg_id
    assert envelope.headers == {TARGET_HEADER: record.target}
    assert decode(envelope, key=KEY) == Decoded(record=record)


def test_encoded_body_is_utf8_json_with_every_record_field() -> None:
    """The typed body is UTF-8 JSON (not ASCII-escaped) carrying all §7.1 fields."""
    envelope = encode(reply(content="✓"))
    assert "✓".encode() in envelope.body
    assert set(json.loads(envelope.body)) == {
        "schemaVersion",
        "kind",
        "msgId",
        "target",
        "subjectTerminal",
        "recipientLead",
        "severity",
        "state",
        "evidence",
        "createdAtEpochMillis",
        "firstSeenEpochMillis",
        "lastSeenEpochMillis",
        "recoveryTried",
        "suggestedToolCalls",
        "content",
    }


def test_legacy_records_are_never_written() -> None:
    """The encoder refuses a legacy record: v0 is read-only."""
    record = InboxRecord(
        msg_id="old", kind=MessageKind.REPLY, target="t", recipient_lead=KEY, content="x",
        schema_version=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match="legacy"):
        encode(record)


def test_unknown_optional_fields_are_ignored() -> None:
    """Version 1 ignores fields it does not know, including objects and arrays."""
    document = document_of(reply()) | {"futureField": {"a": [1, 2]}, "priority": "high"}
    assert decode(typed(document), key=KEY) == Decoded(record=reply())


def test_reply_may_omit_health_only_fields() -> None:
    """A reply that leaves out the health-only fields entirely is valid."""
    document = {k: v for k, v in document_of(reply()).items() if v is not None}
    assert decode(typed(document), key=KEY) == Decoded(record=reply())


@pytest.mark.parametrize(
    ("document", "reason", "detail"),
    [
        ("[1, 2]", DecodeReason.NOT_AN_OBJECT, ""),
        ('"text"', DecodeReason.NOT_AN_OBJECT, ""),
        ("{", DecodeReason.MALFORMED_JSON, ""),
        ("", DecodeReason.MALFORMED_JSON, ""),
        ('{"schemaVersion": 1,}', DecodeReason.MALFORMED_JSON, ""),
        ('{"schemaVersion": NaN}', DecodeReason.MALFORMED_JSON, ""),
        ('{"schemaVersion": 1, "schemaVersion": 1}', DecodeReason.MALFORMED_JSON, ""),
        ("[" * 100_000, DecodeReason.MALFORMED_JSON, ""),
        ("{}", DecodeReason.MISSING_FIELD, "schemaVersion"),
        ('{"schemaVersion": "1"}', DecodeReason.INVALID_FIELD, "schemaVersion"),
        ('{"schemaVersion": 1.0}', DecodeReason.INVALID_FIELD, "schemaVersion"),
        ('{"schemaVersion": true}', DecodeReason.INVALID_FIELD, "schemaVersion"),
        ('{"schemaVersion": 0}', DecodeReason.INVALID_FIELD, "schemaVersion"),
        ('{"schemaVersion": 1}', DecodeReason.MISSING_FIELD, "content"),
    ],
)
def test_malformed_typed_bodies(document: str, reason: DecodeReason, detail: str) -> None:
    """Malformed JSON, non-objects and bad versions are invalid with a fixed reason."""
    envelope = WireEnvelope(body=document.encode(), content_type=TYPED_MEDIA_TYPE, message_id="m")
    assert decode(envelope, key=KEY) == Invalid(reason=reason, detail=detail)


@pytest.mark.parametrize("version", [2, 7, 10**6])
def test_unknown_version_is_not_partly_decoded(version: int) -> None:
    """A newer version is reported as such even when the rest would not decode as v1."""
    envelope = typed({"schemaVersion": version, "kind": "telepathy"})
    assert decode(envelope, key=KEY) == UnsupportedVersion(version=version)


_MISSING = [
    (reply(), "msgId"),
    (reply(), "kind"),
    (reply(), "target"),
    (reply(), "recipientLead"),
    (reply(), "createdAtEpochMillis"),
    (reply(), "content"),
    (health(), "subjectTerminal"),
    (health(), "severity"),
    (health(), "state"),
    (health(), "evidence"),
    (health(), "firstSeenEpochMillis"),
    (health(), "lastSeenEpochMillis"),
    (health(), "recoveryTried"),
    (health(), "suggestedToolCalls"),
]


@pytest.mark.parametrize(("record", "field"), _MISSING, ids=[f for _, f in _MISSING])
@pytest.mark.parametrize("how", ["absent", "null"])
def test_missing_required_fields_are_invalid(record: InboxRecord, field: str, how: str) -> None:
    """Dropping (or nulling) any required field makes the entry invalid, naming the field."""
    document = document_of(record)
    if how == "absent":
        del document[field]
    else:
        document[field] = None
    envelope = typed(document, message_id=record.msg_id, headers={})
    assert decode(envelope, key=KEY) == Invalid(reason=DecodeReason.MISSING_FIELD, detail=field)


_INVALID = [
    (reply(), "kind", "result"),
    (reply(), "kind", 1),
    (reply(), "msgId", 42),
    (reply(), "msgId", "has space"),
    (reply(), "target", ""),
    (reply(), "recipientLead", "bad key!"),
    (reply(), "createdAtEpochMillis", -1),
    (reply(), "createdAtEpochMillis", 1.5),
    (reply(), "createdAtEpochMillis", True),
    (reply(), "createdAtEpochMillis", 2**53),
    (reply(), "content", ["a"]),
    (reply(), "severity", "critical"),
    (reply(), "state", "GONE"),
    (reply(), "source", "guess"),
    (reply(), "ticket", 7),
    (health(), "severity", "fatal"),
    (health(), "severity", "CRITICAL"),
    (health(), "state", "lower_case"),
    (health(), "evidence", {"nested": {"a": 1}}),
    (health(), "evidence", {"list": [1]}),
    (health(), "evidence", "text"),
    (health(), "recoveryTried", "yes"),
    (health(), "recoveryTried", 1),
    (health(), "suggestedToolCalls", "fleet_poll()"),
    (health(), "suggestedToolCalls", [""]),
    (health(), "suggestedToolCalls", [1]),
    (health(), "firstSeenEpochMillis", 1_786_300_004_001),
    (health(), "source", "reply"),
]


@pytest.mark.parametrize(("record", "field", "value"), _INVALID)
def test_invalid_field_values_are_invalid(record: InboxRecord, field: str, value: object) -> None:
    """Wrong types, invalid enums and broken rules name the offending field, never its value."""
    document = document_of(record) | {field: value}
    envelope = typed(document, message_id=record.msg_id, headers={})
    outcome = decode(envelope, key=KEY if field != "recipientLead" else "bad key!")
    assert isinstance(outcome, Invalid)
    assert outcome.reason is DecodeReason.INVALID_FIELD
    assert outcome.detail == field
    assert repr(value) not in outcome.detail


@pytest.mark.parametrize(
    ("envelope_changes", "key", "detail"),
    [
        ({"message_id": "m-other"}, KEY, "msgId"),
        ({"message_id": None}, KEY, "msgId"),
        ({"headers": {TARGET_HEADER: "term_member_8"}}, KEY, "target"),
        ({"headers": {TARGET_HEADER: b"\xff"}}, KEY, "target"),
        ({"headers": {TARGET_HEADER: 7}}, KEY, "target"),
        ({}, "term_lead_2", "recipientLead"),
    ],
)
def test_identity_mismatch_between_properties_and_body(
    envelope_changes: dict[str, Any], key: str, detail: str
) -> None:
    """AMQP message id, target header and queue key must agree with the body."""
    envelope = typed(document_of(reply()), **envelope_changes)
    expected = Invalid(reason=DecodeReason.IDENTITY_MISMATCH, detail=detail)
    assert decode(envelope, key=key) == expected


def test_target_header_is_optional_and_may_be_bytes() -> None:
    """Without a target header the body decides; a bytes header equal to the target is fine."""
    document = document_of(reply())
    assert isinstance(decode(typed(document, headers={}), key=KEY), Decoded)
    as_bytes = typed(document, headers={TARGET_HEADER: b"term_member_7"})
    assert isinstance(decode(as_bytes, key=KEY), Decoded)


def test_typed_media_type_parameters_and_case_are_tolerated() -> None:
    """The typed media type matches case-insensitively and with a UTF-8 charset parameter."""
    envelope = encode(reply())
    loud = WireEnvelope(
        body=envelope.body,
        content_type="Application/VND.ltms.fleet.inbox-message+JSON; charset=utf-8",
        message_id="m-1",
    )
    assert decode(loud, key=KEY) == Decoded(record=reply())


def test_same_body_decodes_to_same_id_for_dedup() -> None:
    """Dedup keys on msgId: two deliveries of one entry decode to records with one id."""
    envelope = encode(reply())
    first, second = decode(envelope, key=KEY), decode(envelope, key=KEY)
    assert isinstance(first, Decoded)
    assert isinstance(second, Decoded)
    assert first.record.msg_id == second.record.msg_id == "m-1"
    assert first == second


def test_queue_names() -> None:
    """The key of an inbox is the recipient lead; quarantine sits beside it."""
    assert queue_name("term_lead_1") == "agent.term_lead_1.inbox"
    assert quarantine_queue_name("term_lead_1") == "agent.term_lead_1.inbox.quarantine"


@pytest.mark.parametrize(
    ("value", "shown"),
    [("m-1", "m-1"), (None, "-"), ("a b", "<unprintable>"), ("x\n", "<unprintable>")],
)
def test_safe_log_id(value: str | None, shown: str) -> None:
    """Foreign ids reach logs only when they are plain identifiers."""
    assert safe_log_id(value) == shown


@pytest.mark.parametrize(
    ("encoding", "decoded"),
    [(None, True), ("", True), ("identity", True), ("UTF-8", True), ("gzip", False)],
)
def test_a_body_content_encoding_changes_is_not_read_as_text(
    encoding: str | None, decoded: bool
) -> None:
    """Only an encoding that leaves the body as is decodes; gzip and the like are invalid."""
    envelope = WireEnvelope(body=b"hello", content_type="text/plain", content_encoding=encoding)
    outcome = decode(envelope, key=KEY)
    assert isinstance(outcome, Decoded) is decoded
    if not decoded:
        assert outcome == Invalid(reason=DecodeReason.UNSUPPORTED_ENCODING)


def test_an_entry_past_the_bound_is_not_decoded() -> None:
    """One byte past MAX_ENTRY_BYTES is too large (never parsed); at the bound, a reply."""
    at = WireEnvelope(body=b"a" * MAX_ENTRY_BYTES, content_type="text/plain")
    assert isinstance(decode(at, key=KEY), Decoded)
    past = WireEnvelope(body=b"a" * (MAX_ENTRY_BYTES + 1), content_type="text/plain")
    assert decode(past, key=KEY) == Invalid(reason=DecodeReason.TOO_LARGE)
