"""The turn machine: every row of its table, every pair it refuses, and what no sequence of
events can make it do (type a prompt twice, end a turn twice, change a value it was given)."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionState
from fleetd.bridge.turn_machine import (
    MAX_ATTEMPTS,
    REPLY_GRACE,
    RETRY_DELAY,
    TRANSITIONS,
    BaselineCapture,
    BaselineRead,
    BoundaryWatch,
    CaptureBaseline,
    DeliveryBaseline,
    EventKind,
    ForgetTurnRecord,
    PromptRefused,
    PromptTyped,
    PromptUncertain,
    ReadBoundary,
    RecordUncertain,
    RecordUntyped,
    RepairAnswered,
    ResubmitEnter,
    StatusPolled,
    StatusSighted,
    StoreRefused,
    TicketWithdrawn,
    TurnClosed,
    TurnEffect,
    TurnEvent,
    TurnPhase,
    TurnResolved,
    TurnRestored,
    TurnState,
    TurnToken,
    TypePrompt,
    TypingBegan,
    event_kind,
    step,
)
from fleetd.errors import FleetdError, IllegalTransitionError
from fleetd.herdr.model import AgentStatus
from tests.unit.bridge.turn_values import open_turn

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TOKEN = TurnToken(token_id="turn-1", session_id="s1", ticket_id="t-1", turn=1)
WINDOW = timedelta(seconds=5)
BASELINE = DeliveryBaseline(
    token_id="turn-1",
    captured_at=T0,
    source="visible",
    text="Answer 0.",
    marker_recognised=True,
    capture=BaselineCapture.PRESENT,
)
P, K = TurnPhase, EventKind


def _run(*events: TurnEvent, at: datetime = T0) -> TurnState:
    state = TurnState.pending(TOKEN)
    for event in events:
        state, _ = step(state, event, at)
    return state


#: A turn in each phase, reached the only way there is: by the machine's own steps.
STATES: dict[TurnPhase, TurnState] = {
    P.PENDING: _run(),
    P.TYPING: _run(TypingBegan()),
    P.SUBMITTED: _run(TypingBegan(), PromptTyped()),
    P.WORKING: _run(TypingBegan(), PromptTyped(), StatusPolled(AgentStatus.WORKING, 1)),
    P.AT_BOUNDARY: _run(
        TypingBegan(),
        PromptTyped(),
        StatusPolled(AgentStatus.WORKING, 1),
        StatusPolled(AgentStatus.IDLE, 2),
    ),
    P.RESTORED: _run(TurnRestored(T0)),
    P.SETTLED: _run(TypingBegan(), PromptTyped(), TurnResolved("reply")),
    P.ABANDONED: _run(TypingBegan(), PromptTyped(), TurnClosed("released")),
    P.UNTYPED: _run(TypingBegan(), PromptRefused("pane_busy")),
    P.WITHDRAWN: _run(TypingBegan(), TicketWithdrawn()),
}

#: One event of each kind.
EVENTS: dict[EventKind, TurnEvent] = {
    K.BEGIN: TypingBegan(),
    K.RESTORE: TurnRestored(T0),
    K.STORE_REFUSED: StoreRefused(),
    K.TYPED: PromptTyped(),
    K.UNCERTAIN: PromptUncertain("invalid_response"),
    K.REFUSED: PromptRefused("pane_busy"),
    K.WITHDRAWN: TicketWithdrawn(),
    K.BASELINE: BaselineRead(BASELINE),
    K.POLLED_WORKING: StatusPolled(AgentStatus.WORKING, 5, submit_window=WINDOW),
    K.POLLED_AT_PROMPT: StatusPolled(AgentStatus.IDLE, 6, submit_window=WINDOW),
    K.POLLED_OTHER: StatusPolled(AgentStatus.BLOCKED, 7, submit_window=WINDOW),
    K.SIGHTED: StatusSighted(AgentStatus.DONE, 8),
    K.REPAIR_ANSWERED: RepairAnswered("refused_unchanged", "unchanged", retryable=True),
    K.RESOLVED: TurnResolved("reply"),
    K.CLOSED: TurnClosed("released"),
}

#: The effects of the rows that ask for any, ten seconds after delivery (past the submit window
#: and the reply grace); every other row asks for none.
EFFECTS: dict[tuple[TurnPhase, EventKind], tuple[type[TurnEffect], ...]] = {
    (P.PENDING, K.BEGIN): (RecordUncertain, TypePrompt),
    (P.TYPING, K.TYPED): (CaptureBaseline,),
    (P.TYPING, K.UNCERTAIN): (CaptureBaseline,),
    (P.TYPING, K.REFUSED): (RecordUntyped,),
    (P.TYPING, K.WITHDRAWN): (ForgetTurnRecord,),
    (P.SUBMITTED, K.POLLED_AT_PROMPT): (ResubmitEnter,),
    (P.AT_BOUNDARY, K.POLLED_AT_PROMPT): (ReadBoundary,),
    **{(p, K.RESOLVED): (ForgetTurnRecord,) for p in (P.SUBMITTED, P.WORKING, P.AT_BOUNDARY)},
    **{(p, K.CLOSED): (ForgetTurnRecord,) for p in (P.SUBMITTED, P.WORKING, P.AT_BOUNDARY)},
    (P.RESTORED, K.RESOLVED): (ForgetTurnRecord,),
    (P.RESTORED, K.CLOSED): (ForgetTurnRecord,),
}

LATER = T0 + timedelta(seconds=10)


def test_the_fixtures_cover_every_phase_and_every_event_kind() -> None:
    """Each phase has a state reached by steps, each kind an event the classifier agrees on."""
    assert {phase: state.phase for phase, state in STATES.items()} == {p: p for p in P}
    assert {kind: event_kind(event) for kind, event in EVENTS.items()} == {k: k for k in K}
    assert set(EFFECTS) <= set(TRANSITIONS)


@pytest.mark.parametrize("row", sorted(TRANSITIONS), ids=lambda row: f"{row[0]}-{row[1]}")
def test_every_row_moves_to_its_phase_with_its_effects(row: tuple[TurnPhase, EventKind]) -> None:
    """Each row of the table: a turn in its phase given an event of its kind moves to the row's
    phase and asks for exactly the row's effects, and the row names its cause."""
    phase, kind = row
    after, effects = step(STATES[phase], EVENTS[kind], LATER)
    assert after.phase is TRANSITIONS[row][0]
    assert tuple(type(e) for e in effects) == EFFECTS.get(row, ())
    assert all(e.token == TOKEN for e in effects)
    assert TRANSITIONS[row][1]


