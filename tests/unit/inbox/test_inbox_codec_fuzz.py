"""Fuzzing the inbox decoder: it never raises and never invents a record from invalid data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from fleetd.inbox.codec import (
    LEGACY_MEDIA_TYPE,
    TARGET_HEADER,
    TYPED_MEDIA_TYPE,
    Decoded,
    Invalid,
    UnsupportedVersion,
    WireEnvelope,
    decode,
)

SCHEMA_PATH = (
    Path(__file__).resolve().parents[3] / "contracts" / "inbox" / "inbox-message.v1.schema.json"
)
VALIDATOR = Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
VALID_SAMPLES = sorted((SCHEMA_PATH.parent / "samples" / "valid").iterdir())

content_types = st.one_of(
    st.sampled_from(
        [
            LEGACY_MEDIA_TYPE,
            TYPED_MEDIA_TYPE,
            f"{TYPED_MEDIA_TYPE}; charset=utf-8",
            "text/plain; charset=latin-1",
            "application/json",
            "",
        ]
    ),
    st.none(),
    st.text(max_size=60),
)
header_values = st.one_of(st.text(max_size=20), st.binary(max_size=20), st.integers(), st.none())
headers = st.dictionaries(st.sampled_from([TARGET_HEADER, "x-other"]), header_values, max_size=2)
keys = st.sampled_from(["term_lead_1", "lead.2", "bad key", ""])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


def _check(outcome: object, envelope: WireEnvelope, key: str) -> None:
    assert isinstance(outcome, Decoded | Invalid | UnsupportedVersion)
    if not isinstance(outcome, Decoded):
        return
    record = outcome.record
    assert record.recipient_lead == key
    media = (envelope.content_type or "").split(";")[0].strip().lower()
    if media == LEGACY_MEDIA_TYPE:
        assert record.content == envelope.body.decode("utf-8")
        assert record.schema_version is None
        return
    assert media == TYPED_MEDIA_TYPE
    document = json.loads(envelope.body)
    assert VALIDATOR.is_valid(document), "decoded typed data must satisfy the schema"
    assert envelope.message_id == record.msg_id == document["msgId"]
    assert record.kind == document["kind"]


@settings(max_examples=600)
@given(
    body=st.binary(max_size=300),
    content_type=content_types,
    message_id=st.none() | st.text(max_size=12),
    headers=headers,
    key=keys,
)
def test_arbitrary_bytes_never_raise(
    body: bytes,
    content_type: str | None,
    message_id: str | None,
    headers: dict[str, object],
    key: str,
) -> None:
    """Any bytes under any media type decode to an outcome value, never an exception."""
    envelope = WireEnvelope(
        body=body, content_type=content_type, message_id=message_id, headers=headers
    )
    _check(decode(envelope, key=key), envelope, key)


@settings(max_examples=600)
@given(
    sample=st.sampled_from(VALID_SAMPLES),
    mutations=st.lists(
        st.tuples(st.sampled_from(["drop", "set"]), st.text(max_size=3), json_values), max_size=3
    ),
    field_choice=st.data(),
)
def test_mutated_typed_documents_decode_only_when_schema_valid(
    sample: Path, mutations: list[tuple[str, str, Any]], field_choice: st.DataObject
) -> None:
    """Random edits of a valid typed body never decode unless the schema still accepts them."""
    document: dict[str, Any] = json.loads(sample.read_bytes())
    for action, fallback_field, value in mutations:
        field = field_choice.draw(st.sampled_from([*sorted(document), fallback_field]))
        if action == "drop":
            document.pop(field, None)
        else:
            document[field] = value
    envelope = WireEnvelope(
        body=json.dumps(document).encode(),
        content_type=TYPED_MEDIA_TYPE,
        message_id=document.get("msgId") if isinstance(document.get("msgId"), str) else None,
        headers={TARGET_HEADER: document.get("target")},
    )
    key = document.get("recipientLead")
    key = key if isinstance(key, str) else "term_lead_1"
    _check(decode(envelope, key=key), envelope, key)


@given(body=st.binary(max_size=200))
def test_legacy_decodes_exactly_the_utf8_bodies(body: bytes) -> None:
    """text/plain decodes if and only if the body is UTF-8, to exactly that text."""
    outcome = decode(WireEnvelope(body=body, content_type=LEGACY_MEDIA_TYPE), key="term_lead_1")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        assert isinstance(outcome, Invalid)
    else:
        assert isinstance(outcome, Decoded)
        assert outcome.record.content == text
