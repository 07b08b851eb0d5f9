"""One attempt across the receivers, pure: what each dial's outcome means to the breaker and the
sweep, and the event's fate when the sweep ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.notify.core.failover import Dialed, SweepResult, after_sweep, error_class, outcome_of
from fleetd.notify.core.retry import (
    MAX_DELAY,
    OutcomeReason,
    PostResult,
    RetryAfter,
    TransportFailure,
    Verdict,
    classify,
)
from fleetd.resilience import TRAITS, ErrorClass

NOW = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)
S = timedelta(seconds=1)
E = ErrorClass


def status(code: int, retry_after: RetryAfter | None = None) -> PostResult:
    return PostResult(status=code, retry_after=retry_after)


def failed(failure: TransportFailure) -> PostResult:
    return PostResult(failure=failure)


@pytest.mark.parametrize(
    ("attempt", "error", "failover", "strike"),
    [
        (status(200), None, False, False),
        (status(204), None, False, False),
        (failed(TransportFailure.NETWORK), E.REFUSED, True, True),
        (failed(TransportFailure.TIMEOUT), E.TIMEOUT, True, True),
        (status(500), E.SERVER_ERROR, True, True),
        (status(502), E.SERVER_ERROR, True, True),
        (status(503), E.SERVER_ERROR, True, True),
        (status(503, 30 * S), E.THROTTLED, True, False),
        (status(429), E.THROTTLED, True, False),
        (status(429, 30 * S), E.THROTTLED, True, False),
        (status(401), E.AUTH, False, False),
        (status(403), E.AUTH, False, False),
        (status(400), E.REJECTED, False, False),
        (status(404), E.REJECTED, False, False),
        (status(408), E.REJECTED, False, False),
        (status(410), E.GONE, True, False),
        (status(307), E.REJECTED, False, False),
        (failed(TransportFailure.INVALID_URL), E.REJECTED, False, False),
    ],
)
def test_each_dial_outcome_has_one_class(
    attempt: PostResult, error: ErrorClass | None, failover: bool, strike: bool
) -> None:
    """Blind failures fail over and strike; a throttle or a 410 fails over and never strikes;
    auth and request errors (408 among them) end the attempt on that receiver."""
    assert error_class(attempt) is error
    outcome = outcome_of(attempt, latency=S, now=NOW)
    assert outcome.error is error
    traits = outcome.traits
    seen = (False, False) if traits is None else (traits.failover, traits.strike)
    assert seen == (failover, strike)


def test_a_throttle_carries_the_wait_it_asked_for_and_nothing_else_does() -> None:
    """Retry-After reaches the sweep on a throttle only, as a wait from when the dial ended."""
    assert outcome_of(status(429, 7 * S), latency=S, now=NOW).retry_after == 7 * S
    dated = status(503, NOW + 90 * S)
    assert outcome_of(dated, latency=S, now=NOW).retry_after == 90 * S
    assert outcome_of(status(429), latency=S, now=NOW).retry_after is None
    assert outcome_of(status(500, 7 * S), latency=S, now=NOW).retry_after is None
    assert outcome_of(status(200), latency=-S, now=NOW).latency == timedelta(0)


def swept(*attempts: PostResult, retry_at: datetime | None = None) -> SweepResult:
    return SweepResult(
        dialed=tuple(Dialed(i, a) for i, a in enumerate(attempts)), retry_at=retry_at
    )


@pytest.mark.parametrize(
    ("result", "verdict", "reason", "delay"),
    [
        (swept(status(503), status(200)), Verdict.DELIVERED, OutcomeReason.DELIVERED, None),
        (swept(status(429), status(204)), Verdict.DELIVERED, OutcomeReason.DELIVERED, None),
        (swept(status(503), status(404)), Verdict.PERMANENT, OutcomeReason.HTTP_4XX, None),
        (swept(status(410)), Verdict.PERMANENT, OutcomeReason.HTTP_410, None),
        (swept(status(410), status(410)), Verdict.PERMANENT, OutcomeReason.HTTP_410, None),
        (swept(status(410), status(200)), Verdict.DELIVERED, OutcomeReason.DELIVERED, None),
        (swept(status(503), status(410)), Verdict.RETRY, OutcomeReason.HTTP_5XX, 2.5 * S),
        (swept(status(408)), Verdict.RETRY, OutcomeReason.HTTP_408, 2.5 * S),
        (swept(status(503), status(502)), Verdict.RETRY, OutcomeReason.HTTP_5XX, 2.5 * S),
        (
            swept(failed(TransportFailure.NETWORK), failed(TransportFailure.TIMEOUT)),
            Verdict.RETRY,
            OutcomeReason.TIMEOUT,
            2.5 * S,
        ),
        (
            swept(status(429, 60 * S), status(503), retry_at=NOW + 60 * S),
            Verdict.RETRY,
            OutcomeReason.HTTP_5XX,
            60 * S,
        ),
        (
            swept(status(503), status(429, S), retry_at=NOW + S),
            Verdict.RETRY,
            OutcomeReason.HTTP_429,
            2.5 * S,
        ),
        (
            swept(status(429), status(503), retry_at=NOW + 2 * MAX_DELAY),
            Verdict.RETRY,
            OutcomeReason.HTTP_5XX,
            MAX_DELAY,
        ),
        (
            swept(status(429), status(500), retry_at=NOW - S),
            Verdict.RETRY,
            OutcomeReason.HTTP_5XX,
            2.5 * S,
        ),
    ],
)
def test_the_last_dial_decides_and_the_latest_advised_wait_stands(
    result: SweepResult, verdict: Verdict, reason: OutcomeReason, delay: timedelta | None
) -> None:
    """Delivered when a receiver took it; a 4xx is permanent; a 410 speaks for its receiver,
    so the dial before it decides, and only a sweep of 410s is permanent; a sweep failed over to
    its end is
    retried after the drawn wait (draw 0.5 of 5 s), or the latest wait a receiver asked for when
    that is longer, capped at 15 minutes."""
    decision = after_sweep(result, failures=1, draw=0.5, now=NOW)
    assert decision is not None
    assert (decision.verdict, decision.reason, decision.delay) == (verdict, reason, delay)
    if delay is not None:
        assert decision.retry_at == NOW + delay


def test_a_sweep_that_dialed_nothing_has_no_fate() -> None:
    """Every breaker refused: nothing to decide (the attempt is given back unsent)."""
    assert after_sweep(SweepResult(), failures=1, draw=0.5, now=NOW) is None
    assert SweepResult().last is None
    assert SweepResult().receiver is None
    assert swept(status(503), status(200)).receiver == 1
    assert swept(status(503), status(410)).receiver == 0


ATTEMPTS = st.one_of(
    st.builds(failed, st.sampled_from(list(TransportFailure))),
    st.builds(
        status,
        st.sampled_from([200, 204, 307, 400, 401, 403, 404, 408, 410, 429, 500, 502, 503, 529]),
        st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)),
    ).filter(lambda a: a.failure is None),
)


@given(
    attempts=st.lists(ATTEMPTS, min_size=1, max_size=8),
    asked=st.none() | st.timedeltas(min_value=-MAX_DELAY, max_value=timedelta(days=2)),
    failures=st.integers(min_value=1, max_value=40),
    draw=st.floats(min_value=0.0, max_value=1.0),
)
def test_the_fate_is_the_last_dials_and_no_wait_exceeds_the_cap(
    attempts: list[PostResult],
    asked: timedelta | None,
    failures: int,
    draw: float,
) -> None:
    """Whatever the sweep saw: the verdict is the last dial's that was not a 410 (the last
    dial's when all were), a retry waits between zero and 15 minutes, and never less than a
    receiver asked for (up to that cap)."""
    retry_at = None if asked is None else NOW + asked
    decision = after_sweep(
        swept(*attempts, retry_at=retry_at), failures=failures, draw=draw, now=NOW
    )
    assert decision is not None
    deciding = [a for a in attempts if a.status != 410] or attempts
    assert decision.verdict is classify(deciding[-1])
    if decision.verdict is not Verdict.RETRY:
        assert decision.delay is None
        return
    assert decision.delay is not None
    assert timedelta(0) <= decision.delay <= MAX_DELAY
    assert decision.retry_at == NOW + decision.delay
    if retry_at is not None:
        assert decision.retry_at >= min(retry_at, NOW + MAX_DELAY)


@given(attempt=ATTEMPTS)
def test_only_blind_failures_strike(attempt: PostResult) -> None:
    """A dial strikes its receiver's breaker exactly when it got no answer or a 5xx, except a
    503/529 that names its wait; a 429 never strikes."""
    code = attempt.status
    named_wait = code in (503, 529) and attempt.retry_after is not None
    blind = attempt.failure in (TransportFailure.NETWORK, TransportFailure.TIMEOUT) or (
        code is not None and 500 <= code <= 599 and not named_wait
    )
    error = error_class(attempt)
    assert (error is not None and TRAITS[error].strike) == blind
