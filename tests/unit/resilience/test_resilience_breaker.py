"""The circuit breaker: its table, its cooldown ladder, its one probe, and what never strikes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.errors import IllegalTransitionError
from fleetd.resilience import (
    Breaker,
    BreakerEvent,
    BreakerPolicy,
    BreakerState,
    ErrorClass,
    Permit,
    classify_status,
)
from fleetd.resilience.breaker import TRANSITIONS, next_breaker_state

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BreakerPolicy()
S, E = BreakerState, ErrorClass
STRIKES = [E.REFUSED, E.RESET, E.TIMEOUT, E.SERVER_ERROR]
ANSWERS = [None, E.THROTTLED, E.AUTH, E.REJECTED, E.MALFORMED]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def dial(breaker: Breaker, error: ErrorClass | None, now: datetime) -> Breaker:
    """Admit one call at ``now`` and record ``error`` for it."""
    breaker, permit = breaker.admit(now)
    assert permit is not None
    return breaker.record(permit, error, now, POLICY)


def opened(now: datetime = T0) -> Breaker:
    breaker = Breaker()
    for _ in range(POLICY.open_after):
        breaker = dial(breaker, E.TIMEOUT, now)
    return breaker


def test_every_row_is_reachable_and_anything_else_raises() -> None:
    """The table is the only way to move; a missing row raises and names the breaker."""
    for (state, event), (target, cause) in TRANSITIONS.items():
        assert next_breaker_state(state, event) is target
        assert cause
    with pytest.raises(IllegalTransitionError):
        next_breaker_state(S.OPEN, BreakerEvent.ANSWER)
    with pytest.raises(IllegalTransitionError):
        next_breaker_state(S.CLOSED, BreakerEvent.PROBE_ANSWERED)


@pytest.mark.parametrize("error", STRIKES)
def test_three_consecutive_strikes_open_it(error: ErrorClass) -> None:
    """Two blind failures keep it closed; the third opens it for the first cooldown (5 s)."""
    breaker = dial(dial(Breaker(), error, T0), error, T0)
    assert breaker.state is S.CLOSED
    assert breaker.strikes == 2
    breaker = dial(breaker, error, at(1))
    assert breaker.state is S.OPEN
    assert breaker.opened_at == at(1)
    assert breaker.cooldown == timedelta(seconds=5)
    assert breaker.admit(at(5.9)) == (breaker, None)


@pytest.mark.parametrize("answer", ANSWERS)
def test_an_answer_breaks_the_run_of_strikes(answer: ErrorClass | None) -> None:
    """Success, throttle, auth, request and body errors reset the strike count."""
    breaker = dial(dial(Breaker(), E.TIMEOUT, T0), E.TIMEOUT, T0)
    breaker = dial(breaker, answer, T0)
    assert (breaker.state, breaker.strikes) == (S.CLOSED, 0)
    assert dial(dial(breaker, E.TIMEOUT, T0), E.TIMEOUT, T0).state is S.CLOSED


def test_an_answer_with_no_strikes_changes_nothing() -> None:
    """The steady path allocates no new breaker."""
    breaker = Breaker()
    assert dial(breaker, None, T0) is breaker


def test_the_first_consult_after_the_cooldown_is_the_one_probe() -> None:
    """Open admits nothing before its cooldown; after it, one probe and nobody else."""
    breaker = opened()
    assert breaker.state_at(at(4.9)) is S.OPEN
    assert breaker.state_at(at(5)) is S.HALF_OPEN
    probing, permit = breaker.admit(at(5))
    assert permit == Permit(probing.epoch, probe=True)
    assert probing.state is S.HALF_OPEN
    assert probing.admit(at(6)) == (probing, None)
    assert not probing.admits(at(600))


def test_an_answered_probe_closes_it_and_resets_the_cooldown() -> None:
    """Back to closed with no strikes; the next opening starts from 5 s again."""
    breaker, permit = opened().admit(at(5))
    assert permit is not None
    breaker = breaker.record(permit, None, at(5), POLICY)
    assert (breaker.state, breaker.strikes, breaker.openings) == (S.CLOSED, 0, 0)
    for _ in range(3):
        breaker = dial(breaker, E.RESET, at(10))
    assert breaker.cooldown == timedelta(seconds=5)


def test_a_struck_probe_reopens_with_the_cooldown_doubled_to_its_cap() -> None:
    """5 s, then 10, 20, 40, 60, 60: each failed probe doubles the cooldown, never past 60 s."""
    breaker = opened()
    now = T0
    seen = [breaker.cooldown]
    for _ in range(5):
        now += breaker.cooldown
        breaker = dial(breaker, E.REFUSED, now)
        assert breaker.state is S.OPEN
        assert breaker.opened_at == now
        seen.append(breaker.cooldown)
    assert [c.total_seconds() for c in seen] == [5, 10, 20, 40, 60, 60]


def test_a_throttled_probe_is_an_answer() -> None:
    """A 429 or 503 with Retry-After to the probe: the endpoint is alive, it closes."""
    for status in (429, 503, 529):
        error = classify_status(status, retry_after=True)
        breaker, permit = opened().admit(at(5))
        assert permit is not None
        assert breaker.record(permit, error, at(5), POLICY).state is S.CLOSED


def test_an_abandoned_probe_frees_the_slot_for_the_next_consult() -> None:
    """A cancelled probe hands its slot back; its late outcome is stale."""
    breaker, first = opened().admit(at(5))
    assert first is not None
    breaker = breaker.abandon(first)
    assert (breaker.state, breaker.probing) == (S.HALF_OPEN, False)
    breaker, second = breaker.admit(at(6))
    assert second is not None
    assert second.probe
    assert breaker.record(first, None, at(6), POLICY) is breaker
    assert breaker.abandon(first) is breaker


def test_abandoning_an_ordinary_permit_changes_nothing() -> None:
    """Abandoning a permit that is not a probe leaves the breaker unchanged."""
    breaker, permit = Breaker().admit(T0)
    assert permit is not None
    assert breaker.abandon(permit) is breaker


def test_an_outcome_from_before_the_state_moved_is_ignored() -> None:
    """A call admitted while closed and finishing after the breaker opened does not decide."""
    breaker, late = Breaker().admit(T0)
    assert late is not None
    breaker = opened()
    probing, probe = breaker.admit(at(5))
    assert probe is not None
    assert probing.record(late, None, at(5), POLICY) is probing
    assert breaker.record(late, E.TIMEOUT, at(1), POLICY) is breaker


def test_a_circuit_open_outcome_is_not_an_attempt() -> None:
    """Nothing was dialed, so nothing is recorded."""
    breaker = dial(Breaker(), E.TIMEOUT, T0)
    _, permit = breaker.admit(T0)
    assert permit is not None
    assert breaker.record(permit, E.CIRCUIT_OPEN, T0, POLICY) is breaker


def test_a_breaker_value_keeps_its_invariants() -> None:
    """A Breaker is refused when open without an opening time, holding an opening time while closed,
    or probing while open."""
    with pytest.raises(ValueError, match="opening time"):
        Breaker(state=S.OPEN)
    with pytest.raises(ValueError, match="opening time"):
        Breaker(opened_at=T0)
    with pytest.raises(ValueError, match="probe"):
        Breaker(state=S.OPEN, opened_at=T0, probing=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"open_after": 0}, "open_after"),
        ({"cooldown": timedelta(0)}, "cooldown must"),
        ({"cooldown_cap": timedelta(seconds=1)}, "cooldown_cap"),
    ],
)
def test_a_policy_refuses_nonsense(kwargs: dict[str, object], message: str) -> None:
    """A BreakerPolicy with open_after 0, a zero cooldown or a cap below the cooldown is refused."""
    with pytest.raises(ValueError, match=message):
        BreakerPolicy(**kwargs)  # type: ignore[arg-type]


# --- properties ----------------------------------------------------------------------------------

ERRORS = st.one_of(st.sampled_from(STRIKES), st.sampled_from([None, *ErrorClass]))
STEP = st.one_of(
    st.tuples(st.just("advance"), st.integers(min_value=0, max_value=90)),
    st.tuples(st.just("admit"), st.just(0)),
    st.tuples(st.just("finish"), st.integers(min_value=0, max_value=50)),
    st.tuples(st.just("abandon"), st.integers(min_value=0, max_value=50)),
)


@settings(max_examples=400)
@given(start_open=st.booleans(), steps=st.lists(st.tuples(STEP, ERRORS), max_size=80))
def test_never_two_probes_at_once(
    start_open: bool, steps: list[tuple[tuple[str, int], ErrorClass | None]]
) -> None:
    """Whatever calls are admitted, finished, cancelled, and however time moves: one probe."""
    breaker, now = (opened() if start_open else Breaker()), T0
    outstanding: list[Permit] = []
    for (action, n), error in steps:
        if action == "advance":
            now += timedelta(seconds=n)
        elif action == "admit":
            breaker, permit = breaker.admit(now)
            if permit is not None:
                outstanding.append(permit)
        elif outstanding:
            permit = outstanding.pop(n % len(outstanding))
            if action == "finish":
                breaker = breaker.record(permit, error, now, POLICY)
            else:
                breaker = breaker.abandon(permit)
        probes = [p for p in outstanding if p.probe]
        assert len(probes) <= 1
        if probes:
            assert probes[0].epoch == breaker.epoch
            assert breaker.admit(now + timedelta(days=1))[1] is None
        assert breaker.cooldown <= POLICY.cooldown_cap


SERVER_SPEAKING = st.sampled_from(
    [
        classify_status(429, retry_after=True),
        classify_status(429, retry_after=False),
        classify_status(503, retry_after=True),
        classify_status(529, retry_after=True),
    ]
)


@settings(max_examples=300)
@given(
    errors=st.lists(st.one_of(SERVER_SPEAKING, st.sampled_from(ANSWERS)), max_size=200),
    gaps=st.lists(st.integers(min_value=0, max_value=120), min_size=200, max_size=200),
)
def test_a_throttle_never_opens_the_breaker(
    errors: list[ErrorClass | None], gaps: list[int]
) -> None:
    """Any run of 429s and 503/529s with Retry-After (among answers) leaves it closed."""
    breaker, now = Breaker(), T0
    for error, gap in zip(errors, gaps, strict=False):
        now += timedelta(seconds=gap)
        breaker = dial(breaker, error, now)
        assert breaker.state is S.CLOSED
        assert breaker.strikes == 0


@settings(max_examples=300)
@given(errors=st.lists(ERRORS.filter(lambda e: e is not E.CIRCUIT_OPEN), max_size=60))
def test_it_opens_exactly_on_the_third_consecutive_strike(
    errors: list[ErrorClass | None],
) -> None:
    """Closed calls: open iff the last three recorded outcomes were all strikes."""
    breaker, run = Breaker(), 0
    for error in errors:
        breaker = dial(breaker, error, T0)
        run = run + 1 if error in STRIKES else 0
        assert (breaker.state is S.OPEN) == (run >= POLICY.open_after)
        if breaker.state is S.OPEN:
            break


@settings(max_examples=300)
@given(
    open_after=st.integers(min_value=1, max_value=5),
    cooldown=st.integers(min_value=1, max_value=30),
    cap=st.integers(min_value=0, max_value=300),
    probes=st.lists(st.booleans(), max_size=40),
)
def test_the_cooldown_never_exceeds_its_cap(
    open_after: int, cooldown: int, cap: int, probes: list[bool]
) -> None:
    """However many probes fail in a row, the cooldown stays within [cooldown, cap]."""
    policy = BreakerPolicy(
        open_after=open_after,
        cooldown=timedelta(seconds=cooldown),
        cooldown_cap=timedelta(seconds=cooldown + cap),
    )
    breaker, now = Breaker(), T0
    for _ in range(open_after):
        breaker, permit = breaker.admit(now)
        assert permit is not None
        breaker = breaker.record(permit, E.TIMEOUT, now, policy)
    for answered in probes:
        if breaker.state is S.CLOSED:
            break
        assert policy.cooldown <= breaker.cooldown <= policy.cooldown_cap
        now = breaker.ready_at or now
        breaker, permit = breaker.admit(now)
        assert permit is not None
        assert permit.probe
        breaker = breaker.record(permit, None if answered else E.TIMEOUT, now, policy)
