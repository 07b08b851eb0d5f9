"""Calls over an established link, and where each endpoint stands for the surfaces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetd.resilience import (
    BreakerState,
    ErrorClass,
    Outcome,
    Pool,
    Standing,
    standing,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REFUSED = Outcome(error=ErrorClass.REFUSED)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _opened(pool: Pool, index: int, now: datetime) -> Pool:
    for _ in range(3):
        pool = pool.observe(index, REFUSED, now)
    return pool


def test_calls_over_a_kept_link_strike_a_closed_breaker_like_dials() -> None:
    """Three failed calls on an open connection open its breaker; an answer ends the run."""
    pool = Pool.of("0", "1")
    pool = pool.observe(0, REFUSED, T0).observe(0, REFUSED, T0)
    pool = pool.observe(0, Outcome(latency=timedelta(milliseconds=4)), T0)
    assert pool.endpoints[0].breaker.strikes == 0
    assert pool.endpoints[0].health.latency == timedelta(milliseconds=4)
    pool = _opened(pool, 0, at(1))
    assert pool.endpoints[0].breaker.state is BreakerState.OPEN
    assert pool.active(at(1)) == 1


def test_a_call_on_a_breaker_not_closed_only_teaches_health() -> None:
    """While open or half-open the breaker is left to its probe; the health record still counts."""
    pool = _opened(Pool.of("0"), 0, T0)
    breaker = pool.endpoints[0].breaker
    after = pool.observe(0, REFUSED, at(1))
    assert after.endpoints[0].breaker is breaker
    assert after.endpoints[0].health.failures == pool.endpoints[0].health.failures + 1


def test_an_unknown_index_or_a_call_that_never_dialed_changes_nothing() -> None:
    """An index past the list, or an outcome that never reached the network, is a no-op."""
    pool = Pool.of("0")
    assert pool.observe(5, REFUSED, T0) is pool
    assert pool.observe(-1, REFUSED, T0) is pool
    opened = _opened(pool, 0, T0)
    assert opened.observe(0, Outcome(error=ErrorClass.CIRCUIT_OPEN), T0) is opened


@pytest.mark.parametrize(
    ("setup", "index", "active", "when", "expected"),
    [
        ("fresh", 0, 0, 0, Standing.ACTIVE),
        ("fresh", 1, 0, 0, Standing.STANDBY),
        ("fresh", 0, 1, 0, Standing.RETURN_PENDING),
        ("open0", 0, 1, 1, Standing.BREAKER_OPEN),
        ("open0", 0, 1, 6, Standing.PROBE_DUE),
        ("open0", 0, None, 1, Standing.BREAKER_OPEN),
        ("refused0", 0, 1, 1, Standing.UNREACHABLE),
        ("refused0", 0, None, 1, Standing.UNREACHABLE),
        ("fresh", 1, None, 0, Standing.STANDBY),
    ],
)
def test_standing_names_why_an_endpoint_is_or_is_not_in_use(
    setup: str, index: int, active: int | None, when: float, expected: Standing
) -> None:
    """Active, open, probe due, unreachable, pending return to primary, or standby."""
    pool = Pool.of("0", "1")
    if setup == "open0":
        pool = _opened(pool, 0, T0)
    elif setup == "refused0":
        pool = pool.observe(0, REFUSED, T0)
    assert standing(pool.endpoints[index], index, active, at(when)) is expected


def test_a_disabled_endpoint_says_so_unless_it_is_in_use() -> None:
    """An endpoint its adapter disabled (a webhook receiver's 410) stands disabled whatever its
    breaker; the one in use is active."""
    pool = _opened(Pool.of("0", "1"), 0, T0)
    assert standing(pool.endpoints[0], 0, 1, at(1), disabled=True) is Standing.DISABLED
    assert standing(pool.endpoints[1], 1, None, at(1), disabled=True) is Standing.DISABLED
    assert standing(pool.endpoints[1], 1, 1, at(1), disabled=True) is Standing.ACTIVE
