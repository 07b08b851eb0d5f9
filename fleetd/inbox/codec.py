"""The inbox wire codec (M4 §7.2): records to AMQP bodies and back, chosen by media type only.

Theory of operation. An AMQP inbox entry is a :class:`WireEnvelope`: the body bytes plus the few
properties that matter (``content_type``, ``message_id``, headers, timestamp). The decoder is
picked by ``content_type`` alone and never by looking at the body:

* ``text/plain`` is the legacy v0 format of the previous build. The body is the reply text, kept
  exactly as its UTF-8 decoding, even when it begins with ``{``. Typed metadata is absent. An
  entry without a usable ``message_id`` is named ``legacy-<digest>-<serial>``: the reader numbers
  its deliveries, because two distinct replies may carry the same text and first-id-wins must
  never fold them into one (a redelivery of such an entry therefore cannot be recognised).
* ``application/vnd.ltms.fleet.inbox-message+json`` is the typed family. The body is a JSON object
  whose integer ``schemaVersion`` says how to read the rest. Version 1 is read; a higher version is
  reported as :class:`UnsupportedVersion` without reading any other field, so a newer daemon can
  read it later. Unknown optional fields are ignored; missing fields, invalid enums, malformed
  UTF-8 or JSON, and a body whose identity disagrees with the AMQP properties are :class:`Invalid`.
* Any other (or no) media type is :class:`Invalid`: we cannot tell what it is. So is a body
  with a ``content_encoding`` that changes it (``gzip``, ...: read as text it would be garbage
  passed off as a reply), and one larger than :data:`MAX_ENTRY_BYTES` (never parsed, never handed
  to a lead's poll whole).

Decode outcomes are values; :func:`decode` never raises. Reasons and details are fixed strings that
never echo the body, so they are safe for logs and metric labels. This module is pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from fleetd.inbox.records import (
    SCHEMA_VERSION,
    InboxRecord,
    MessageKind,
    is_valid_key,
    is_valid_msg_id,
)

__all__ = [
    "LEGACY_MEDIA_TYPE",
    "TARGET_HEADER",
    "TYPED_MEDIA_TYPE",
    "DecodeOutcome",
    "DecodeReason",
    "Decoded",
    "Invalid",
    "UnsupportedVersion",
    "WireEnvelope",
    "body_digest",
    "decode",
    "encode",
    "quarantine_queue_name",
    "queue_name",
    "safe_log_id",
]

LEGACY_MEDIA_TYPE = "text/plain"
TYPED_MEDIA_TYPE = "application/vnd.ltms.fleet.inbox-message+json"
TARGET_HEADER = "x-fleet-target"
MAX_ENTRY_BYTES: Final = 4 * 1024 * 1024
"""An entry larger than this is not decoded (quarantined as ``too_large``): four times the largest
request body fleetd accepts, so no reply fleetd or a member published is ever near it."""
#: AMQP ``content_encoding`` values that leave the body as is (``utf-8`` is what some clients
#: put there for the charset); any other (``gzip``, ``deflate``, ...) is not decoded
_PLAIN_ENCODINGS = frozenset({"", "identity", "utf-8", "utf8"})
"""AMQP header naming the entry's target; when present it must agree with the body."""

_UTF8_CHARSETS = frozenset({"utf-8", "utf8"})
_SAFE_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


def queue_name(key: str) -> str:
    """The AMQP queue holding inbox ``key``."""
    return f"agent.{key}.inbox"


def quarantine_queue_name(key: str) -> str:
    """The durable AMQP queue receiving byte-for-byte copies of ``key``'s invalid entries."""
    return f"agent.{key}.inbox.quarantine"


def body_digest(body: bytes) -> str:
    """A short digest of a body, to tell entries apart without keeping or logging the body."""
    return hashlib.sha256(body).hexdigest()[:32]


def safe_log_id(value: str | None) -> str:
    """``value`` if it is a plain identifier, else a placeholder: foreign ids may carry anything."""
    if value is not None and _SAFE_ID.fullmatch(value):
        return value
    return "-" if value is None else "<unprintable>"


class DecodeReason(StrEnum):
    """Why an entry was not decoded (bounded: a metric label)."""

    UNKNOWN_MEDIA_TYPE = "unknown_media_type"
    UNSUPPORTED_CHARSET = "unsupported_charset"
    MALFORMED_UTF8 = "malformed_utf8"
    MALFORMED_JSON = "malformed_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    INVALID_FIELD = "invalid_field"
    IDENTITY_MISMATCH = "identity_mismatch"
    UNSUPPORTED_VERSION = "unsupported_version"
    UNSUPPORTED_ENCODING = "unsupported_encoding"
    TOO_LARGE = "too_large"
    REUSED_ID = "reused_id"  # not a decode failure: another body under an id already taken


