"""Normal and transitional member states (M4 §4.1): classified, never an incident."""

from __future__ import annotations

import pytest

from fleetd.health import (
    FailTargetWork,
    LiveStatus,
    MemberState,
    OpenIncident,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    SessionState,
)
from tests.unit.health.health_fleet import TICK, Run, agent, live, member, turn

S, L, M = SessionState, LiveStatus, MemberState

Case = tuple[SessionState, LiveStatus | None, bool, int, int, MemberState]
CASES: list[tuple[str, SessionState, LiveStatus | None, bool, int, int, MemberState]] = [
    # (id, session state, raw status or None for absent, open turn, queued sends, waiting replies)
    ("spawning-absent", S.SPAWNING, None, False, 0, 0, M.STARTING),
    ("spawning-unknown", S.SPAWNING, L.UNKNOWN, False, 0, 0, M.STARTING),
    ("ready-idle", S.READY, L.IDLE, False, 0, 0, M.IDLE),
    ("done-done", S.DONE, L.DONE, False, 0, 0, M.IDLE),
    ("ready-done", S.READY, L.DONE, False, 0, 0, M.IDLE),
    ("failed-idle-is-not-a-fault", S.FAILED, L.IDLE, False, 0, 0, M.IDLE),
    ("busy-working", S.BUSY, L.WORKING, True, 0, 0, M.WORKING),
    ("busy-first-done-is-not-evidence", S.BUSY, L.DONE, True, 0, 0, M.WORKING),
    ("working-without-turn", S.READY, L.WORKING, False, 0, 0, M.WORKING),
    ("queued-send", S.READY, L.IDLE, False, 1, 0, M.WORK_PENDING),
    ("inbox-record", S.DONE, L.DONE, False, 0, 2, M.WORK_PENDING),
    ("blocked-open-turn", S.BUSY, L.BLOCKED, True, 0, 0, M.BLOCKED_AMBIGUOUS),
    ("unknown-open-turn", S.BUSY, L.UNKNOWN, True, 0, 0, M.BLOCKED_AMBIGUOUS),
    ("blocked-without-turn", S.READY, L.BLOCKED, False, 0, 0, M.IDLE),
    ("released", S.RELEASED, None, False, 0, 0, M.RELEASED),
]


@pytest.mark.parametrize("case", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_normal_state_table(case: Case) -> None:
    """Each session/live combination maps to exactly one normal state and opens nothing."""
    state, raw, open_turn, queued, depth, expected = case
    run = Run()
    view = member(
        state=state,
        turn=turn() if open_turn else None,
        queued_sends=queued,
        uncollected_replies=depth,
    )
    agents = () if raw is None else (agent("m1", raw),)
    decision = run.tick(live(*agents), [view])
    assert run.member() is expected
    assert not run.effects(OpenIncident)
    assert not [e for e in decision.effects if isinstance(e, FailTargetWork)]


def test_undelivered_accepted_turn_is_work_pending() -> None:
    """An accepted but undelivered send on a ready member is pending input, not work."""
    run = Run()
    run.tick(live(agent("m1")), [member(turn=turn(delivered=False))])
    assert run.member() is M.WORK_PENDING


def test_idle_member_stays_idle_for_days_without_incident_or_read() -> None:
    """Idle is a normal mode: it never opens an incident, pages or reads a pane."""
    run = Run()
    for _ in range(20):
        run.tick(live(agent("m1")), [member()], advance=TICK * 200)
        assert run.member() is M.IDLE
        assert not run.effects(OpenIncident)
        assert run.reads() == 0


def test_blocked_opens_an_ambiguous_incident_only_once_sustained() -> None:
    """BLOCKED is normal for one snapshot; the ambiguous incident opens on the second."""
    run = Run()
    view = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    assert run.member() is M.BLOCKED_AMBIGUOUS
    assert not run.effects(OpenIncident)
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    assert run.opened() == [M.BLOCKED_AMBIGUOUS]
    assert run.effects(OpenIncident)[0].incident.certainty == "ambiguous"


def test_blocked_stays_ambiguous_and_never_acts() -> None:
    """Evidence limit: BLOCKED never says which input is needed, so it never escalates or acts."""
    run = Run()
    view = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    for _ in range(60):
        run.tick(live(agent("m1", L.BLOCKED)), [view], probes=run.answers(digest="d"))
        assert run.member() is M.BLOCKED_AMBIGUOUS
    assert not run.all_effects(FailTargetWork)
    assert not run.all_effects(RequestLostBoundaryRepair)
    assert len(run.all_effects(OpenIncident)) == 1
    detection_reads = run.all_effects(RequestPaneProbe)
    assert len(detection_reads) == 1
    assert detection_reads[0].source == "detection"
    assert detection_reads[0].reason == "sustained_blocked"


def test_blocked_clears_when_work_resumes() -> None:
    """The ambiguous incident resolves as soon as herdr sees work again."""
    run = Run()
    view = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    decision = run.tick(live(agent("m1", L.WORKING)), [view])
    assert run.member() is M.WORKING
    assert [type(e).__name__ for e in decision.effects] == ["RecordTransition", "ResolveIncident"]
