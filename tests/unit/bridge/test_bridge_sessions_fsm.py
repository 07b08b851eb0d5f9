"""The session state machine: a table, and nothing outside it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.bridge.sessions import (
    HISTORY_KEPT,
    TRANSITIONS,
    Session,
    SessionEvent,
    SessionState,
    next_state,
)
from fleetd.errors import IllegalTransitionError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
S, E = SessionState, SessionEvent


def _session(state: SessionState = S.SPAWNING) -> Session:
    session = Session(
        session_id="s-1",
        name="m-1",
        profile="sonnet",
        kind="claude",
        role=None,
        owner="lead",
        created_at=NOW,
    )
    session.state = state
    return session


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (S.SPAWNING, E.PRESENCE, S.READY),
        (S.READY, E.DELIVERED, S.BUSY),
        (S.DONE, E.DELIVERED, S.BUSY),
        (S.BUSY, E.TURN_COMPLETED, S.DONE),
        (S.BUSY, E.TURN_RECONCILED, S.DONE),
        (S.BUSY, E.TURN_FAILED, S.FAILED),
        (S.SPAWNING, E.START_FAILED, S.FAILED),
        (S.SPAWNING, E.NEVER_READY, S.FAILED),
        (S.BUSY, E.TARGET_GONE, S.FAILED),
        (S.FAILED, E.RELEASE, S.RELEASED),
        (S.BUSY, E.RELEASE, S.RELEASED),
    ],
)
def test_table_rows(state: SessionState, event: SessionEvent, expected: SessionState) -> None:
    """Each listed row moves to its documented state."""
    assert next_state(state, event) is expected


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.SPAWNING, E.DELIVERED),
        (S.READY, E.TURN_COMPLETED),
        (S.DONE, E.TURN_COMPLETED),
        (S.RELEASED, E.PRESENCE),
        (S.RELEASED, E.RELEASE),
        (S.FAILED, E.DELIVERED),
        (S.READY, E.NEVER_READY),
    ],
)
def test_illegal_transition_raises_and_changes_nothing(
    state: SessionState, event: SessionEvent
) -> None:
    """An event outside the table raises and leaves state and turn untouched."""
    session = _session(state)
    with pytest.raises(IllegalTransitionError):
        session.apply(event, NOW)
    assert session.state is state
    assert session.turn == 0
    assert session.history == []


def test_every_row_has_a_cause() -> None:
    """Each transition states why it exists."""
    assert all(cause for _, cause in TRANSITIONS.values())


def test_delivery_counts_turns_and_presence_is_recorded_once() -> None:
    """Turn numbers follow deliveries; presence time is the first contact."""
    session = _session()
    session.apply(E.PRESENCE, NOW)
    session.apply(E.DELIVERED, NOW)
    session.apply(E.TURN_COMPLETED, NOW)
    session.apply(E.DELIVERED, NOW)
    assert session.turn == 2
    assert session.presence_at == NOW


@given(st.lists(st.sampled_from(list(SessionEvent)), max_size=30))
def test_random_event_sequences_only_follow_the_table(events: list[SessionEvent]) -> None:
    """Whatever events arrive, every recorded move is a table row and RELEASED is final."""
    session = _session()
    for event in events:
        before = session.state
        try:
            session.apply(event, NOW)
        except IllegalTransitionError:
            assert session.state is before
            continue
        assert (before, event) in TRANSITIONS
    if S.RELEASED in [h[2] for h in session.history]:
        assert session.state is S.RELEASED


def test_history_keeps_the_last_changes_and_every_change_is_told() -> None:
    """A member of thousands of turns keeps a bounded history; each change reaches on_change."""
    session = _session()
    told: list[int] = []
    session.on_change = lambda: told.append(1)
    session.apply(E.PRESENCE, NOW)
    session.apply(E.PRESENCE, NOW)  # contact again: nothing changed, nothing told
    for _ in range(HISTORY_KEPT):
        session.apply(E.DELIVERED, NOW)
        session.apply(E.TURN_COMPLETED, NOW)
    assert len(session.history) == HISTORY_KEPT
    assert session.history[-1] == (S.BUSY, E.TURN_COMPLETED, S.DONE)
    assert len(told) == 1 + 2 * HISTORY_KEPT
