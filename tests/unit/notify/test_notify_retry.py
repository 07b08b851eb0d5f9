"""Webhook transport retry (M4 §10.4): which outcomes retry, how long to wait, Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.notify.core.retry import (
    BACKOFF_BASE,
    MAX_DELAY,
    OutcomeReason,
    PostResult,
    RetryDecision,
    TransportFailure,
    Verdict,
    backoff_ceiling,
    backoff_delay,
    classify,
    is_blind,
    next_step,
    reason_of,
    server_wait,
)

NOW = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)
S = timedelta(seconds=1)


def status(code: int, retry_after: timedelta | datetime | None = None) -> PostResult:
    return PostResult(status=code, retry_after=retry_after)


def failed(failure: TransportFailure) -> PostResult:
    return PostResult(failure=failure)


@pytest.mark.parametrize(
    ("outcome", "verdict", "reason"),
    [
        (status(200), Verdict.DELIVERED, OutcomeReason.DELIVERED),
        (status(201), Verdict.DELIVERED, OutcomeReason.DELIVERED),
        (status(204), Verdict.DELIVERED, OutcomeReason.DELIVERED),
        (status(299), Verdict.DELIVERED, OutcomeReason.DELIVERED),
        (failed(TransportFailure.NETWORK), Verdict.RETRY, OutcomeReason.NETWORK),
        (failed(TransportFailure.TIMEOUT), Verdict.RETRY, OutcomeReason.TIMEOUT),
        (status(408), Verdict.RETRY, OutcomeReason.HTTP_408),
        (status(429), Verdict.RETRY, OutcomeReason.HTTP_429),
        (status(500), Verdict.RETRY, OutcomeReason.HTTP_5XX),
        (status(502), Verdict.RETRY, OutcomeReason.HTTP_5XX),
        (status(503), Verdict.RETRY, OutcomeReason.HTTP_5XX),
        (status(599), Verdict.RETRY, OutcomeReason.HTTP_5XX),
        (status(400), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(401), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(403), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(404), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(409), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(410), Verdict.PERMANENT, OutcomeReason.HTTP_410),
        (status(413), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(422), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(499), Verdict.PERMANENT, OutcomeReason.HTTP_4XX),
        (status(301), Verdict.PERMANENT, OutcomeReason.HTTP_OTHER),
        (status(307), Verdict.PERMANENT, OutcomeReason.HTTP_OTHER),
        (status(101), Verdict.PERMANENT, OutcomeReason.HTTP_OTHER),
        (status(600), Verdict.PERMANENT, OutcomeReason.HTTP_OTHER),
        (failed(TransportFailure.INVALID_URL), Verdict.PERMANENT, OutcomeReason.INVALID_URL),
    ],
)
def test_classification_table(outcome: PostResult, verdict: Verdict, reason: str) -> None:
    """2xx delivers; network, timeout, 408, 429 and 5xx retry; every other answer is permanent."""
    assert classify(outcome) is verdict
    assert reason_of(outcome) == reason


@pytest.mark.parametrize(
    ("failures", "ceiling"),
    [(1, 5), (2, 15), (3, 45), (4, 135), (5, 405), (6, 900), (7, 900), (10**9, 900)],
)
def test_backoff_ceiling_grows_by_three_from_five_seconds_to_the_cap(
    failures: int, ceiling: int
) -> None:
    """The ceiling is 5 s × 3^(n-1), never above 15 minutes, even after a billion failures."""
    assert backoff_ceiling(failures) == ceiling * S


@pytest.mark.parametrize(
    ("failures", "draw", "delay"),
    [(1, 0.0, 0 * S), (1, 1.0, 5 * S), (1, 0.5, 2.5 * S), (3, 0.2, 9 * S), (8, 1.0, MAX_DELAY)],
)
def test_full_jitter_scales_the_ceiling_by_the_draw(
    failures: int, draw: float, delay: timedelta
) -> None:
    """The wait is the draw times the ceiling: zero for 0, the ceiling for 1."""
    assert backoff_delay(failures, draw) == delay


@pytest.mark.parametrize("draw", [-0.01, 1.01, float("nan"), float("inf")])
def test_a_draw_outside_the_unit_interval_is_refused(draw: float) -> None:
    """The jitter draw must lie in [0, 1]."""
    with pytest.raises(ValueError, match="draw"):
        backoff_delay(1, draw)


def test_a_failure_count_below_one_is_refused() -> None:
    """The ceiling is defined from the first failure on."""
    with pytest.raises(ValueError, match="failures"):
        backoff_ceiling(0)


@given(failures=st.integers(min_value=1, max_value=10**12), draw=st.floats(0.0, 1.0))
def test_a_drawn_delay_is_never_negative_nor_above_its_ceiling_nor_the_cap(
    failures: int, draw: float
) -> None:
    """Property: 0 <= delay <= ceiling <= 15 min, and the ceiling never shrinks with failures."""
    delay = backoff_delay(failures, draw)
    ceiling = backoff_ceiling(failures)
    assert timedelta(0) <= delay <= ceiling <= MAX_DELAY
    assert ceiling >= BACKOFF_BASE
    assert backoff_ceiling(failures + 1) >= ceiling


@given(
    failures=st.integers(min_value=1, max_value=20),
    low=st.floats(0.0, 1.0),
    high=st.floats(0.0, 1.0),
)
def test_jitter_is_monotone_in_the_draw(failures: int, low: float, high: float) -> None:
    """Property: a larger draw never gives a shorter wait (the draw is the only randomness)."""
    low, high = sorted((low, high))
    assert backoff_delay(failures, low) <= backoff_delay(failures, high)


@pytest.mark.parametrize(
    ("retry_after", "delay"),
    [
        (30 * S, 30 * S),
        (NOW + 90 * S, 90 * S),
        (NOW - 90 * S, timedelta(0)),
        (NOW + timedelta(hours=3), MAX_DELAY),
        (timedelta(days=2), MAX_DELAY),
    ],
)
def test_a_server_wait_is_kept_within_zero_and_the_cap(
    retry_after: timedelta | datetime, delay: timedelta
) -> None:
    """A past date means now; a wait past 15 minutes is cut to 15 minutes."""
    assert server_wait(retry_after, NOW) == delay


@pytest.mark.parametrize("code", [408, 429, 500, 503])
def test_a_longer_retry_after_replaces_the_drawn_wait_on_a_retryable_status(code: int) -> None:
    """The server's wait wins over a shorter backoff draw, and the decision says so."""
    decision = next_step(status(code, 42 * S), failures=1, draw=0.0, now=NOW)
    assert decision == RetryDecision(
        verdict=Verdict.RETRY,
        reason=reason_of(status(code)),
        delay=42 * S,
        retry_at=NOW + 42 * S,
        honoured_retry_after=True,
    )


