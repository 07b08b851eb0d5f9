"""The ordered endpoint pool with sticky primary, and the bounded failover sweep of one call."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.resilience import (
    BreakerState,
    ErrorClass,
    FailoverBudget,
    GiveUp,
    GiveUpReason,
    Outcome,
    Pick,
    Pool,
    Settled,
    Sweep,
    next_attempt,
    settle,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
E = ErrorClass
OK = Outcome()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def call(
    pool: Pool,
    outcomes: dict[int, Outcome],
    now: datetime,
    budget: FailoverBudget | None = None,
) -> tuple[Pool, list[int], Settled | GiveUp]:
    """Run one sweep; endpoint ``i`` answers ``outcomes[i]`` (success if absent)."""
    sweep = Sweep.start(budget or FailoverBudget(attempts=10), now)
    dialed: list[int] = []
    while True:
        pool, sweep, step = next_attempt(pool, sweep, now)
        if isinstance(step, GiveUp):
            return pool, dialed, step
        dialed.append(step.index)
        pool, sweep, settled = settle(pool, sweep, step, outcomes.get(step.index, OK), now)
        if settled is not Settled.NEXT:
            return pool, dialed, settled


def test_the_primary_serves_while_it_answers() -> None:
    """While the first endpoint answers, it alone is dialled and stays the active one."""
    pool = Pool.of("a", "b", "c")
    pool, dialed, result = call(pool, {}, T0)
    assert (dialed, result) == ([0], Settled.SUCCEEDED)
    assert pool.active(T0) == 0
    assert pool.endpoints[0].health.last_ok_at == T0


@pytest.mark.parametrize("error", [E.REFUSED, E.RESET, E.TIMEOUT, E.SERVER_ERROR, E.THROTTLED])
def test_a_failover_class_failure_moves_to_the_next_endpoint(error: ErrorClass) -> None:
    """Refused, reset, timeout, 5xx and throttles try the next endpoint in list order."""
    pool, dialed, result = call(Pool.of("a", "b", "c"), {0: Outcome(error=error)}, T0)
    assert (dialed, result) == ([0, 1], Settled.SUCCEEDED)
    assert pool.endpoints[0].health.last_error is error


@pytest.mark.parametrize("error", [E.AUTH, E.REJECTED, E.MALFORMED])
def test_a_non_failover_failure_ends_the_call_on_the_first_endpoint(error: ErrorClass) -> None:
    """Auth, request and body errors would be the same everywhere: no failover."""
    pool, dialed, result = call(Pool.of("a", "b"), {0: Outcome(error=error)}, T0)
    assert (dialed, result) == ([0], Settled.STOPPED)
    assert pool.endpoints[0].breaker.strikes == 0


def test_an_open_primary_is_skipped_and_probed_after_its_cooldown() -> None:
    """Three strikes open the primary; calls go to the fallback; then the primary is probed,
    and once its probe is answered every call returns to it (sticky primary)."""
    pool = Pool.of("a", "b")
    down = {0: Outcome(error=E.REFUSED)}
    for _ in range(3):
        pool, dialed, _ = call(pool, down, T0)
        assert dialed == [0, 1]
    assert pool.endpoints[0].breaker.state is BreakerState.OPEN
    pool, dialed, _ = call(pool, down, at(4))
    assert dialed == [1]
    assert pool.active(at(4)) == 1
    pool, dialed, _ = call(pool, {}, at(5))
    assert dialed == [0]
    assert pool.endpoints[0].breaker.state is BreakerState.CLOSED
    for later in (6, 60, 600):
        pool, dialed, _ = call(pool, {}, at(later))
        assert dialed == [0]


def test_while_the_primary_probes_other_calls_use_the_fallback() -> None:
    """With the primary's breaker half-open, one call probes it while other calls go to the
    fallback; a released probe permit is handed out again."""
    pool = Pool.of("a", "b")
    for _ in range(3):
        pool, _, _ = call(pool, {0: Outcome(error=E.TIMEOUT)}, T0)
    pool, probe = pool.pick(at(5))
    assert probe is not None
    assert (probe.index, probe.permit.probe) == (0, True)
    pool, other = pool.pick(at(5))
    assert other is not None
    assert other.index == 1
    pool = pool.release(probe)
    pool, again = pool.pick(at(6))
    assert again is not None
    assert (again.index, again.permit.probe) == (0, True)


def test_all_down_is_reported_with_when_it_may_recover() -> None:
    """Every breaker open: no dial at all, the pool is all down until the earliest cooldown."""
    pool = Pool.of("a", "b")
    down = {0: Outcome(error=E.TIMEOUT), 1: Outcome(error=E.REFUSED)}
    for second in (0, 0, 1):
        pool, _, result = call(pool, down, at(second))
        assert isinstance(result, GiveUp)
        assert result.reason is GiveUpReason.EXHAUSTED
    assert pool.all_down(at(2))
    assert pool.active(at(2)) is None
    pool, dialed, result = call(pool, down, at(2))
    assert dialed == []
    assert result == GiveUp(reason=GiveUpReason.ALL_DOWN, last_error=E.CIRCUIT_OPEN, ready_at=at(6))
    assert not pool.all_down(at(6))


def test_exhausted_names_the_last_error_and_the_server_advice() -> None:
    """When every endpoint failed, the give-up is exhausted with the last error and the retry time
    the server advised."""
    pool = Pool.of("a", "b")
    throttled = Outcome(error=E.THROTTLED, retry_after=timedelta(seconds=30))
    outcomes = {0: throttled, 1: Outcome(error=E.THROTTLED, retry_after=timedelta(seconds=9))}
    _, dialed, result = call(pool, outcomes, T0)
    assert dialed == [0, 1]
    assert result == GiveUp(reason=GiveUpReason.EXHAUSTED, last_error=E.THROTTLED, retry_at=at(30))


def test_the_budget_bounds_dials_and_time() -> None:
    """The failover budget stops a sweep once its attempts are spent or its total time is up, each
    with its own give-up reason."""
    pool = Pool.of("a", "b", "c")
    down = {i: Outcome(error=E.TIMEOUT) for i in range(3)}
    _, dialed, result = call(pool, down, T0, FailoverBudget(attempts=2))
    assert dialed == [0, 1]
    assert isinstance(result, GiveUp)
    assert result.reason is GiveUpReason.ATTEMPTS_SPENT
    sweep = Sweep.start(FailoverBudget(total=timedelta(seconds=10)), T0)
    _, _, step = next_attempt(pool, sweep, at(10))
    assert isinstance(step, GiveUp)
    assert step.reason is GiveUpReason.DEADLINE


def test_a_stale_pick_changes_nothing() -> None:
    """A pick from a pool that was since rebuilt (renamed or shortened) is ignored."""
    pool, pick = Pool.of("a", "b").pick(T0)
    assert pick is not None
    other = Pool.of("x", "y")
    assert other.record(pick, Outcome(error=E.TIMEOUT), T0) is other
    assert other.release(pick) is other
    ghost = Pick(5, "a", pick.permit)
    assert pool.record(ghost, OK, T0) is pool
    assert pool.record(pick, Outcome(error=E.CIRCUIT_OPEN), T0) is pool
    assert pool.record(pick, OK, T0) is not pool
    assert pool.release(pick) is pool


def test_a_pool_needs_unique_names() -> None:
    """A pool needs at least one endpoint and unique names; a fresh pool has no ready time."""
    with pytest.raises(ValueError, match="at least one"):
        Pool.of()
    with pytest.raises(ValueError, match="unique"):
        Pool.of("a", "a")
    assert Pool.of("a").ready_at() is None


# --- properties ----------------------------------------------------------------------------------

OUTCOMES = st.sampled_from(
    [OK, *(Outcome(error=e) for e in (E.REFUSED, E.TIMEOUT, E.SERVER_ERROR, E.THROTTLED, E.AUTH))]
)


@settings(max_examples=300)
@given(
    size=st.integers(min_value=1, max_value=4),
    calls=st.lists(
        st.tuples(st.integers(min_value=0, max_value=20), st.lists(OUTCOMES, max_size=4)),
        max_size=40,
    ),
)
def test_the_first_dial_of_a_call_is_always_the_lowest_admitting_endpoint(
    size: int, calls: list[tuple[int, list[Outcome]]]
) -> None:
    """Whatever happened before, a call starts at the lowest index whose breaker admits."""
    pool, now = Pool.of(*(f"e{i}" for i in range(size))), T0
    for gap, outcomes in calls:
        now += timedelta(seconds=gap)
        expected = next((i for i, e in enumerate(pool.endpoints) if e.breaker.admits(now)), None)
        assert pool.active(now) == expected
        pool, dialed, _ = call(pool, dict(enumerate(outcomes)), now)
        assert (dialed[0] if dialed else None) == expected
        assert dialed == sorted(set(dialed))


@settings(max_examples=200)
@given(
    size=st.integers(min_value=2, max_value=4),
    failures=st.integers(min_value=3, max_value=30),
    gaps=st.lists(st.integers(min_value=0, max_value=30), min_size=30, max_size=30),
)
def test_sticky_primary_returns_after_recovery(size: int, failures: int, gaps: list[int]) -> None:
    """However long the primary was down, once it answers again calls return to it and stay."""
    pool, now = Pool.of(*(f"e{i}" for i in range(size))), T0
    for gap in gaps[:failures]:
        now += timedelta(seconds=gap)
        pool, _, _ = call(pool, {0: Outcome(error=E.REFUSED)}, now)
    assert pool.endpoints[0].breaker.state is not BreakerState.CLOSED
    now += timedelta(seconds=60)
    pool, dialed, result = call(pool, {}, now)
    assert (dialed, result) == ([0], Settled.SUCCEEDED)
    for gap in gaps:
        now += timedelta(seconds=gap)
        pool, dialed, _ = call(pool, {}, now)
        assert dialed == [0]
