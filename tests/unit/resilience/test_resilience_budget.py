"""The failover budget and the capped doubling of cooldowns."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.resilience import BreakerPolicy, FailoverBudget
from fleetd.resilience.budget import doubled


@given(
    base=st.integers(min_value=1, max_value=10**6),
    times=st.integers(min_value=-3, max_value=10**6),
    extra=st.integers(min_value=0, max_value=10**8),
)
def test_doubling_stays_between_its_base_and_its_cap(base: int, times: int, extra: int) -> None:
    """For any base, count and cap, doubled() is the base doubled that often, never below the
    base or above the cap."""
    start, cap = timedelta(seconds=base), timedelta(seconds=base + extra)
    value = doubled(start, times, cap)
    assert start <= value <= cap
    assert value.total_seconds() == min(base + extra, base * 2 ** min(max(times, 0), 64))


def test_long_cooldowns_do_not_overflow() -> None:
    """A day-long cooldown doubled a million times is the cap, not an OverflowError."""
    cap = timedelta(days=900_000_000)
    policy = BreakerPolicy(cooldown=timedelta(days=1), cooldown_cap=cap)
    assert policy.cooldown_for(10**6) == cap


@pytest.mark.parametrize(
    "build",
    [
        lambda: FailoverBudget(attempts=0),
        lambda: FailoverBudget(total=timedelta(0)),
    ],
)
def test_value_objects_refuse_nonsense(build: object) -> None:
    """A FailoverBudget with zero attempts or zero total time is refused."""
    with pytest.raises(ValueError, match=r"\w"):
        build()  # type: ignore[operator]