_MISSING = sorted((phase, kind) for phase in P for kind in K if (phase, kind) not in TRANSITIONS)


@pytest.mark.parametrize("pair", _MISSING, ids=lambda pair: f"{pair[0]}-{pair[1]}")
def test_every_pair_not_in_the_table_is_refused(pair: tuple[TurnPhase, EventKind]) -> None:
    """A pair the table does not have raises IllegalTransitionError naming it; nothing moves."""
    phase, kind = pair
    state = STATES[phase]
    before = copy.deepcopy(state)
    with pytest.raises(IllegalTransitionError) as refused:
        step(state, EVENTS[kind], LATER)
    assert (refused.value.machine, refused.value.state, refused.value.event) == (
        "turn",
        phase.value,
        kind.value,
    )
    assert state == before
    assert isinstance(refused.value, FleetdError)


def test_terminal_phases_take_no_event_and_open_phases_take_a_close() -> None:
    """An ended turn refuses everything; every open turn can be resolved or closed, once."""
    for phase in P:
        kinds = {k for (p, k) in TRANSITIONS if p is phase}
        if phase.terminal:
            assert not kinds, phase
        if phase.open:
            assert {K.RESOLVED, K.CLOSED} <= kinds, phase


def test_the_write_ahead_record_comes_before_the_prompt() -> None:
    """Beginning a turn asks to store it as uncertain first and to type it second, both for
    this turn's token; a store that refuses ends the turn untyped with nothing more to do."""
    typing, effects = step(STATES[P.PENDING], TypingBegan(), T0)
    assert effects == (RecordUncertain(TOKEN), TypePrompt(TOKEN))
    untyped, more = step(typing, StoreRefused(), T0)
    assert (untyped.phase, more) == (P.UNTYPED, ())


