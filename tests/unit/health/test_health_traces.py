"""The two real traces behind M4 (§2.1), replayed against ``decide``."""

from __future__ import annotations

from datetime import timedelta

from fleetd.health import (
    FailCause,
    FailTargetWork,
    LiveStatus,
    MemberState,
    OpenIncident,
    PublishHealthRecord,
    RequestLostBoundaryRepair,
    SessionState,
)
from tests.unit.health.health_fleet import T0, TICK, Run, agent, live, member, turn

S, L, M = SessionState, LiveStatus, MemberState


def test_trace_1_busy_with_raw_done_is_lost_after_exactly_two_snapshots() -> None:
    """profile=opus role=architect state=busy liveStatus=done: TURN_BOUNDARY_LOST on snapshot 2.

    The session moved DONE -> BUSY for turn 2 while herdr kept saying DONE. One snapshot is
    not evidence; the second one is, long before any 18-minute stall timer.
    """
    run = Run()
    architect = member(
        "architect",
        profile="opus",
        role="architect",
        state=S.BUSY,
        turn=turn("tok-turn-2", 2, at=T0),
        pending_tasks=1,
    )
    herdr = live(agent("architect", L.DONE, seq=41))

    run.tick(herdr, [architect])
    assert run.member("s-architect") is M.WORKING
    assert not run.effects(OpenIncident)
    assert not run.effects(RequestLostBoundaryRepair)

    run.tick(herdr, [architect])
    assert run.member("s-architect") is M.TURN_BOUNDARY_LOST
    [opened] = run.effects(OpenIncident)
    assert opened.incident.key.state is M.TURN_BOUNDARY_LOST
    assert run.effects(RequestLostBoundaryRepair) == [
        RequestLostBoundaryRepair(target="architect", session_id="s-architect", token="tok-turn-2")
    ]
    assert [p.recipient_lead for p in run.effects(PublishHealthRecord)] == ["lead-a"]
    assert run.now - T0 == 2 * TICK

    for _ in range(36):  # eighteen more minutes: still the same one incident, no replay
        run.tick(herdr, [architect])
    assert len(run.all_effects(OpenIncident)) == 1
    assert len(run.all_effects(RequestLostBoundaryRepair)) == 1
    assert not run.all_effects(FailTargetWork)


def test_trace_2_surviving_ticket_after_teardown_is_delegation_orphaned() -> None:
    """Two async sends one second apart, the pane stopped, one ticket left pending.

    After the reconciliation grace the surviving ticket is DELEGATION_ORPHANED, and the
    monitor retries only the idempotent target-wide failure, once; it never recreates the task.
    """
    run = Run()
    worker = member("worker", state=S.BUSY, turn=turn("tok-a", 1), pending_tasks=2)
    run.tick(live(agent("worker", L.WORKING)), [worker])

    stopped_at = run.now + timedelta(seconds=1)
    torn_down = member("worker", state=S.RELEASED, since=stopped_at, pending_tasks=1)
    run.tick(live(), [torn_down], advance=timedelta(seconds=1))
    assert run.member("s-worker") is M.RELEASED

    run.tick(live(), [torn_down], advance=timedelta(seconds=60))
    assert run.member("s-worker") is M.DELEGATION_ORPHANED
    assert run.effects(FailTargetWork) == [
        FailTargetWork(target="worker", session_id="s-worker", cause=FailCause.DELEGATION_ORPHANED)
    ]
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.severity, opened.incident.certainty) == ("critical", "certain")
    assert ("pending_tasks", "1") in opened.incident.evidence

    for _ in range(10):
        run.tick(live(), [torn_down])
    assert len(run.all_effects(FailTargetWork)) == 1