@dataclass(frozen=True, slots=True, kw_only=True)
class WireEnvelope:
    """One AMQP entry as the codec sees it."""

    body: bytes
    content_type: str | None
    message_id: str | None = None
    headers: Mapping[str, object] = field(default_factory=dict, hash=False)
    timestamp_epoch_millis: int | None = None
    content_encoding: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decoded:
    record: InboxRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Invalid:
    reason: DecodeReason
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsupportedVersion:
    version: int


DecodeOutcome = Decoded | Invalid | UnsupportedVersion

# camelCase wire name -> record attribute, in the order the encoder writes them.
_WIRE_FIELDS: tuple[tuple[str, str], ...] = (
    ("schemaVersion", "schema_version"),
    ("kind", "kind"),
    ("msgId", "msg_id"),
    ("target", "target"),
    ("subjectTerminal", "subject_terminal"),
    ("recipientLead", "recipient_lead"),
    ("severity", "severity"),
    ("state", "state"),
    ("evidence", "evidence"),
    ("createdAtEpochMillis", "created_at_epoch_millis"),
    ("firstSeenEpochMillis", "first_seen_epoch_millis"),
    ("lastSeenEpochMillis", "last_seen_epoch_millis"),
    ("recoveryTried", "recovery_tried"),
    ("suggestedToolCalls", "suggested_tool_calls"),
    ("content", "content"),
)
_OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = (("ticket", "ticket"), ("source", "source"))
_ALWAYS_REQUIRED = frozenset(
    {"kind", "msgId", "target", "recipientLead", "createdAtEpochMillis", "content"}
)
_HEALTH_REQUIRED = frozenset(
    {
        "subjectTerminal",
        "severity",
        "state",
        "evidence",
        "firstSeenEpochMillis",
        "lastSeenEpochMillis",
        "recoveryTried",
        "suggestedToolCalls",
    }
)
# Expected JSON type per wire field; the record's own validation does the rest.
_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "msgId": (str,),
    "target": (str,),
    "subjectTerminal": (str,),
    "recipientLead": (str,),
    "severity": (str,),
    "state": (str,),
    "evidence": (dict,),
    "createdAtEpochMillis": (int,),
    "firstSeenEpochMillis": (int,),
    "lastSeenEpochMillis": (int,),
    "recoveryTried": (bool,),
    "suggestedToolCalls": (list,),
    "content": (str,),
    "ticket": (str,),
    "source": (str,),
}


def encode(record: InboxRecord) -> WireEnvelope:
    """The typed v1 wire form of ``record`` (legacy records are never written)."""
    if record.schema_version != SCHEMA_VERSION:
        raise ValueError("only typed records are written; legacy v0 is read-only")
    document: dict[str, Any] = {}
    for wire, attribute in _WIRE_FIELDS + _OPTIONAL_FIELDS:
        value = getattr(record, attribute)
        if value is None and (wire, attribute) in _OPTIONAL_FIELDS:
            continue
        if attribute == "evidence" and value is not None:
            value = dict(value)
        elif attribute == "suggested_tool_calls" and value is not None:
            value = list(value)
        document[wire] = value
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return WireEnvelope(
        body=body.encode("utf-8"),
        content_type=TYPED_MEDIA_TYPE,
        message_id=record.msg_id,
        headers={TARGET_HEADER: record.target},
        timestamp_epoch_millis=record.created_at_epoch_millis,
    )


def decode(envelope: WireEnvelope, *, key: str, serial: int | None = None) -> DecodeOutcome:
    """Decode one entry read from inbox ``key``. Never raises.

    ``serial`` is the reader's number for this delivery; it makes the id of a legacy entry without
    a usable ``message_id`` unique (without it the id is derived from the body alone).
    """
    if len(envelope.body) > MAX_ENTRY_BYTES:
        return Invalid(reason=DecodeReason.TOO_LARGE)
    encoding = envelope.content_encoding
    if encoding is not None and encoding.strip().lower() not in _PLAIN_ENCODINGS:
        return Invalid(reason=DecodeReason.UNSUPPORTED_ENCODING)
    media_type, charset = _media_type(envelope.content_type)
    if media_type not in (LEGACY_MEDIA_TYPE, TYPED_MEDIA_TYPE):
        return Invalid(reason=DecodeReason.UNKNOWN_MEDIA_TYPE)
    if charset is not None and charset not in _UTF8_CHARSETS:
        return Invalid(reason=DecodeReason.UNSUPPORTED_CHARSET)
    try:
        text = envelope.body.decode("utf-8")
    except UnicodeDecodeError:
        return Invalid(reason=DecodeReason.MALFORMED_UTF8)
    if media_type == LEGACY_MEDIA_TYPE:
        return _decode_legacy(envelope, text, key, serial)
    return _decode_typed(envelope, text, key)


def _media_type(content_type: str | None) -> tuple[str | None, str | None]:
    if content_type is None:
        return None, None
    main, *params = content_type.split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return main.strip().lower(), charset