def test_an_uncertain_prompt_opens_the_turn_as_uncertain() -> None:
    """herdr's unclear answer opens the turn (delivered at that moment) marked uncertain."""
    opened, _ = step(STATES[P.TYPING], PromptUncertain("invalid_response"), LATER)
    typed, _ = step(STATES[P.TYPING], PromptTyped(), LATER)
    assert (opened.delivered_at, opened.uncertain) == (LATER, True)
    assert (typed.delivered_at, typed.uncertain) == (LATER, False)


def test_enter_is_pressed_again_once_and_only_past_the_submit_window() -> None:
    """A prompt not working within the submit window gets Enter once; never before, never
    twice, and not while a resolver holds the turn."""
    submitted = STATES[P.SUBMITTED]
    idle = StatusPolled(AgentStatus.IDLE, 1, submit_window=WINDOW)
    early, effects = step(submitted, idle, T0 + WINDOW - timedelta(milliseconds=1))
    assert (effects, early.resubmitted) == ((), False)
    held = StatusPolled(AgentStatus.IDLE, 1, held=True, submit_window=WINDOW)
    assert step(submitted, held, LATER)[1] == ()
    pressed, effects = step(early, idle, T0 + WINDOW)
    assert (effects, pressed.resubmitted) == ((ResubmitEnter(TOKEN),), True)
    assert step(pressed, idle, LATER)[1] == ()


def test_the_fallback_waits_out_the_reply_grace_after_a_trusted_boundary() -> None:
    """Working then idle is a boundary seen at that moment; the pane is read only once the
    grace has passed with the member still at its prompt, and working again forgets it."""
    working = STATES[P.WORKING]
    idle = StatusPolled(AgentStatus.IDLE, 9)
    seen, effects = step(working, idle, LATER)
    assert (seen.phase, seen.boundary_at, effects) == (P.AT_BOUNDARY, LATER, ())
    within, effects = step(seen, idle, LATER + REPLY_GRACE - timedelta(milliseconds=1))
    assert (within.boundary_at, effects) == (LATER, ())
    assert step(within, idle, LATER + REPLY_GRACE)[1] == (ReadBoundary(TOKEN),)
    again, _ = step(seen, StatusPolled(AgentStatus.WORKING, 10), LATER)
    assert (again.phase, again.boundary_at, again.saw_working) == (P.WORKING, None, True)
    blocked, _ = step(seen, StatusPolled(AgentStatus.BLOCKED, 11), LATER)
    assert (blocked.phase, blocked.boundary_at) == (P.AT_BOUNDARY, LATER)


def test_a_restored_turn_records_what_it_sees_but_is_never_read_nor_resubmitted() -> None:
    """A turn a restart spans waits for its member's reply (M4 §8): working is noted, the watch
    records every status, and no status asks for Enter or a pane read."""
    restored = STATES[P.RESTORED]
    assert (restored.restored, restored.resubmitted, restored.delivered_at) == (True, True, T0)
    seen, _ = step(restored, StatusPolled(AgentStatus.WORKING, 1), LATER)
    assert seen.saw_working
    for n in range(3):
        seen, effects = step(seen, StatusPolled(AgentStatus.IDLE, 2), LATER + n * REPLY_GRACE)
        assert (seen.phase, effects) == (P.RESTORED, ())
    assert seen.watch.stable


def test_a_sighting_changes_only_the_watch_and_a_repeat_changes_nothing() -> None:
    """A status sighting moves the boundary watch only; two at-prompt sightings of one sequence
    number make it stable, a third hands back the very same value (the health tick's path), as
    does the poller seeing a working member working again."""
    turn = STATES[P.WORKING]
    once, _ = step(turn, StatusSighted(AgentStatus.IDLE, 4), LATER)
    twice, _ = step(once, StatusSighted(AgentStatus.IDLE, 4), LATER)
    assert dataclasses.replace(twice, watch=turn.watch) == turn
    assert twice.watch.stable
    assert step(twice, StatusSighted(AgentStatus.IDLE, 4), LATER)[0] is twice
    broken, _ = step(twice, StatusSighted(None, None), LATER)
    assert not broken.watch.stable
    assert broken.watch.epoch > twice.watch.epoch
    working = StatusPolled(AgentStatus.WORKING, 5)
    assert step(turn, working, LATER)[0] is turn  # still working, as the poller saw it before


