"""Failure classification: which failures fail over, which strike the breaker, which answered."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetd.resilience import TRAITS, ErrorClass, Outcome, classify_status

E = ErrorClass


@pytest.mark.parametrize(
    ("status", "retry_after", "expected"),
    [
        (200, False, None),
        (204, True, None),
        (101, False, E.REJECTED),
        (302, False, E.REJECTED),
        (400, False, E.REJECTED),
        (401, False, E.AUTH),
        (403, True, E.AUTH),
        (404, False, E.REJECTED),
        (409, False, E.REJECTED),
        (410, False, E.GONE),
        (410, True, E.GONE),
        (422, False, E.REJECTED),
        (429, False, E.THROTTLED),
        (429, True, E.THROTTLED),
        (500, False, E.SERVER_ERROR),
        (500, True, E.SERVER_ERROR),
        (502, False, E.SERVER_ERROR),
        (503, False, E.SERVER_ERROR),
        (503, True, E.THROTTLED),
        (504, True, E.SERVER_ERROR),
        (529, False, E.SERVER_ERROR),
        (529, True, E.THROTTLED),
        (599, False, E.SERVER_ERROR),
    ],
)
def test_status_classes(status: int, retry_after: bool, expected: ErrorClass | None) -> None:
    """Each HTTP status lands in the class RFC 0018 §3.3 and Vak 15 give it."""
    assert classify_status(status, retry_after=retry_after) is expected


@pytest.mark.parametrize(
    ("error", "failover", "strike"),
    [
        (E.REFUSED, True, True),
        (E.RESET, True, True),
        (E.TIMEOUT, True, True),
        (E.SERVER_ERROR, True, True),
        (E.THROTTLED, True, False),
        (E.CIRCUIT_OPEN, True, False),
        (E.AUTH, False, False),
        (E.GONE, True, False),
        (E.REJECTED, False, False),
        (E.MALFORMED, False, False),
        (E.TOO_LARGE, False, False),
    ],
)
def test_failover_and_strike(error: ErrorClass, failover: bool, strike: bool) -> None:
    """Refused, reset, timeout, 5xx, 410 and an open breaker fail over; auth, other 4xx and
    bodies stop.

    Only blind failures strike: the server speaking (a throttle, a 410) never does.
    """
    assert (TRAITS[error].failover, TRAITS[error].strike) == (failover, strike)


def test_every_class_has_traits_and_a_strike_always_fails_over() -> None:
    """Every error class has traits, every strike fails over, and circuit_open is the only class
    of a call that was never dialled."""
    assert set(TRAITS) == set(ErrorClass)
    assert all(t.failover for t in TRAITS.values() if t.strike)
    assert [e for e, t in TRAITS.items() if not t.dialed] == [E.CIRCUIT_OPEN]


def test_an_outcome_is_checked_on_construction() -> None:
    """An Outcome refuses a negative latency and a retry_after on an error other than throttled;
    a success has no traits."""
    assert Outcome().ok
    assert Outcome().traits is None
    assert Outcome(error=E.AUTH).traits == TRAITS[E.AUTH]
    with pytest.raises(ValueError, match="latency"):
        Outcome(latency=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="retry_after"):
        Outcome(error=E.SERVER_ERROR, retry_after=timedelta(seconds=1))
    assert Outcome(error=E.THROTTLED, retry_after=timedelta(seconds=1)).retry_after
