"""Facts the bridge hands to ``decide``: a loss it released a member for, a fatal boundary read."""

from __future__ import annotations

from fleetd.health import (
    BoundaryScreen,
    FailTargetWork,
    LiveStatus,
    LossCause,
    MemberState,
    MemberView,
    PublishHealthRecord,
    ResolveIncident,
    SessionState,
    TargetLoss,
)
from tests.unit.health.health_fleet import T0, Run, agent, failed_list, live, member, turn

S, L, M = SessionState, LiveStatus, MemberState

GONE = TargetLoss(
    cause=LossCause.GONE,
    code="agent_not_found",
    at=T0,
    tickets_failed=2,
    failed_tickets=("t1-a", "t2-b"),
)
NEVER = TargetLoss(cause=LossCause.NEVER_READY, code="launch_failed", at=T0, tickets_failed=1)
LIMIT = BoundaryScreen(signature_id="claude.usage_limit", ticket="t3-c")


def released(loss: TargetLoss | None = GONE) -> MemberView:
    return member(state=S.RELEASED, loss=loss)


def test_a_loss_the_bridge_handled_is_reported_once_to_the_owning_lead() -> None:
    """BUSY, then released by the bridge for GONE: GONE with an incident and one record, once."""
    run = Run()
    run.tick(live(agent("m1", L.WORKING)), [member(state=S.BUSY, turn=turn())])
    run.tick(live(), [released()])
    assert (run.member(), run.state.members["s-m1"].cause) == (M.GONE, "agent_not_found")
    [record] = run.effects(PublishHealthRecord)
    assert record.recipient_lead == "lead-a"
    evidence = dict(record.incident.evidence)
    assert (evidence["tickets_failed"], evidence["failed_tickets"]) == ("2", "t1-a,t2-b")
    assert evidence["handled_by"] == "bridge"
    assert not run.effects(FailTargetWork)  # the bridge already failed the work, once
    run.tick(live(), [released()])
    assert run.member() is M.RELEASED
    assert [r.incident.key.state for r in run.effects(ResolveIncident)] == [M.GONE]
    run.tick(live(), [released()])
    assert len(run.all_effects(PublishHealthRecord)) == 1


def test_a_never_ready_loss_first_seen_released_is_still_reported() -> None:
    """A member released before any tick saw it still shows NEVER_READY on the first tick."""
    run = Run()
    run.tick(live(), [released(NEVER)])
    assert (run.member(), run.state.members["s-m1"].cause) == (M.NEVER_READY, "launch_failed")
    assert run.opened() == [M.NEVER_READY]
    assert "failed_tickets" not in dict(run.effects(PublishHealthRecord)[0].incident.evidence)


def test_a_loss_health_found_itself_is_not_reported_again_after_release() -> None:
    """Health's own GONE asks for the release; the loss the release records adds nothing."""
    run = Run()
    run.tick(live(agent("m1")), [member()])
    run.tick(
        live(),
        [member()],
    )
    run.tick(live(targeted={"m1": "agent_not_found"}), [member()])
    assert run.member() is M.GONE
    assert run.effects(FailTargetWork)
    run.tick(live(), [released()])
    assert run.member() is M.RELEASED
    assert len(run.all_effects(PublishHealthRecord)) == 1


def test_a_blind_tick_keeps_the_loss_for_the_next_sighted_tick() -> None:
    """A failed list reports nothing; the loss is reported when the fleet is seen again."""
    run = Run()
    run.tick(live(agent("m1", L.WORKING)), [member(state=S.BUSY, turn=turn())])
    run.tick(failed_list(ping=True), [released()])
    assert not run.effects(PublishHealthRecord)
    run.tick(live(), [released()])
    assert run.member() is M.GONE
    assert len(run.effects(PublishHealthRecord)) == 1


def test_a_fatal_boundary_screen_is_error_on_screen_while_at_the_prompt() -> None:
    """DONE with the boundary's fatal signature: ERROR_ON_SCREEN naming it and the ticket."""
    run = Run()
    done = member(state=S.DONE, boundary_screen=LIMIT)
    run.tick(live(agent("m1", L.IDLE)), [done])
    assert (run.member(), run.state.members["s-m1"].cause) == (
        M.ERROR_ON_SCREEN,
        LIMIT.signature_id,
    )
    [record] = run.effects(PublishHealthRecord)
    assert dict(record.incident.evidence)["ticket"] == "t3-c"
    run.tick(live(agent("m1", L.WORKING)), [done])
    assert run.member() is M.WORKING  # the agent is busy again: the screen no longer holds
    run.tick(live(agent("m1", L.DONE)), [member(state=S.DONE)])
    assert run.member() is M.IDLE


def test_a_boundary_screen_needs_the_agent_in_view() -> None:
    """Without a live agent the member is judged by absence, not by an old screen."""
    run = Run()
    run.tick(live(), [member(state=S.DONE, boundary_screen=LIMIT)])
    assert run.member() is not M.ERROR_ON_SCREEN
