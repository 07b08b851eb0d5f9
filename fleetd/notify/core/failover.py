"""What one event's attempt across the ordered receivers means: pure, table-tested.

An attempt to deliver one event is one failover sweep over the receivers
(:class:`~fleetd.notify.receivers.Receivers`): each dial's
:class:`~fleetd.notify.core.retry.PostResult` is translated once into the resilience vocabulary
(:func:`outcome_of`), which decides whether the sweep moves on and whether the receiver's breaker
counts a strike::

    outcome of one dial                  class          next receiver?  strike?
    2xx                                  (success)      —               —
    refused, reset, DNS, TLS (network)   REFUSED        yes             yes
    requestTimeoutMs elapsed             TIMEOUT        yes             yes
    5xx (but 503/529 with Retry-After)   SERVER_ERROR   yes             yes
    429; 503/529 with Retry-After        THROTTLED      yes             never
    410                                  GONE           yes             never
    401, 403                             AUTH           no              no
    408, other 4xx, 3xx, invalid URL     REJECTED       no              no

A 410 is the receiver retiring itself (Standard Webhooks: disable the endpoint): the receivers
disable it until an operator acts (:class:`~fleetd.notify.receivers.Receivers`), and the same
attempt goes on to the next receiver.

When the sweep ends, :func:`decide` gives the event's fate from its deciding dial — the last one
that was not a 410 (a 410 speaks for its receiver, not for the event), or the 410 itself when
every dial was one — with the transport retry table of :mod:`fleetd.notify.core.retry` (delivered,
retry after a drawn or advised wait, or permanent until the config changes or a replay): a 4xx is
permanent for the event on the receiver that said it, a 408 is retried later (not failed over), a
sweep that failed over to the end is retried, and one that found every receiver gone is permanent
(``http_410``).
The wait honours the latest Retry-After any receiver in the sweep gave, within
:data:`~fleetd.notify.core.retry.MAX_DELAY`, so a throttled primary is not asked again before it
said.
A sweep that dialed nothing (every breaker refused) has no fate: the attempt is given back unsent.

Pure: no clock (``now`` is an argument), no randomness (the draw is), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetd.notify.core.retry import (
    MAX_DELAY,
    PostResult,
    RetryDecision,
    TransportFailure,
    Verdict,
    next_step,
    server_wait,
)
from fleetd.resilience import ErrorClass, Outcome, classify_status

__all__ = ["Dialed", "SweepResult", "after_sweep", "error_class", "outcome_of"]

_GONE = 410

_TRANSPORT_CLASSES = {
    TransportFailure.NETWORK: ErrorClass.REFUSED,
    TransportFailure.TIMEOUT: ErrorClass.TIMEOUT,
    TransportFailure.INVALID_URL: ErrorClass.REJECTED,
}


def error_class(attempt: PostResult) -> ErrorClass | None:
    """The resilience class of one dial's outcome (``None``: delivered)."""
    if attempt.failure is not None:
        return _TRANSPORT_CLASSES[attempt.failure]
    assert attempt.status is not None
    return classify_status(attempt.status, retry_after=attempt.retry_after is not None)


def outcome_of(attempt: PostResult, *, latency: timedelta, now: datetime) -> Outcome:
    """One dial as the breaker and the health record see it, at ``now`` (when it ended)."""
    error = error_class(attempt)
    advised = None
    if error is ErrorClass.THROTTLED and attempt.retry_after is not None:
        advised = server_wait(attempt.retry_after, now)
    return Outcome(error=error, latency=max(latency, timedelta(0)), retry_after=advised)


@dataclass(frozen=True, slots=True)
class Dialed:
    """One dial of a sweep: the receiver's index and how it ended."""

    index: int
    outcome: PostResult


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """How one event's attempt went: the dials in order (empty when every breaker refused), and
    the latest time a throttling receiver asked to be left alone until."""

    dialed: tuple[Dialed, ...] = ()
    retry_at: datetime | None = None

    @property
    def deciding(self) -> Dialed | None:
        """The dial that decides the event's fate: the last one not answered 410, else the last."""
        for dial in reversed(self.dialed):
            if dial.outcome.status != _GONE:
                return dial
        return self.dialed[-1] if self.dialed else None

    @property
    def last(self) -> PostResult | None:
        """The deciding dial's outcome (``None``: nothing was dialed)."""
        deciding = self.deciding
        return None if deciding is None else deciding.outcome

    @property
    def receiver(self) -> int | None:
        """The index of the receiver that had the deciding word."""
        deciding = self.deciding
        return None if deciding is None else deciding.index


def after_sweep(
    result: SweepResult, *, failures: int, draw: float, now: datetime
) -> RetryDecision | None:
    """The event's fate after the sweep at ``now``; ``None`` when nothing was dialed.

    ``failures`` counts the event's failed attempts including this one (the journal's attempt
    number); ``draw`` is the jitter draw in ``[0, 1]``.
    """
    last = result.last
    if last is None:
        return None
    decision = next_step(last, failures=failures, draw=draw, now=now)
    if decision.verdict is not Verdict.RETRY or result.retry_at is None:
        return decision
    assert decision.retry_at is not None
    asked = min(max(result.retry_at, now), now + MAX_DELAY)
    if asked <= decision.retry_at:
        return decision
    return RetryDecision(
        verdict=Verdict.RETRY,
        reason=decision.reason,
        delay=asked - now,
        retry_at=asked,
        honoured_retry_after=True,
    )
