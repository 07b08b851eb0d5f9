"""The session state machine: a table, and nothing outside it."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.bridge.roster import Roster
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
    return Session(
        session_id="s-1",
        name="m-1",
        profile="sonnet",
        kind="claude",
        role=None,
        owner="lead",
        created_at=NOW,
        state=state,
    )


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
        session.stepped(event, NOW)
    assert session.state is state
    assert session.turn == 0
    assert session.history == ()


def test_every_row_has_a_cause() -> None:
    """Each transition states why it exists."""
    assert all(cause for _, cause in TRANSITIONS.values())


def test_delivery_counts_turns_and_presence_is_recorded_once() -> None:
    """Turn numbers follow deliveries; presence time is the first contact."""
    session = _session()
    for event in (E.PRESENCE, E.DELIVERED, E.TURN_COMPLETED, E.DELIVERED):
        session = session.stepped(event, NOW)
    assert session.turn == 2
    assert session.presence_at == NOW


@given(st.lists(st.sampled_from(list(SessionEvent)), max_size=30))
def test_random_event_sequences_only_follow_the_table(events: list[SessionEvent]) -> None:
    """Whatever events arrive, every recorded move is a table row and RELEASED is final."""
    session = _session()
    for event in events:
        before = session.state
        try:
            after = session.stepped(event, NOW)
        except IllegalTransitionError:
            assert session.state is before
            continue
        assert (before, event) in TRANSITIONS
        assert session.state is before  # the value held is never changed: a new one is made
        session = after
    if S.RELEASED in [h[2] for h in session.history]:
        assert session.state is S.RELEASED


def test_a_session_is_a_frozen_value_and_a_step_that_changes_nothing_keeps_it() -> None:
    """Nothing outside the table sets a session's fields; contact again is the same value."""
    session = _session().stepped(E.PRESENCE, NOW)
    with pytest.raises(FrozenInstanceError):
        session.state = S.BUSY  # type: ignore[misc]
    assert session.stepped(E.PRESENCE, NOW) is session
    assert session.stepped(E.DELIVERED, NOW) is not session


def test_history_keeps_the_last_changes_and_every_change_is_told() -> None:
    """A member of thousands of turns keeps a bounded history; each change the roster puts in
    place is one touch of the member (the bridge's revision counts them)."""
    roster = Roster()
    roster.add(_session())
    roster.changes.take()
    before = roster.touches.count
    roster.apply("s-1", E.PRESENCE, NOW)
    roster.apply("s-1", E.PRESENCE, NOW)  # contact again: nothing changed, nothing told
    assert roster.changes.take() == {"s-1"}
    assert roster.touches.count == before + 1
    for _ in range(HISTORY_KEPT):
        roster.apply("s-1", E.DELIVERED, NOW)
        roster.apply("s-1", E.TURN_COMPLETED, NOW)
    session = roster.sessions["s-1"]
    assert len(session.history) == HISTORY_KEPT
    assert session.history[-1] == (S.BUSY, E.TURN_COMPLETED, S.DONE)
    assert roster.touches.count == before + 1 + 2 * HISTORY_KEPT


def test_the_roster_changes_the_member_as_it_is_now_not_as_a_caller_read_it() -> None:
    """A caller that read the member before an await never writes over a change made in
    between: the roster steps and updates the current value, and the old one stays as it was."""
    roster = Roster()
    roster.add(_session())
    read_before = roster.apply("s-1", E.PRESENCE, NOW)
    roster.apply("s-1", E.DELIVERED, NOW)  # made meanwhile, by another part
    updated = roster.update(read_before.session_id, pane_id="p-1")
    assert (updated.state, updated.turn, updated.pane_id) == (S.BUSY, 1, "p-1")
    assert (read_before.state, read_before.pane_id) == (S.READY, None)
    assert roster.sessions["s-1"] is updated


def test_only_the_table_moves_state_turn_and_presence() -> None:
    """``update`` sets facts the table does not govern and refuses the ones it does."""
    roster = Roster()
    roster.add(_session())
    for governed in ("state", "turn", "presence", "presence_at", "state_since", "history"):
        with pytest.raises(TypeError, match=r"Roster\.apply"):
            roster.update("s-1", **{governed: None})
    assert roster.sessions["s-1"].state is S.SPAWNING