def test_the_poller_seeing_a_turn_at_its_prompt_again_hands_back_the_very_same_value() -> None:
    """A turn typed but not yet working, or at its boundary, polled again with nothing new is the
    very same value: a new one is a change (the roster marks its member and every view of it is
    read again), and a steady poll four times a second is none. The boundary read is still asked
    for at every poll past the reply grace."""
    idle = StatusPolled(AgentStatus.IDLE, 1, submit_window=WINDOW)
    waiting = STATES[P.SUBMITTED]
    for _ in range(2):  # the watch counts a stretch at the prompt up to two sightings
        waiting, _ = step(waiting, idle, T0)
    again, effects = step(waiting, idle, T0 + timedelta(milliseconds=250))
    assert (again is waiting, effects) == (True, ())
    seen = STATES[P.WORKING]
    for _ in range(2):
        seen, _ = step(seen, StatusPolled(AgentStatus.IDLE, 9), LATER)
    assert seen.phase is P.AT_BOUNDARY
    steady, effects = step(seen, StatusPolled(AgentStatus.IDLE, 9), LATER)
    assert (steady is seen, effects) == (True, ())
    late, effects = step(seen, StatusPolled(AgentStatus.IDLE, 9), LATER + REPLY_GRACE)
    assert (late is seen, effects) == (True, (ReadBoundary(TOKEN),))


def test_the_boundary_watch_counts_stretches_and_epochs() -> None:
    """The stable gate's record: a new sequence number at the prompt starts a stretch (and,
    after one, moves the epoch); anything else breaks it."""
    watch = BoundaryWatch()
    first = watch.observe(AgentStatus.DONE, 1)
    assert (first.seq, first.at_prompt, first.epoch) == (1, 1, 0)
    moved = first.observe(AgentStatus.IDLE, 2)
    assert (moved.seq, moved.at_prompt, moved.epoch) == (2, 1, 1)
    stable = moved.observe(AgentStatus.IDLE, 2)
    assert stable.stable
    assert stable.observe(AgentStatus.IDLE, 2) is stable
    broken = stable.observe(AgentStatus.IDLE, None)
    assert broken == BoundaryWatch(None, 0, 2)
    assert broken.observe(AgentStatus.WORKING, 3) is broken  # broken already: the same value


def test_the_repair_ledger_counts_attempts_and_schedules_one_retry() -> None:
    """A refused scrape allows one retry after the delay, a second stops repair for the token;
    answers that were no attempt leave the ledger as it was (M4 §8.4)."""
    turn = STATES[P.AT_BOUNDARY]
    unchanged = RepairAnswered("refused_unchanged", "unchanged", retryable=True)
    once, _ = step(turn, unchanged, LATER)
    assert (once.repair.attempts, once.repair.retry_at) == (1, LATER + RETRY_DELAY)
    twice, _ = step(once, unchanged, LATER)
    assert (twice.repair.attempts, twice.repair.refused_scrapes) == (2, 2)
    assert twice.repair.retry_at is None
    not_due = RepairAnswered("refused_unchanged", "retry_not_due", retryable=True)
    assert step(twice, not_due, LATER)[0] is twice
    lost = RepairAnswered("race_lost", "epoch_moved", race_lost=True)
    raced = turn
    for _ in range(MAX_ATTEMPTS):
        raced, _ = step(raced, lost, LATER)
    assert (raced.repair.attempts, raced.repair.retry_at) == (MAX_ATTEMPTS, None)
    assert (raced.repair.last, raced.repair.detail) == ("race_lost", "epoch_moved")


