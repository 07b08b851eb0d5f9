"""Transport retry for one webhook event (M4 §10.4): classify an attempt, then wait or stop.

Theory of operation. The sender makes one POST and reports an :class:`PostResult`: the HTTP
status (and a parsed ``Retry-After``), or a :class:`TransportFailure` class — never exception
text. :func:`next_step` turns that outcome into a :class:`RetryDecision`:

===========================================  ===============  =========================
outcome                                      verdict          next attempt
===========================================  ===============  =========================
2xx                                          ``delivered``    none
network error, timeout, 408, 429, 5xx        ``retry``        full-jitter backoff, or a
                                                              longer ``Retry-After``
any other status (4xx, 3xx, 1xx), bad URL    ``permanent``    none until config changes
                                                              or a replay
===========================================  ===============  =========================

Full-jitter backoff: after the ``n``-th failed attempt of an event the wait is drawn uniformly
from ``[0, min(15 min, 5 s × 3^(n-1))]`` — ceilings 5 s, 15 s, 45 s, 135 s, 405 s, then 15 min.
The draw is an argument (a float in ``[0, 1]``): the caller owns the random source, so this module
stays deterministic. A server's ``Retry-After`` (delta-seconds or an HTTP-date, read by
:func:`fleetd.resilience.parse_retry_after`) may lengthen that wait, up to the same 15 minutes,
but never shortens it: ``Retry-After: 0`` or a date already past waits the drawn backoff like any
other failure, so a receiver answering "now" forever is asked on the backoff schedule, not on
every pass. Every attempt — a throttled one too — counts in the event's attempt number, so the
schedule grows to its 15-minute ceiling and stays there. There is no attempt limit (§10.4): a
retryable event is retried until it is delivered, refused permanently, or its incident is
cancelled. A redirect is not followed (the event would reach a URL nobody configured), so a 3xx
is permanent like a 4xx.

What this module does not hold: one outstanding attempt per event and re-arming a permanent
event after a config change are the dispatcher's (the journal keeps the attempt count and the
lease); a reminder is a new event revision, never a transport retry.

Pure: standard library and :mod:`fleetd.resilience` only, no clock (``now`` is an argument), no
randomness, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetd.resilience.retry_after import RetryAfter, retry_after_delay

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_FACTOR",
    "MAX_DELAY",
    "OutcomeReason",
    "PostResult",
    "RetryAfter",
    "RetryDecision",
    "TransportFailure",
    "Verdict",
    "backoff_ceiling",
    "backoff_delay",
    "classify",
    "is_blind",
    "next_step",
    "reason_of",
    "server_wait",
]

BACKOFF_BASE: Final = timedelta(seconds=5)
"""The ceiling of the wait after an event's first failed attempt."""

BACKOFF_FACTOR: Final = 3
"""Each further failure multiplies the ceiling by this."""

MAX_DELAY: Final = timedelta(minutes=15)
"""No wait is longer: not a drawn one, not one a ``Retry-After`` asks for."""


class TransportFailure(StrEnum):
    """Why an attempt got no HTTP status: a bounded class, never the exception's text."""

    NETWORK = "network"
    """Refused, reset, DNS, TLS or protocol failure: retryable."""
    TIMEOUT = "timeout"
    """``requestTimeoutMs`` elapsed before a status arrived: retryable."""
    INVALID_URL = "invalid_url"
    """The configured URL cannot be requested at all: permanent until config changes."""


class Verdict(StrEnum):
    """What an attempt means for its event."""

    DELIVERED = "delivered"
    RETRY = "retry"
    PERMANENT = "permanent"


class OutcomeReason(StrEnum):
    """A bounded name for an outcome (a metric label or a journal column, never a status text)."""

    DELIVERED = "delivered"
    NETWORK = "network"
    TIMEOUT = "timeout"
    INVALID_URL = "invalid_url"
    HTTP_408 = "http_408"
    HTTP_429 = "http_429"
    HTTP_5XX = "http_5xx"
    HTTP_410 = "http_410"
    HTTP_4XX = "http_4xx"
    HTTP_OTHER = "http_other"
    PAYLOAD_BUG = "payload_bug"
    """A receiver of another kind than webhook refused the request as malformed (its 400):
    fleetd built it wrong (:mod:`fleetd.notify.kinds`). Never from :func:`reason_of`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PostResult:
    """The result of one POST: exactly one of ``status`` and ``failure``.

    ``retry_after`` is the response's parsed ``Retry-After`` (``None`` when absent or unreadable);
    it only counts on a retryable status.
    """

    status: int | None = None
    failure: TransportFailure | None = None
    retry_after: RetryAfter | None = None

    def __post_init__(self) -> None:
        if (self.status is None) == (self.failure is None):
            raise ValueError("an attempt outcome has either a status or a failure")
        if self.status is not None and not 100 <= self.status <= 999:
            raise ValueError(f"not an HTTP status: {self.status}")
        if self.failure is not None and self.retry_after is not None:
            raise ValueError("a failed attempt has no Retry-After")
        if isinstance(self.retry_after, datetime):
            _require_aware(self.retry_after, "retry_after")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDecision:
    """What to do after one attempt. ``delay`` and ``retry_at`` are set only for ``retry``;
    ``honoured_retry_after`` says the server's ``Retry-After`` lengthened the drawn wait."""

    verdict: Verdict
    reason: OutcomeReason
    delay: timedelta | None = None
    retry_at: datetime | None = None
    honoured_retry_after: bool = False


