"""The per-endpoint health record: reachability, EWMA latency, bounded error rate, last error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.resilience import EndpointHealth, ErrorClass, HealthPolicy, Outcome

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = HealthPolicy()
E = ErrorClass
MS = timedelta(milliseconds=1)


def test_a_fresh_record_knows_nothing() -> None:
    """A fresh EndpointHealth knows no reachability, no latency and no last error; its error rate
    is zero."""
    health = EndpointHealth()
    assert (health.reachable, health.latency, health.error_rate, health.last_error) == (
        None,
        None,
        0.0,
        None,
    )


def test_latency_is_an_exponentially_weighted_average_of_successes() -> None:
    """The first sample is taken whole; later ones move it by an eighth of the difference."""
    health = EndpointHealth().observe(Outcome(latency=80 * MS), T0, POLICY)
    assert health.latency == 80 * MS
    health = health.observe(Outcome(latency=160 * MS), T0, POLICY)
    assert health.latency == 90 * MS
    health = health.observe(Outcome(), T0, POLICY)
    assert health.latency == 90 * MS
    failed = health.observe(Outcome(error=E.TIMEOUT, latency=5000 * MS), T0, POLICY)
    assert failed.latency == 90 * MS


@pytest.mark.parametrize(
    ("error", "reachable", "counts_as_failure"),
    [
        (E.REFUSED, False, True),
        (E.RESET, False, True),
        (E.TIMEOUT, False, True),
        (E.SERVER_ERROR, True, True),
        (E.THROTTLED, True, True),
        (E.AUTH, True, False),
        (E.REJECTED, True, False),
        (E.MALFORMED, True, False),
        (E.TOO_LARGE, True, False),
    ],
)
def test_a_failure_sets_reachability_and_the_last_error_code(
    error: ErrorClass, reachable: bool, counts_as_failure: bool
) -> None:
    """Blind failures make it unreachable; only failover-class failures count against it."""
    health = EndpointHealth().observe(Outcome(), T0, POLICY)
    health = health.observe(Outcome(error=error), T0 + MS, POLICY)
    assert health.reachable is reachable
    assert health.last_error is error
    assert health.last_error_at == T0 + MS
    assert health.last_ok_at == T0
    assert health.error_rate == (0.5 if counts_as_failure else 0.0)
    assert (health.calls, health.failures) == (2, int(counts_as_failure))


def test_a_success_keeps_the_last_error_for_the_record() -> None:
    """A success after a failure marks the endpoint reachable and records its time, and the last
    error is kept."""
    health = EndpointHealth().observe(Outcome(error=E.REFUSED), T0, POLICY)
    health = health.observe(Outcome(), T0 + MS, POLICY)
    assert (health.reachable, health.last_error, health.last_ok_at) == (True, E.REFUSED, T0 + MS)


def test_a_skipped_endpoint_is_not_observed() -> None:
    """A call skipped because the circuit is open leaves the endpoint's health untouched."""
    health = EndpointHealth()
    assert health.observe(Outcome(error=E.CIRCUIT_OPEN), T0, POLICY) is health


def test_the_error_rate_forgets_beyond_its_window() -> None:
    """Four failures then four successes in a window of four: the rate is back to zero."""
    policy = HealthPolicy(window=4)
    health = EndpointHealth()
    for _ in range(4):
        health = health.observe(Outcome(error=E.TIMEOUT), T0, policy)
    assert health.error_rate == 1.0
    for expected in (0.75, 0.5, 0.25, 0.0):
        health = health.observe(Outcome(), T0, policy)
        assert health.error_rate == expected
    assert (health.calls, health.failures) == (8, 4)


@given(
    window=st.integers(min_value=1, max_value=64),
    failed=st.lists(st.booleans(), max_size=200),
)
def test_the_error_rate_is_the_failed_share_of_the_last_window(
    window: int, failed: list[bool]
) -> None:
    """For any sequence of outcomes the error rate is the failed share of the last window calls, and
    the window bits never exceed it."""
    policy = HealthPolicy(window=window)
    health = EndpointHealth()
    for fail in failed:
        health = health.observe(Outcome(error=E.RESET if fail else None), T0, policy)
    recent = failed[-window:]
    assert health.error_rate == (sum(recent) / len(recent) if recent else 0.0)
    assert health.window < 1 << window


@pytest.mark.parametrize(
    "kwargs",
    [{"window": 0}, {"window": 4096}, {"latency_weight": 0.0}, {"latency_weight": 1.5}],
)
def test_a_policy_refuses_nonsense(kwargs: dict[str, float]) -> None:
    """A HealthPolicy with an empty or oversized window, or a latency weight of 0 or above 1, is
    refused."""
    with pytest.raises(ValueError, match="HealthPolicy"):
        HealthPolicy(**kwargs)  # type: ignore[arg-type]
