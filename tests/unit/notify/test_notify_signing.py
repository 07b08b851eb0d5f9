"""Idempotency keys and Standard Webhooks signatures, checked against the reference library."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks
from hypothesis import given
from hypothesis import strategies as st

from fleetd.clock import SystemClock
from fleetd.model.events import EVENT_ID_PATTERN, EventType, idempotency_key
from fleetd.notify.core.signing import (
    HEADER_ID,
    HEADER_IDEMPOTENCY_KEY,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    Verification,
    WebhookSecret,
    sign,
    signature_headers,
    unix_seconds,
    verify,
)

SECRET_TEXT = "whsec_" + base64.b64encode(bytes(range(32))).decode()
SECRET = WebhookSecret.parse(SECRET_TEXT)
OTHER = WebhookSecret(b"\x01" * 32)
INCIDENT = "inc_0123456789abcdef01234567"
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)
BODY = b'{"eventType":"open","incident":{"id":"inc_0123456789abcdef01234567"}}'


def reference(secret: str = SECRET_TEXT) -> standardwebhooks.Webhook:
    return standardwebhooks.Webhook(secret)


def test_the_idempotency_key_follows_its_documented_recipe() -> None:
    """evt_ + 32 hex of SHA-256("fleetd.webhook.v1" US id US type US revision), pinned."""
    raw = "\x1f".join(("fleetd.webhook.v1", INCIDENT, "open", "1")).encode()
    expected = "evt_" + hashlib.sha256(raw).hexdigest()[:32]
    assert idempotency_key(INCIDENT, EventType.OPEN, 1) == expected
    assert expected == "evt_fc2c735859843c8263b71c5227d23024"
    assert re.fullmatch(EVENT_ID_PATTERN, expected)


def test_the_key_is_the_same_for_every_retry_and_differs_per_fact() -> None:
    """Recomputing gives the same key; another incident, type or revision gives another."""
    key = idempotency_key(INCIDENT, EventType.REMINDER, 2)
    assert key == idempotency_key(INCIDENT, "reminder", 2)
    others = {
        idempotency_key("inc_ffffffffffffffffffffffff", EventType.REMINDER, 2),
        idempotency_key(INCIDENT, EventType.RESOLVED, 2),
        idempotency_key(INCIDENT, EventType.REMINDER, 3),
    }
    assert key not in others
    assert len(others) == 3


@given(
    revision=st.integers(1, 10**6),
    kind=st.sampled_from(EventType),
    other_revision=st.integers(1, 10**6),
)
def test_keys_of_distinct_events_never_collide(
    revision: int, kind: EventType, other_revision: int
) -> None:
    """Property: equal keys only for the same (incident, type, revision)."""
    same = revision == other_revision
    assert (
        idempotency_key(INCIDENT, kind, revision) == idempotency_key(INCIDENT, kind, other_revision)
    ) is same


@pytest.mark.parametrize(
    ("incident", "kind", "revision"),
    [
        (INCIDENT, "opened", 1),
        (INCIDENT, "open", 0),
        (INCIDENT, "open", True),
        (INCIDENT, "open", 1.0),
        ("", "open", 1),
        ("inc 1", "open", 1),
        ("inc\x1f1", "open", 1),
    ],
)
def test_a_key_of_an_impossible_event_is_refused(incident: str, kind: str, revision: int) -> None:
    """Unknown types, revisions below 1 and ids that are not plain ids raise."""
    with pytest.raises(ValueError, match=r"\w"):
        idempotency_key(incident, kind, revision)


def test_the_reference_library_verifies_our_signature() -> None:
    """standardwebhooks accepts the headers we build for a body signed now."""
    now = SystemClock().now()
    msg_id = idempotency_key(INCIDENT, EventType.OPEN, 1)
    headers = signature_headers(SECRET, msg_id=msg_id, now=now, body=BODY)
    assert headers[HEADER_ID] == headers[HEADER_IDEMPOTENCY_KEY] == msg_id
    assert headers[HEADER_TIMESTAMP] == str(unix_seconds(now))
    assert reference().verify(BODY, headers)["eventType"] == "open"


@given(body=st.text(max_size=300), msg_id=st.from_regex(r"\Aevt_[0-9a-f]{32}\Z"))
def test_the_reference_library_verifies_any_body(body: str, msg_id: str) -> None:
    """Property: for every UTF-8 body and id, the reference verifier finds our signature."""
    data = body.encode()
    headers = signature_headers(SECRET, msg_id=msg_id, now=SystemClock().now(), body=data)
    reference().verify(data, headers, json_parse=False)


def test_a_wrong_secret_fails_the_reference_library() -> None:
    """The reference verifier refuses a signature made with another key."""
    headers = signature_headers(OTHER, msg_id="evt_x", now=SystemClock().now(), body=BODY)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        reference().verify(BODY, headers)


def test_our_verifier_accepts_the_reference_signature() -> None:
    """A signature made by standardwebhooks verifies with fleetd's own code."""
    now = SystemClock().now()
    signature = reference().sign("evt_1", now, BODY.decode())
    headers = {
        "Webhook-Id": "evt_1",
        "Webhook-Timestamp": str(unix_seconds(now)),
        "Webhook-Signature": signature,
    }
    assert verify(SECRET, headers, BODY, now=now) is Verification.VERIFIED