def test_retry_after_as_a_date_counts_from_now() -> None:
    """An HTTP-date Retry-After waits until that instant."""
    decision = next_step(status(429, NOW + 600 * S), failures=2, draw=1.0, now=NOW)
    assert decision.delay == 600 * S
    assert decision.retry_at == NOW + 600 * S


def test_retry_after_never_exceeds_the_cap() -> None:
    """A Retry-After of a day still retries within 15 minutes."""
    decision = next_step(status(503, NOW + timedelta(days=1)), failures=1, draw=0.5, now=NOW)
    assert decision.delay == MAX_DELAY


@pytest.mark.parametrize(
    ("retry_after", "failures"),
    [
        (timedelta(0), 1),
        (timedelta(0), 4),
        (NOW - timedelta(hours=1), 2),
        (NOW, 6),
        (2 * S, 1),
    ],
)
@pytest.mark.parametrize("code", [429, 503])
def test_a_throttle_never_shortens_the_backoff(
    code: int, retry_after: timedelta | datetime, failures: int
) -> None:
    """Retry-After 0, a date already past or a wait below the draw: the drawn backoff of this
    attempt number stands (2b: a receiver saying "now" is not asked every pass)."""
    decision = next_step(status(code, retry_after), failures=failures, draw=1.0, now=NOW)
    assert decision.delay == backoff_ceiling(failures)
    assert decision.retry_at == NOW + backoff_ceiling(failures)
    assert not decision.honoured_retry_after