def _header_text(headers: Mapping[str, object], name: str) -> tuple[bool, str | None]:
    """(present, text); a present header that is not UTF-8 text yields (True, None)."""
    if name not in headers:
        return False, None
    value = headers[name]
    if isinstance(value, bytes):
        try:
            return True, value.decode("utf-8")
        except UnicodeDecodeError:
            return True, None
    return True, value if isinstance(value, str) else None


def _decode_legacy(
    envelope: WireEnvelope, text: str, key: str, serial: int | None
) -> DecodeOutcome:
    if not is_valid_key(key):
        return Invalid(reason=DecodeReason.IDENTITY_MISMATCH, detail="recipientLead")
    message_id = envelope.message_id
    if message_id is None or not is_valid_msg_id(message_id):
        message_id = f"legacy-{body_digest(envelope.body)}"
        if serial is not None:
            message_id = f"{message_id}-{serial}"
    _, header_target = _header_text(envelope.headers, TARGET_HEADER)
    target = header_target if header_target and len(header_target) <= 256 else key
    millis = envelope.timestamp_epoch_millis
    return Decoded(
        record=InboxRecord(
            msg_id=message_id,
            kind=MessageKind.REPLY,
            target=target,
            recipient_lead=key,
            content=text,
            schema_version=None,
            created_at_epoch_millis=millis if millis is not None and millis >= 0 else None,
        )
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise ValueError("duplicate key")
    return document


#: A JSON escape of a UTF-16 surrogate (paired ones decode to one character, lone ones do not).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _encodes(document: object) -> bool:
    """True when every string of ``document`` can be written as UTF-8 (no lone surrogate)."""
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decode_typed(envelope: WireEnvelope, text: str, key: str) -> DecodeOutcome:
    try:
        document = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_unique_object
        )
    except (ValueError, RecursionError):
        return Invalid(reason=DecodeReason.MALFORMED_JSON)
    if _SURROGATE_ESCAPE.search(text) is not None and not _encodes(document):
        # valid JSON, but a "\ud800" escape alone decodes to text no reply can carry: the lead's
        # answer could not be encoded, and every record of its drain would go with it
        return Invalid(reason=DecodeReason.MALFORMED_UTF8, detail="lone surrogate")
    if not isinstance(document, dict):
        return Invalid(reason=DecodeReason.NOT_AN_OBJECT)
    if "schemaVersion" not in document:
        return Invalid(reason=DecodeReason.MISSING_FIELD, detail="schemaVersion")
    version = document["schemaVersion"]
    if type(version) is not int or version < SCHEMA_VERSION:
        return Invalid(reason=DecodeReason.INVALID_FIELD, detail="schemaVersion")
    if version != SCHEMA_VERSION:
        return UnsupportedVersion(version=version)
    return _decode_v1(envelope, document, key)


def _decode_v1(envelope: WireEnvelope, document: dict[str, Any], key: str) -> DecodeOutcome:
    required = set(_ALWAYS_REQUIRED)
    if document.get("kind") == MessageKind.HEALTH:
        required |= _HEALTH_REQUIRED
    for wire in sorted(required):
        if document.get(wire) is None:
            return Invalid(reason=DecodeReason.MISSING_FIELD, detail=wire)
    values: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for wire, attribute in _WIRE_FIELDS[1:] + _OPTIONAL_FIELDS:
        value = document.get(wire)
        if value is not None and not _has_type(value, _TYPES[wire]):
            return Invalid(reason=DecodeReason.INVALID_FIELD, detail=wire)
        values[attribute] = tuple(value) if isinstance(value, list) else value
    try:
        record = InboxRecord(**values)
    except (ValueError, TypeError) as exc:
        return Invalid(reason=DecodeReason.INVALID_FIELD, detail=_field_of(exc))
    return _check_identity(envelope, record, key)


def _has_type(value: object, types: tuple[type, ...]) -> bool:
    """JSON type check where ``true`` is not a number."""
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _field_of(exc: Exception) -> str:
    """The field name a record validation error names (its messages are fixed strings)."""
    message = str(exc.args[0]) if exc.args and isinstance(exc.args[0], str) else ""
    name = message.partition(":")[0]
    return name if name.isidentifier() else "record"


def _check_identity(envelope: WireEnvelope, record: InboxRecord, key: str) -> DecodeOutcome:
    if envelope.message_id != record.msg_id:
        return Invalid(reason=DecodeReason.IDENTITY_MISMATCH, detail="msgId")
    present, header_target = _header_text(envelope.headers, TARGET_HEADER)
    if present and header_target != record.target:
        return Invalid(reason=DecodeReason.IDENTITY_MISMATCH, detail="target")
    if record.recipient_lead != key:
        return Invalid(reason=DecodeReason.IDENTITY_MISMATCH, detail="recipientLead")
    return Decoded(record=record)