def _signed(now: datetime = T0, body: bytes = BODY) -> dict[str, str]:
    return signature_headers(SECRET, msg_id="evt_1", now=now, body=body)


V = Verification
SIG = _signed()[HEADER_SIGNATURE]
STAMP = str(unix_seconds(T0))


@pytest.mark.parametrize(
    ("headers", "body", "answer"),
    [
        (_signed(), BODY, V.VERIFIED),
        ({k.upper(): v for k, v in _signed().items()}, BODY, V.VERIFIED),
        (_signed(T0 - timedelta(minutes=5)), BODY, V.VERIFIED),
        (_signed(T0 + timedelta(minutes=5)), BODY, V.VERIFIED),
        (_signed(T0 - timedelta(minutes=5, seconds=1)), BODY, V.TOO_OLD),
        (_signed(T0 + timedelta(minutes=5, seconds=1)), BODY, V.TOO_NEW),
        (_signed(), BODY + b" ", V.NO_MATCHING_SIGNATURE),
        (_signed() | {HEADER_ID: "evt_2"}, BODY, V.NO_MATCHING_SIGNATURE),
        (_signed() | {HEADER_TIMESTAMP: str(int(STAMP) + 1)}, BODY, V.NO_MATCHING_SIGNATURE),
        (_signed() | {HEADER_TIMESTAMP: "soon"}, BODY, V.BAD_TIMESTAMP),
        (_signed() | {HEADER_TIMESTAMP: "9" * 40}, BODY, V.BAD_TIMESTAMP),
        (_signed() | {HEADER_SIGNATURE: "v1,AAAA"}, BODY, V.NO_MATCHING_SIGNATURE),
        (_signed() | {HEADER_SIGNATURE: f"v1,AAAA {SIG}"}, BODY, V.VERIFIED),
        (_signed() | {HEADER_SIGNATURE: "v1a," + SIG[3:]}, BODY, V.NO_MATCHING_SIGNATURE),
        ({HEADER_TIMESTAMP: STAMP, HEADER_SIGNATURE: SIG}, BODY, V.MISSING_HEADERS),
        ({HEADER_ID: "evt_1", HEADER_TIMESTAMP: STAMP}, BODY, V.MISSING_HEADERS),
        ({}, BODY, V.MISSING_HEADERS),
    ],
)
def test_verification_answers(headers: dict[str, str], body: bytes, answer: str) -> None:
    """Verified within five minutes on the exact body, id and time; otherwise the reason."""
    assert verify(SECRET, headers, body, now=T0) == answer


def test_a_signature_under_another_key_is_refused() -> None:
    """fleetd's verifier refuses a request signed with another secret."""
    headers = signature_headers(OTHER, msg_id="evt_1", now=T0, body=BODY)
    assert verify(SECRET, headers, BODY, now=T0) is Verification.NO_MATCHING_SIGNATURE


def test_sign_is_hmac_sha256_of_id_timestamp_and_body() -> None:
    """The signed content is "{id}.{timestamp}.{body}", base64 of the raw digest after "v1,"."""
    import hmac  # noqa: PLC0415 - only this test recomputes the digest by hand

    digest = hmac.new(bytes(range(32)), b"evt_1.1700000000." + BODY, hashlib.sha256).digest()
    assert sign(SECRET, msg_id="evt_1", timestamp=1_700_000_000, body=BODY) == (
        "v1," + base64.b64encode(digest).decode()
    )


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(bytes(32)).decode(),  # no prefix
        "whsec_",
        "whsec_not base64!",
        "whsec_" + base64.b64encode(bytes(23)).decode(),  # too short
        "whsec_" + base64.urlsafe_b64encode(b"\xfb" * 32).decode(),  # urlsafe alphabet
        "whsec_AAAA=A",
    ],
)
def test_a_malformed_secret_is_refused_without_echoing_it(text: str) -> None:
    """The error names the expected form, never the text it was given."""
    with pytest.raises(ValueError, match="whsec_") as caught:
        WebhookSecret.parse(text)
    if text.removeprefix("whsec_"):
        assert text.removeprefix("whsec_") not in str(caught.value)


def test_a_secret_reads_with_or_without_padding_and_never_prints() -> None:
    """Unpadded base64 is accepted; repr and str do not show the key."""
    unpadded = SECRET_TEXT.rstrip("=")
    assert WebhookSecret.parse(unpadded) == SECRET
    assert WebhookSecret.parse(f"  {SECRET_TEXT}\n") == SECRET
    assert SECRET.encoded() == SECRET_TEXT
    for shown in (repr(SECRET), str(SECRET)):
        assert SECRET_TEXT[6:20] not in shown
        assert "\\x00\\x01" not in shown


def test_naive_times_are_refused() -> None:
    """Signing and verifying take aware times only."""
    naive = datetime(2026, 1, 1)  # naive on purpose
    with pytest.raises(ValueError, match="aware"):
        signature_headers(SECRET, msg_id="evt_1", now=naive, body=BODY)
    with pytest.raises(ValueError, match="aware"):
        verify(SECRET, _signed(), BODY, now=naive)
