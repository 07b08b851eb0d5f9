"""Standard Webhooks signatures: sign what fleetd sends, verify what a receiver gets.

The scheme (https://www.standardwebhooks.com/), as fleetd uses it:

* the secret is written ``whsec_<base64>``; the key is the decoded bytes (at least
  :data:`MIN_SECRET_BYTES`, the scheme's recommended minimum);
* every request carries ``webhook-id`` (the event's idempotency key, see
  :func:`fleetd.model.events.idempotency_key`),
  ``webhook-timestamp`` (unix seconds of the attempt) and ``webhook-signature``:
  ``v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`` over the exact body bytes;
* ``Idempotency-Key`` repeats the id for receivers that dedupe on that header instead;
* a receiver accepts a timestamp within :data:`DEFAULT_TOLERANCE` of its own clock and any one of
  the space-separated ``v1`` signatures (a sender rotating secrets may send two).

Retries re-sign with a new timestamp but keep the id. Nothing here logs, and no error repeats a
secret or a signature. :func:`verify` answers with a :class:`Verification` value rather than
raising, so a receiver can count refusals by kind.

Pure: standard library only; ``now`` is an argument.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetd.config.secrets import MIN_SECRET_BYTES, SECRET_PREFIX, WebhookSecret

__all__ = [
    "DEFAULT_TOLERANCE",
    "HEADER_ID",
    "HEADER_IDEMPOTENCY_KEY",
    "HEADER_SIGNATURE",
    "HEADER_TIMESTAMP",
    "MIN_SECRET_BYTES",
    "SECRET_PREFIX",
    "Verification",
    "WebhookSecret",
    "sign",
    "signature_headers",
    "unix_seconds",
    "verify",
]

DEFAULT_TOLERANCE: Final = timedelta(minutes=5)

HEADER_ID: Final = "webhook-id"
HEADER_TIMESTAMP: Final = "webhook-timestamp"
HEADER_SIGNATURE: Final = "webhook-signature"
HEADER_IDEMPOTENCY_KEY: Final = "Idempotency-Key"

_VERSION: Final = "v1"
_TIMESTAMP: Final = re.compile(r"[0-9]{1,11}")  # 11 digits reach year 5138, inside datetime
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_MAX_SIGNATURES: Final = 8


def unix_seconds(now: datetime) -> int:
    """``now`` as whole unix seconds, the ``webhook-timestamp`` value."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    return math.floor(now.timestamp())


def sign(secret: WebhookSecret, *, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` under ``msg_id`` and ``timestamp``."""
    content = b".".join((msg_id.encode("utf-8"), str(timestamp).encode("ascii"), body))
    digest = hmac.new(secret.key, content, hashlib.sha256).digest()
    return f"{_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signature_headers(
    secret: WebhookSecret, *, msg_id: str, now: datetime, body: bytes
) -> dict[str, str]:
    """The four headers of one attempt: id, timestamp, signature and ``Idempotency-Key``."""
    timestamp = unix_seconds(now)
    return {
        HEADER_ID: msg_id,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_SIGNATURE: sign(secret, msg_id=msg_id, timestamp=timestamp, body=body),
        HEADER_IDEMPOTENCY_KEY: msg_id,
    }


class Verification(StrEnum):
    """The answer of :func:`verify`: ``verified`` or why not."""

    VERIFIED = "verified"
    MISSING_HEADERS = "missing_headers"
    BAD_TIMESTAMP = "bad_timestamp"
    TOO_OLD = "too_old"
    TOO_NEW = "too_new"
    NO_MATCHING_SIGNATURE = "no_matching_signature"


def verify(
    secret: WebhookSecret,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: datetime,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> Verification:
    """Check a received request's signature headers (names in any case) against ``body``."""
    unix_seconds(now)  # refuses a naive now
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get(HEADER_ID, "")
    stamp = lowered.get(HEADER_TIMESTAMP, "").strip()
    offered = lowered.get(HEADER_SIGNATURE, "")
    if not (msg_id and stamp and offered):
        return Verification.MISSING_HEADERS
    if not _TIMESTAMP.fullmatch(stamp):
        return Verification.BAD_TIMESTAMP
    sent_at = datetime.fromtimestamp(int(stamp), tz=UTC)
    if sent_at < now - tolerance:
        return Verification.TOO_OLD
    if sent_at > now + tolerance:
        return Verification.TOO_NEW
    expected = sign(secret, msg_id=msg_id, timestamp=int(stamp), body=body).encode("ascii")
    candidates = offered.split()[:_MAX_SIGNATURES]
    matched = False
    for candidate in candidates:  # compare every candidate: the time taken does not tell which
        matched |= hmac.compare_digest(expected, candidate.encode("utf-8", "replace"))
    return Verification.VERIFIED if matched else Verification.NO_MATCHING_SIGNATURE