def reason_of(outcome: PostResult) -> OutcomeReason:
    """The bounded name of ``outcome``."""
    if outcome.failure is not None:
        return OutcomeReason(outcome.failure.value)
    status = outcome.status
    assert status is not None
    if 200 <= status <= 299:
        return OutcomeReason.DELIVERED
    if status == 408:
        return OutcomeReason.HTTP_408
    if status == 429:
        return OutcomeReason.HTTP_429
    if 500 <= status <= 599:
        return OutcomeReason.HTTP_5XX
    if status == 410:
        return OutcomeReason.HTTP_410
    if 400 <= status <= 499:
        return OutcomeReason.HTTP_4XX
    return OutcomeReason.HTTP_OTHER


_VERDICTS: Final = {
    OutcomeReason.DELIVERED: Verdict.DELIVERED,
    OutcomeReason.NETWORK: Verdict.RETRY,
    OutcomeReason.TIMEOUT: Verdict.RETRY,
    OutcomeReason.HTTP_408: Verdict.RETRY,
    OutcomeReason.HTTP_429: Verdict.RETRY,
    OutcomeReason.HTTP_5XX: Verdict.RETRY,
    OutcomeReason.INVALID_URL: Verdict.PERMANENT,
    OutcomeReason.HTTP_410: Verdict.PERMANENT,
    OutcomeReason.HTTP_4XX: Verdict.PERMANENT,
    OutcomeReason.HTTP_OTHER: Verdict.PERMANENT,
    OutcomeReason.PAYLOAD_BUG: Verdict.PERMANENT,
}


def classify(outcome: PostResult) -> Verdict:
    """Delivered (2xx), retryable (network, timeout, 408, 429, 5xx) or permanent (the rest)."""
    return _VERDICTS[reason_of(outcome)]


def is_blind(outcome: PostResult) -> bool:
    """Whether a breaker should count ``outcome`` as a failure: network loss, a timeout, or a
    5xx without ``Retry-After``. A 408/429, or a 5xx naming its wait, is the receiver saying
    "later", not a dead endpoint."""
    reason = reason_of(outcome)
    if reason in (OutcomeReason.NETWORK, OutcomeReason.TIMEOUT):
        return True
    return reason is OutcomeReason.HTTP_5XX and outcome.retry_after is None


def backoff_ceiling(failures: int) -> timedelta:
    """The largest wait after the ``failures``-th failed attempt of an event (``failures >= 1``)."""
    if failures < 1:
        raise ValueError(f"failures must be at least 1, not {failures}")
    ceiling = BACKOFF_BASE
    for _ in range(failures - 1):  # stops at the cap, so a huge count costs six steps
        ceiling *= BACKOFF_FACTOR
        if ceiling >= MAX_DELAY:
            return MAX_DELAY
    return ceiling


def backoff_delay(failures: int, draw: float) -> timedelta:
    """The full-jitter wait: ``draw`` (uniform in ``[0, 1]``) times :func:`backoff_ceiling`."""
    if not 0.0 <= draw <= 1.0:  # also refuses NaN
        raise ValueError(f"draw must lie in [0, 1], not {draw!r}")
    return backoff_ceiling(failures) * draw


def server_wait(retry_after: RetryAfter, now: datetime) -> timedelta:
    """The wait a ``Retry-After`` asks for at ``now``, within ``[0, MAX_DELAY]``."""
    return retry_after_delay(retry_after, now, cap=MAX_DELAY)


def next_step(outcome: PostResult, *, failures: int, draw: float, now: datetime) -> RetryDecision:
    """Decide after an attempt. ``failures`` counts the event's failed attempts including this
    one when it failed (ignored when it was delivered); ``draw`` is a uniform number in
    ``[0, 1]`` for the jitter. A retry waits the drawn backoff, or the server's ``Retry-After``
    when that is longer (capped at :data:`MAX_DELAY`)."""
    _require_aware(now, "now")
    reason = reason_of(outcome)
    verdict = _VERDICTS[reason]
    if verdict is not Verdict.RETRY:
        return RetryDecision(verdict=verdict, reason=reason)
    delay = backoff_delay(failures, draw)
    honoured = False
    if outcome.retry_after is not None:  # a server may ask for longer, never for sooner
        asked = server_wait(outcome.retry_after, now)
        honoured = asked > delay
        delay = max(delay, asked)
    return RetryDecision(
        verdict=verdict,
        reason=reason,
        delay=delay,
        retry_at=now + delay,
        honoured_retry_after=honoured,
    )


def _require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