def test_a_turn_value_cannot_be_changed_in_place() -> None:
    """The turn and what it holds are frozen: only step makes a changed one."""
    turn = STATES[P.WORKING]
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.saw_working = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.repair.attempts = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        turn.watch.epoch = 3  # type: ignore[misc]


# ---------------------------------------------------------------------------- property

_STATUSES = st.sampled_from([*AgentStatus, None])
_EVENTS = st.one_of(
    st.sampled_from(list(EVENTS.values())),
    st.builds(
        StatusPolled,
        st.sampled_from(list(AgentStatus)),
        st.integers(0, 3),
        held=st.booleans(),
        submit_window=st.sampled_from([timedelta(0), WINDOW]),
    ),
    st.builds(StatusSighted, _STATUSES, st.one_of(st.none(), st.integers(0, 3))),
    st.builds(
        RepairAnswered,
        st.sampled_from(["refused_unchanged", "race_lost", "stale_turn"]),
        st.sampled_from(["unchanged", "retry_not_due", "epoch_moved"]),
        retryable=st.booleans(),
        race_lost=st.booleans(),
    ),
)
_STEPS = st.lists(st.tuples(_EVENTS, st.integers(0, 3_000)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.booleans(), _STEPS)
def test_no_sequence_of_events_types_twice_ends_twice_or_mutates(
    restored: bool, steps: list[tuple[TurnEvent, int]]
) -> None:
    """Over any sequence of events (a refused pair changes nothing and is skipped): the prompt
    is asked to be typed at most once and only after its write-ahead record; the turn reaches at
    most one terminal phase and takes nothing after it; Enter is pressed again at most once;
    step never changes the state or the event it is given."""
    state = TurnState.pending(TOKEN)
    if restored:
        state, _ = step(state, TurnRestored(T0), T0)
    typed = resubmitted = ended = 0
    for event, millis in steps:
        now = T0 + timedelta(milliseconds=millis)
        before, event_before = copy.deepcopy(state), copy.deepcopy(event)
        try:
            after, effects = step(state, event, now)
        except IllegalTransitionError:
            assert state == before
            continue
        assert (state, event) == (before, event_before)
        assert not state.phase.terminal, "an ended turn took an event"
        kinds = [type(e) for e in effects]
        if TypePrompt in kinds:
            typed += 1
            assert kinds.index(RecordUncertain) < kinds.index(TypePrompt)
        resubmitted += kinds.count(ResubmitEnter)
        ended += after.phase.terminal
        if ReadBoundary in kinds or ResubmitEnter in kinds:
            assert after.phase.open
            assert not after.restored
        state = after
    assert typed <= 1
    assert resubmitted <= 1
    assert ended <= 1
    assert not (restored and typed)


def test_the_open_turns_record_a_sighting_through_step_and_mark_nothing() -> None:
    """The roster feeds a sighting to the machine only when it moves the watch; the turn it
    keeps is the machine's value, and no sighting marks the member's view as changed."""
    roster = Roster()
    roster.add(
        Session(
            session_id="s1",
            name="m-1",
            profile="p",
            kind="claude",
            role=None,
            owner="lead",
            created_at=T0,
            state=SessionState.BUSY,
        )
    )
    roster.changes.take()
    open_turn(roster, TOKEN, T0)
    assert roster.changes.take() == {"s1"}
    roster.inflight.sight(roster.inflight["s1"], AgentStatus.IDLE, 4, LATER)
    roster.inflight.sight(roster.inflight["s1"], AgentStatus.IDLE, 4, LATER)
    stable = roster.inflight["s1"]
    assert stable.watch.stable
    roster.inflight.sight(stable, AgentStatus.IDLE, 4, LATER)
    assert roster.inflight["s1"] is stable
    roster.inflight.sight(stable, None, None, LATER)
    assert not roster.inflight["s1"].watch.stable
    assert roster.changes.take() == set()
    assert roster.inflight.step(TOKEN, TurnResolved("reply"), LATER) == ()
    assert "s1" not in roster.inflight
    assert roster.changes.take() == {"s1"}
    assert roster.inflight.step(TOKEN, TurnResolved("reply"), LATER) is None  # ended: too late