@pytest.mark.parametrize("code", [200, 400, 404, 301])
def test_retry_after_is_ignored_when_the_answer_is_not_retryable(code: int) -> None:
    """Delivered and permanent outcomes schedule nothing, whatever the header says."""
    decision = next_step(status(code, 5 * S), failures=1, draw=0.5, now=NOW)
    assert decision.delay is None
    assert decision.retry_at is None
    assert not decision.honoured_retry_after


@pytest.mark.parametrize("failure", [TransportFailure.NETWORK, TransportFailure.TIMEOUT])
def test_network_and_timeout_retry_after_the_drawn_wait(failure: TransportFailure) -> None:
    """Without Retry-After the wait is the jittered backoff of this failure count."""
    decision = next_step(failed(failure), failures=3, draw=0.5, now=NOW)
    assert decision.verdict is Verdict.RETRY
    assert decision.delay == 22.5 * S
    assert decision.retry_at == NOW + 22.5 * S
    assert not decision.honoured_retry_after


def test_a_permanent_answer_stops_the_event() -> None:
    """A 400 is permanent for the event: no delay, no next attempt."""
    assert next_step(status(400), failures=1, draw=0.5, now=NOW) == RetryDecision(
        verdict=Verdict.PERMANENT, reason=OutcomeReason.HTTP_4XX
    )


def test_a_delivered_answer_ends_the_event() -> None:
    """A 2xx is delivered whatever the failure count before it."""
    assert next_step(status(204), failures=9, draw=0.0, now=NOW) == RetryDecision(
        verdict=Verdict.DELIVERED, reason=OutcomeReason.DELIVERED
    )


@given(
    code=st.sampled_from([408, 429, 500, 502, 503, 504]),
    failures=st.integers(1, 50),
    draw=st.floats(0.0, 1.0),
    seconds=st.one_of(st.none(), st.integers(-(10**6), 10**7)),
)
def test_every_retry_waits_between_zero_and_the_cap(
    code: int, failures: int, draw: float, seconds: int | None
) -> None:
    """Property: whatever the server says, a retry is scheduled within [now, now + 15 min] and
    never before the drawn backoff of its attempt number."""
    retry_after = None if seconds is None else NOW + seconds * S
    decision = next_step(status(code, retry_after), failures=failures, draw=draw, now=NOW)
    assert decision.verdict is Verdict.RETRY
    assert decision.delay is not None
    assert decision.retry_at is not None
    assert backoff_delay(failures, draw) <= decision.delay <= MAX_DELAY
    assert decision.retry_at == NOW + decision.delay


@pytest.mark.parametrize(
    ("outcome", "blind"),
    [
        (failed(TransportFailure.NETWORK), True),
        (failed(TransportFailure.TIMEOUT), True),
        (status(500), True),
        (status(503, 30 * S), False),
        (status(429), False),
        (status(408), False),
        (status(400), False),
        (status(200), False),
        (failed(TransportFailure.INVALID_URL), False),
    ],
)
def test_only_blind_failures_count_for_a_breaker(outcome: PostResult, blind: bool) -> None:
    """Network loss, timeouts and 5xx without a stated wait are blind; "try later" is not."""
    assert is_blind(outcome) is blind


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"status": 200, "failure": TransportFailure.NETWORK},
        {"status": 99},
        {"status": 1000},
        {"failure": TransportFailure.TIMEOUT, "retry_after": 5 * S},
        {"status": 429, "retry_after": datetime(2026, 1, 1)},  # naive on purpose
    ],
)
def test_an_impossible_outcome_is_refused(fields: dict[str, object]) -> None:
    """An outcome has a status or a failure, a real status, and an aware Retry-After date."""
    with pytest.raises(ValueError, match=r"\w"):
        PostResult(**fields)  # type: ignore[arg-type]


def test_now_must_be_aware() -> None:
    """A naive now is refused rather than compared with UTC dates."""
    naive = datetime(2026, 1, 1)  # naive on purpose
    with pytest.raises(ValueError, match="now"):
        next_step(status(500), failures=1, draw=0.0, now=naive)
    assert server_wait(NOW + 5 * S, NOW.astimezone(timezone(timedelta(hours=2)))) == 5 * S
