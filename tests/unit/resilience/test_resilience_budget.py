"""Budgets, watchdog timeouts, retry delays and the Retry-After header."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.resilience import BreakerPolicy, FailoverBudget, RetryPolicy, Timeouts, retry_after
from fleetd.resilience.budget import RETRY_AFTER_LIMIT, doubled

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0", timedelta(0)),
        ("120", timedelta(seconds=120)),
        (" 7 ", timedelta(seconds=7)),
        ("86400", RETRY_AFTER_LIMIT),
        ("86401", RETRY_AFTER_LIMIT),
        ("9" * 5000, RETRY_AFTER_LIMIT),
        ("Thu, 01 Jan 2026 12:00:30 GMT", timedelta(seconds=30)),
        ("Thu, 01 Jan 2026 11:00:00 GMT", timedelta(0)),
        ("Fri, 01 Jan 2027 12:00:00 GMT", RETRY_AFTER_LIMIT),
        ("Thu, 01 Jan 2026 12:00:30 UTC", timedelta(seconds=30)),
        ("Thu, 01 Jan 2026 12:00:30 +0200", None),
        ("Thursday, 01-Jan-26 12:00:30 GMT", None),
        ("Thu Jan  1 12:00:30 2026", None),
        ("Thu, 31 Feb 2026 12:00:30 GMT", None),
        ("Thu, 01 Foo 2026 12:00:30 GMT", None),
        ("Thu, 01 Jan 2026 12:00 GMT", None),
        ("Thu, 01 Jan 2026 12:00:3x GMT", None),
        ("Thu 01 Jan 2026 12:00:30 GMT", None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("٣", None),
    ],
)
def test_retry_after_reads_seconds_and_dates(value: str | None, expected: timedelta | None) -> None:
    """Delta-seconds or an HTTP date, never negative, never beyond a day; junk reads as absent."""
    assert retry_after(value, T0) == expected


def test_the_first_retries_double_with_jitter_within_the_cap() -> None:
    """base * 2**(n-1) scaled by 0.5..1.5, capped at 30 s."""
    policy = RetryPolicy()
    assert policy.delay(1, 0.5) == SECOND
    assert policy.delay(2, 0.0) == SECOND
    assert policy.delay(2, 1.0) == 3 * SECOND
    assert policy.delay(3, 0.5) == 4 * SECOND
    assert policy.delay(10, 0.5) == 30 * SECOND
    assert policy.delay(0, 7.0) == 1.5 * SECOND


def test_a_server_retry_after_replaces_the_computed_delay_within_its_cap() -> None:
    policy = RetryPolicy()
    assert policy.delay(5, 0.9, retry_after=2 * SECOND) == 2 * SECOND
    assert policy.delay(1, 0.0, retry_after=timedelta(hours=2)) == timedelta(minutes=5)


@given(retry=st.integers(min_value=-5, max_value=10_000), rnd=st.floats(allow_nan=False))
def test_a_retry_delay_stays_within_its_bounds(retry: int, rnd: float) -> None:
    policy = RetryPolicy()
    assert policy.base / 2 <= policy.delay(retry, rnd) <= policy.cap


@given(
    base=st.integers(min_value=1, max_value=10**6),
    times=st.integers(min_value=-3, max_value=10**6),
    extra=st.integers(min_value=0, max_value=10**8),
)
def test_doubling_stays_between_its_base_and_its_cap(base: int, times: int, extra: int) -> None:
    start, cap = timedelta(seconds=base), timedelta(seconds=base + extra)
    value = doubled(start, times, cap)
    assert start <= value <= cap
    assert value.total_seconds() == min(base + extra, base * 2 ** min(max(times, 0), 64))


def test_long_cooldowns_do_not_overflow() -> None:
    """A day-long cooldown doubled a million times is the cap, not an OverflowError."""
    cap = timedelta(days=900_000_000)
    policy = BreakerPolicy(cooldown=timedelta(days=1), cooldown_cap=cap)
    assert policy.cooldown_for(10**6) == cap
    assert RetryPolicy(base=timedelta(days=1), cap=cap).delay(10**6, 0.5) == cap


def test_the_watchdog_never_runs_past_the_deadline() -> None:
    timeouts = Timeouts(connect=2 * SECOND, attempt=10 * SECOND)
    deadline = T0 + 4 * SECOND
    assert timeouts.for_attempt(T0, T0 + timedelta(minutes=1)) == 10 * SECOND
    assert timeouts.for_attempt(T0, deadline) == 4 * SECOND
    assert timeouts.connect_for(T0, deadline) == 2 * SECOND
    assert timeouts.connect_for(T0 + 3 * SECOND, deadline) == SECOND
    assert timeouts.for_attempt(T0 + timedelta(minutes=1), deadline) == timedelta(0)


@pytest.mark.parametrize(
    "build",
    [
        lambda: FailoverBudget(attempts=0),
        lambda: FailoverBudget(total=timedelta(0)),
        lambda: Timeouts(connect=timedelta(0)),
        lambda: Timeouts(connect=20 * SECOND, attempt=10 * SECOND),
        lambda: RetryPolicy(retries=-1),
        lambda: RetryPolicy(base=timedelta(0)),
        lambda: RetryPolicy(cap=timedelta(milliseconds=1)),
        lambda: RetryPolicy(retry_after_cap=-SECOND),
    ],
)
def test_value_objects_refuse_nonsense(build: object) -> None:
    with pytest.raises(ValueError, match=r"\w"):
        build()  # type: ignore[operator]
