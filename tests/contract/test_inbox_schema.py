"""The typed inbox codec and contracts/inbox/inbox-message.v1.schema.json agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from fleetd.inbox.codec import (
    LEGACY_MEDIA_TYPE,
    TYPED_MEDIA_TYPE,
    Decoded,
    Invalid,
    UnsupportedVersion,
    WireEnvelope,
    decode,
    encode,
)
from fleetd.inbox.records import InboxRecord, MessageKind, ReplySource, Severity

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "inbox"
SCHEMA = json.loads((CONTRACTS / "inbox-message.v1.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
SAMPLES = CONTRACTS / "samples"


def _samples(folder: str) -> list[Path]:
    return sorted((SAMPLES / folder).iterdir())


def _envelope(body: bytes) -> tuple[WireEnvelope, str]:
    document: dict[str, Any] = json.loads(body)
    envelope = WireEnvelope(
        body=body,
        content_type=TYPED_MEDIA_TYPE,
        message_id=document.get("msgId"),
        headers={"x-fleet-target": document.get("target")} if "target" in document else {},
    )
    return envelope, str(document.get("recipientLead", "term_lead_1"))


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    """The schema file itself is well formed."""
    Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", _samples("valid"), ids=lambda p: p.name)
def test_valid_samples_validate_and_decode(path: Path) -> None:
    """Every valid sample passes the schema and decodes to a record that encodes back valid."""
    body = path.read_bytes()
    VALIDATOR.validate(json.loads(body))
    envelope, key = _envelope(body)
    outcome = decode(envelope, key=key)
    assert isinstance(outcome, Decoded)
    VALIDATOR.validate(json.loads(encode(outcome.record).body))


@pytest.mark.parametrize("path", _samples("invalid"), ids=lambda p: p.name)
def test_invalid_samples_fail_schema_and_decoder(path: Path) -> None:
    """Every invalid sample is refused by the schema and by the decoder alike."""
    body = path.read_bytes()
    assert not VALIDATOR.is_valid(json.loads(body))
    envelope, key = _envelope(body)
    assert isinstance(decode(envelope, key=key), Invalid)


@pytest.mark.parametrize("path", _samples("unsupported"), ids=lambda p: p.name)
def test_unsupported_samples_are_left_for_a_newer_build(path: Path) -> None:
    """A newer schemaVersion is not v1 and is reported as unsupported, not invalid."""
    body = path.read_bytes()
    assert not VALIDATOR.is_valid(json.loads(body))
    envelope, key = _envelope(body)
    assert decode(envelope, key=key) == UnsupportedVersion(version=2)


@pytest.mark.parametrize("path", _samples("legacy"), ids=lambda p: p.name)
def test_legacy_samples_are_replies_with_exact_text(path: Path) -> None:
    """A text/plain sample is a reply whose content is exactly its UTF-8 text."""
    body = path.read_bytes()
    outcome = decode(WireEnvelope(body=body, content_type=LEGACY_MEDIA_TYPE), key="term_lead_1")
    assert isinstance(outcome, Decoded)
    assert outcome.record.kind is MessageKind.REPLY
    assert outcome.record.content == body.decode("utf-8")


_ids = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)
_keys = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}", fullmatch=True)
_millis = st.integers(min_value=0, max_value=2**53 - 1)
_finite = st.floats(allow_nan=False, allow_infinity=False)
_scalars = st.none() | st.booleans() | st.integers() | _finite | st.text()


@st.composite
def records(draw: st.DrawFn) -> InboxRecord:
    common: dict[str, Any] = {
        "msg_id": draw(_ids.filter(lambda s: len(s) <= 200)),
        "target": draw(st.text(min_size=1, max_size=40)),
        "recipient_lead": draw(_keys),
        "content": draw(st.text()),
        "created_at_epoch_millis": draw(_millis),
        "ticket": draw(st.none() | st.text(min_size=1, max_size=20)),
    }
    if draw(st.booleans()):
        return InboxRecord(
            kind=MessageKind.REPLY, source=draw(st.none() | st.sampled_from(ReplySource)), **common
        )
    first = draw(_millis)
    return InboxRecord(
        kind=MessageKind.HEALTH,
        subject_terminal=draw(st.text(min_size=1, max_size=40)),
        severity=draw(st.sampled_from(Severity)),
        state=draw(st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True)),
        evidence=draw(st.dictionaries(st.text(max_size=10), _scalars, max_size=5)),
        first_seen_epoch_millis=first,
        last_seen_epoch_millis=draw(st.integers(min_value=first, max_value=2**53 - 1)),
        recovery_tried=draw(st.booleans()),
        suggested_tool_calls=tuple(draw(st.lists(st.text(min_size=1), max_size=3))),
        **common,
    )


@settings(max_examples=200)
@given(records())
def test_every_encoded_record_is_schema_valid_and_round_trips(record: InboxRecord) -> None:
    """Whatever record the codec writes, the schema accepts and the decoder restores it."""
    envelope = encode(record)
    VALIDATOR.validate(json.loads(envelope.body))
    assert decode(envelope, key=record.recipient_lead) == Decoded(record=record)
