"""Member fault and quality states (M4 §4.2) and the evidence limits of §4.5."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from fleetd.health import (
    CountMute,
    FailCause,
    FailTargetWork,
    HealthSettings,
    LiveStatus,
    LiveView,
    MemberState,
    MemberView,
    OpenIncident,
    ProbeResult,
    ProbeSource,
    PublishHealthRecord,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    SessionState,
    UpdateIncident,
    WorktreeFacts,
)
from fleetd.health.settings import TEARDOWN_GRACE
from tests.unit.health.health_fleet import T0, TICK, Run, agent, inbox, live, member, probe, turn

S, L, M = SessionState, LiveStatus, MemberState


# --- NEVER_READY -------------------------------------------------------------------------------


def spawning(**fields: Any) -> MemberView:
    return member(state=S.SPAWNING, presence=False, **fields)


def test_never_ready_after_readiness_grace_with_a_waiting_delivery() -> None:
    """SPAWNING, no MCP presence and a waiting delivery past the grace is NEVER_READY, once."""
    run = Run(settings=HealthSettings(readiness_grace=timedelta(seconds=120)))
    view = spawning(turn=turn(delivered=False))
    run.tick(live(agent("m1", L.UNKNOWN)), [view], advance=timedelta(seconds=119))
    assert run.member() is M.STARTING
    run.tick(live(agent("m1", L.UNKNOWN)), [view], advance=timedelta(seconds=1))
    assert run.member() is M.NEVER_READY
    assert run.effects(FailTargetWork) == [
        FailTargetWork(target="m1", session_id="s-m1", cause=FailCause.NEVER_READY)
    ]
    assert run.opened() == [M.NEVER_READY]
    final = run.effects(RequestPaneProbe)
    assert [(p.source, p.reason) for p in final] == [("visible", "final_evidence")]
    run.tick(live(agent("m1", L.UNKNOWN)), [spawning()])
    assert run.member() is M.NEVER_READY  # sticky even after the failed send left the queue
    assert not run.effects(FailTargetWork)
    assert not run.effects(RequestPaneProbe)


def test_queued_send_counts_as_waiting_delivery() -> None:
    """A queued send on a spawning member is an accepted delivery that waits."""
    run = Run()
    run.tick(live(), [spawning(queued_sends=1)], advance=timedelta(seconds=300))
    assert run.member() is M.NEVER_READY


def test_slow_start_without_delivery_is_not_never_ready() -> None:
    """No accepted delivery: a slow start stays STARTING and nothing is stopped."""
    run = Run()
    run.tick(live(), [spawning()], advance=timedelta(hours=2))
    assert run.member() is M.STARTING
    assert not run.effects(FailTargetWork)


def test_readiness_grace_cannot_be_configured_below_its_floor() -> None:
    """A zero readiness grace still waits the compiled ten seconds."""
    run = Run(settings=HealthSettings(readiness_grace=timedelta(0)))
    run.tick(live(), [spawning(turn=turn(delivered=False))], advance=timedelta(seconds=9))
    assert run.member() is M.STARTING
    run.tick(live(), [spawning(turn=turn(delivered=False))], advance=timedelta(seconds=1))
    assert run.member() is M.NEVER_READY


# --- GONE --------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["agent_not_found", "pane_not_found", "workspace_not_found"])
def test_targeted_not_found_with_healthy_list_is_gone(code: str) -> None:
    """Any ``*_not_found`` on a per-target call while the list works is certain target loss."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.WORKING)), [busy])
    run.tick(live(targeted={"m1": code}), [busy])
    assert run.member() is M.GONE
    assert run.effects(FailTargetWork) == [
        FailTargetWork(target="m1", session_id="s-m1", cause=FailCause.GONE)
    ]
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.severity, opened.incident.certainty) == ("critical", "certain")
    assert opened.incident.key.cause == code


def test_pane_read_not_found_is_gone() -> None:
    """A pane read that answers ``pane_not_found`` is the same definitive loss."""
    run = Run()
    failed = probe("m1", ProbeSource.VISIBLE, ok=False, error_code="pane_not_found")
    run.tick(live(), [member()], probes=[failed])
    assert run.member() is M.GONE


def test_other_targeted_errors_are_not_target_loss() -> None:
    """A timeout or busy answer proves nothing about the target."""
    run = Run()
    run.tick(live(targeted={"m1": "timeout"}), [member()])
    assert run.member() is not M.GONE


def test_absence_alone_asks_for_a_lookup_and_never_claims_gone() -> None:
    """Missing from the list only triggers a per-target lookup, however long it lasts."""
    run = Run()
    for _ in range(10):
        run.tick(live(), [member()])
        assert run.member() is M.IDLE
        assert run.effects(RequestTargetLookup) == [RequestTargetLookup(target="m1")]
    assert not run.all_effects(OpenIncident)


def test_a_terminal_now_named_for_another_agent_is_not_the_member_s() -> None:
    """herdr restarted and numbered its terminals from the start: the member's old terminal id
    now belongs to another member. The member is absent (a lookup by its own name settles it),
    not idle in someone else's terminal."""
    run = Run()
    run.tick(live(agent("m2", terminal="term_m1")), [member()])
    assert run.effects(RequestTargetLookup) == [RequestTargetLookup(target="m1")]
    run.tick(live(agent("m2", terminal="term_m1"), targeted={"m1": "agent_not_found"}), [member()])
    assert run.member() is M.GONE


def test_gone_is_sticky_and_stops_lookups() -> None:
    """Once gone, the member stays GONE without new errors, lookups or failure calls."""
    run = Run()
    run.tick(live(targeted={"m1": "agent_not_found"}), [member()])
    run.tick(live(), [member()])
    assert run.member() is M.GONE
    assert not run.effects(RequestTargetLookup)
    assert not run.effects(FailTargetWork)
    assert len(run.all_effects(FailTargetWork)) == 1


def test_spawning_member_absent_from_list_is_not_looked_up() -> None:
    """herdr may not list a spawning agent yet; that is not absence."""
    run = Run()
    run.tick(live(), [spawning()])
    assert not run.effects(RequestTargetLookup)


# --- TURN_BOUNDARY_LOST ------------------------------------------------------------------------


def busy(token: str = "tok-2", **fields: Any) -> MemberView:
    return member(state=S.BUSY, turn=turn(token, 2), **fields)


@pytest.mark.parametrize(
    ("first", "second"),
    [(L.DONE, L.DONE), (L.IDLE, L.IDLE), (L.DONE, L.IDLE), (L.IDLE, L.DONE)],
)
def test_busy_at_prompt_twice_is_turn_boundary_lost(first: LiveStatus, second: LiveStatus) -> None:
    """done and idle both mean "at its prompt"; two snapshots of either make the loss."""
    run = Run()
    run.tick(live(agent("m1", first)), [busy()])
    assert run.member() is M.WORKING
    run.tick(live(agent("m1", second)), [busy()])
    assert run.member() is M.TURN_BOUNDARY_LOST
    assert run.effects(RequestLostBoundaryRepair) == [
        RequestLostBoundaryRepair(target="m1", session_id="s-m1", token="tok-2")
    ]
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.certainty, opened.incident.severity) == ("strong", "warning")


@pytest.mark.parametrize(
    "between",
    [
        pytest.param(lambda: (live(agent("m1", L.WORKING)), busy()), id="working"),
        pytest.param(lambda: (live(agent("m1", L.BLOCKED)), busy()), id="blocked"),
        pytest.param(lambda: (live(agent("m1", L.UNKNOWN)), busy()), id="unknown"),
        pytest.param(lambda: (live(), busy()), id="missing-agent"),
        pytest.param(lambda: (live(agent("m1", L.DONE)), busy("tok-3")), id="new-delivery"),
        pytest.param(lambda: (live(agent("m1", L.DONE, seq=7)), busy()), id="seq-moved"),
        pytest.param(
            lambda: (live(agent("m1", L.DONE)), busy(last_reply_at=T0 + TICK)), id="reply"
        ),
        pytest.param(lambda: (live(agent("m1", L.DONE)), busy(mute_events=1)), id="mute"),
    ],
)
def test_conflicting_observation_restarts_the_two_snapshot_count(
    between: Callable[[], tuple[LiveView, MemberView]],
) -> None:
    """Any conflicting observation after the first prompt snapshot prevents the loss."""
    run = Run()
    run.tick(live(agent("m1", L.DONE)), [busy()])
    view_live, view = between()
    run.tick(view_live, [view])
    assert run.member() is not M.TURN_BOUNDARY_LOST


def test_after_a_working_snapshot_two_new_prompt_snapshots_are_needed() -> None:
    """The count starts again from one after a conflicting WORKING."""
    run = Run()
    for status in (L.DONE, L.WORKING, L.DONE):
        run.tick(live(agent("m1", status)), [busy()])
        assert run.member() is M.WORKING
    run.tick(live(agent("m1", L.DONE)), [busy()])
    assert run.member() is M.TURN_BOUNDARY_LOST


def test_closed_waiter_is_not_a_lost_boundary() -> None:
    """The same accepted task must still be open."""
    run = Run()
    view = member(state=S.BUSY, turn=turn(waiter_open=False))
    for _ in range(3):
        run.tick(live(agent("m1", L.DONE)), [view])
    assert run.member() is M.WORKING


def test_repair_is_requested_once_per_token() -> None:
    """One repair request per TurnToken; a later token gets its own."""
    run = Run()
    for _ in range(5):
        run.tick(live(agent("m1", L.DONE)), [busy()])
    assert len(run.all_effects(RequestLostBoundaryRepair)) == 1
    run.tick(live(agent("m1", L.DONE)), [busy("tok-9")])
    run.tick(live(agent("m1", L.DONE)), [busy("tok-9")])
    tokens = [e.token for e in run.all_effects(RequestLostBoundaryRepair)]
    assert tokens == ["tok-2", "tok-9"]


# --- ERROR_ON_SCREEN ---------------------------------------------------------------------------


def _blocked_then_read(signature: str | None) -> Run:
    run = Run()
    view = busy()
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    run.tick(live(agent("m1", L.BLOCKED)), [view])
    [read] = run.effects(RequestPaneProbe)
    assert read.source is ProbeSource.DETECTION
    run.tick(
        live(agent("m1", L.BLOCKED)),
        [view],
        probes=run.answers(digest="d1", fatal_signature_id=signature),
    )
    return run


def test_tested_fatal_signature_is_error_on_screen() -> None:
    """A detection read that matched a tested signature makes ERROR_ON_SCREEN for that id."""
    run = _blocked_then_read("claude.api_error_529")
    assert run.member() is M.ERROR_ON_SCREEN
    [opened] = run.effects(OpenIncident)
    assert opened.incident.key.cause == "claude.api_error_529"
    assert opened.incident.certainty == "certain"


def test_screen_without_signature_is_not_an_error() -> None:
    """Evidence limit: arbitrary pane text (say, the word Exception) is never a fault by itself."""
    run = _blocked_then_read(None)
    assert run.member() is M.BLOCKED_AMBIGUOUS


def test_error_on_screen_clears_when_work_resumes() -> None:
    """A signature is void once herdr sees the member working again."""
    run = _blocked_then_read("codex.usage_limit")
    run.tick(live(agent("m1", L.WORKING)), [busy()])
    assert run.member() is M.WORKING
    assert run.effects(ResolveIncident)


# --- STALL_SUSPECTED ---------------------------------------------------------------------------


def _working_reads(digests: list[str], *, turns: int = 40) -> Run:
    """Run a working turn, answering each progress read with the next digest."""
    run = Run()
    view = busy()
    answers = iter(digests)
    pending: tuple[ProbeResult, ...] = ()
    for _ in range(turns):
        run.tick(live(agent("m1", L.WORKING)), [view], probes=pending)
        reads = run.effects(RequestPaneProbe)
        pending = run.answers(digest=next(answers, digests[-1])) if reads else ()
    return run


def test_unchanged_progress_digests_are_stall_suspected() -> None:
    """Two equal progress digests on an old working turn make STALL_SUSPECTED."""
    run = _working_reads(["same"] * 10)
    assert run.member() is M.STALL_SUSPECTED
    [opened] = run.all_effects(OpenIncident)
    assert (opened.incident.certainty, opened.incident.severity) == ("suspected", "warning")
    reads = run.all_effects(RequestPaneProbe)
    assert {r.source for r in reads} == {ProbeSource.RECENT_UNWRAPPED}


def test_changing_digests_are_progress() -> None:
    """Changing digests mean progress: still WORKING."""
    run = _working_reads([f"d{i}" for i in range(20)])
    assert run.member() is M.WORKING
    assert not run.all_effects(OpenIncident)


def test_long_valid_call_and_hung_call_are_both_only_stall_suspected() -> None:
    """Evidence limit: an unchanged pane on a long turn is at most STALL_SUSPECTED, for hours."""
    run = _working_reads(["same"] * 400, turns=400)
    assert run.member() is M.STALL_SUSPECTED
    assert not run.all_effects(FailTargetWork)
    assert not run.all_effects(RequestLostBoundaryRepair)
    assert [e.incident.state for e in run.all_effects(OpenIncident)] == [M.STALL_SUSPECTED]
    assert len(run.all_effects(PublishHealthRecord)) == 1


def test_stall_resolves_when_the_digest_moves() -> None:
    """A later changed digest resolves the stall suspicion."""
    run = _working_reads(["same"] * 3 + [f"d{i}" for i in range(20)])
    assert run.member() is M.WORKING
    assert [e.reason for e in run.all_effects(ResolveIncident)] == ["cleared"]


# --- MUTE --------------------------------------------------------------------------------------


def test_single_missing_reply_is_a_metric_not_an_incident() -> None:
    """Evidence limit: one completion fallback counts MUTE; it claims no MCP failure."""
    run = Run()
    run.tick(live(agent("m1", L.DONE)), [member(state=S.DONE, mute_events=1)])
    assert run.effects(CountMute) == [
        CountMute(target="m1", session_id="s-m1", profile="sonnet", count=1)
    ]
    assert not run.effects(OpenIncident)
    assert run.member() is M.IDLE


def test_three_mutes_within_an_hour_open_a_mute_incident() -> None:
    """The compiled rate (three within an hour) opens one MUTE incident for the target."""
    run = Run()
    for _ in range(2):
        run.tick(live(agent("m1")), [member(mute_events=1)], advance=timedelta(minutes=20))
        assert not run.effects(OpenIncident)
    run.tick(live(agent("m1")), [member(mute_events=1)], advance=timedelta(minutes=20))
    assert sorted(run.opened()) == ["MUTE", "MUTE"]  # the member and its profile
    scopes = sorted(e.incident.scope for e in run.effects(OpenIncident))
    assert scopes == ["member", "profile"]


def test_spread_out_mutes_stay_metrics() -> None:
    """Mutes further apart than the window never reach the rate."""
    run = Run()
    for _ in range(6):
        run.tick(live(agent("m1")), [member(mute_events=1)], advance=timedelta(minutes=31))
    assert not run.all_effects(OpenIncident)


def test_mute_with_another_fault_opens_an_incident() -> None:
    """A mute that coincides with another open fault becomes an incident at once."""
    run = Run()
    muted = member(mute_events=1, uncollected_replies=1)
    run.tick(live(agent("m1")), [muted], inboxes=[inbox("lead-a", capped=True)])
    assert sorted(run.opened()) == ["MUTE", "REPLY_STRANDED"]


def test_mute_incident_resolves_when_the_window_empties() -> None:
    """The MUTE incident closes once the rate falls back under the threshold."""
    run = Run()
    run.tick(live(agent("m1")), [member(mute_events=3)])
    assert "MUTE" in run.opened()
    run.tick(live(agent("m1")), [member()], advance=timedelta(hours=1))
    assert {e.incident.state for e in run.effects(ResolveIncident)} == {"MUTE"}


def test_a_released_member_s_mute_incident_retires_with_it() -> None:
    """Release ends a member's turns: its MUTE overlay closes as retired, not an hour later,
    while its profile's rate keeps the events it counted."""
    run = Run()
    run.tick(live(agent("m1")), [member(mute_events=3)])
    assert sorted(run.opened()) == ["MUTE", "MUTE"]  # the member and its profile
    run.tick(live(), [member(state=S.RELEASED)])
    [resolved] = run.effects(ResolveIncident)
    assert (resolved.incident.scope, resolved.incident.state) == ("member", "MUTE")
    assert resolved.reason == "subject_retired"
    assert run.state.members["s-m1"].mute_incident is None
    assert {i.key.scope for i in run.state.open_incidents()} == {"profile"}
    run.tick(live(), [member(state=S.RELEASED, mute_events=1)])
    assert not run.effects(OpenIncident)
    assert not run.effects(ResolveIncident)


# --- REPLY_STRANDED ----------------------------------------------------------------------------


def test_undrained_inbox_after_push_cap_is_reply_stranded_without_a_cause() -> None:
    """Evidence limit: a stranded reply says collection failed, never why the lead did not."""
    run = Run()
    done = member(state=S.DONE, uncollected_replies=2, oldest_uncollected_at=T0)
    run.tick(live(agent("m1", L.DONE)), [done], inboxes=[inbox("lead-a", capped=True)])
    assert run.member() is M.REPLY_STRANDED
    [opened] = run.effects(OpenIncident)
    assert opened.incident.key.cause == "push_cap_reached"
    assert all("lead" not in name for name, _ in opened.incident.evidence)
    evidence = dict(opened.incident.evidence)
    assert (evidence["uncollected_replies"], evidence["oldest_uncollected_seconds"]) == ("2", "30")


def test_a_waiting_reply_is_stranded_only_by_its_owning_lead_s_push_cap() -> None:
    """A member's reply waits in its owner's inbox: another lead's capped push strands nothing."""
    run = Run()
    waiting = member(state=S.DONE, uncollected_replies=1)
    run.tick(live(agent("m1", L.DONE)), [waiting], inboxes=[inbox("lead-a")])
    assert run.member() is M.WORK_PENDING
    capped_elsewhere = [inbox("lead-a"), inbox("lead-b", capped=True)]
    run.tick(live(agent("m1", L.DONE)), [waiting], inboxes=capped_elsewhere)
    assert run.member() is M.WORK_PENDING
    run.tick(live(agent("m1", L.DONE)), [waiting], inboxes=[inbox("lead-a", capped=True)])
    assert run.member() is M.REPLY_STRANDED


def test_inbox_below_the_push_cap_is_only_pending() -> None:
    """Push is still trying: the member is WORK_PENDING, not stranded."""
    run = Run()
    run.tick(live(agent("m1")), [member(uncollected_replies=1)], inboxes=[inbox("lead-a")])
    assert run.member() is M.WORK_PENDING


def test_orphan_inbox_key_is_stranded_at_inbox_scope() -> None:
    """A stranded key that belongs to no member or lead is an inbox-scope incident."""
    run = Run()
    run.tick(live(), [], inboxes=[inbox("old-member", capped=True)])
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.scope, opened.incident.subject) == ("inbox", "old-member")
    [told] = run.effects(PublishHealthRecord)
    assert (told.recipient_lead, told.reason) == ("lead-a", "peer_no_owner")
    run.tick(live(), [], inboxes=[])
    assert run.effects(ResolveIncident)[0].reason == "cleared"


# --- DELEGATION_ORPHANED -----------------------------------------------------------------------


def test_pending_tasks_after_teardown_grace_are_orphaned_and_retried_once() -> None:
    """Surviving tasks after the grace are DELEGATION_ORPHANED; the failure op runs once more."""
    run = Run()
    released = member(state=S.RELEASED, pending_tasks=1, since=T0)
    run.tick(live(), [released], advance=TEARDOWN_GRACE - TICK)
    assert run.member() is M.RELEASED
    run.tick(live(), [released])
    assert run.member() is M.DELEGATION_ORPHANED
    assert run.effects(FailTargetWork) == [
        FailTargetWork(target="m1", session_id="s-m1", cause=FailCause.DELEGATION_ORPHANED)
    ]
    run.tick(live(), [released])
    assert not run.effects(FailTargetWork)
    run.tick(live(), [member(state=S.RELEASED, since=T0)])
    assert run.member() is M.RELEASED
    run.tick(live(), [released])
    assert run.member() is M.DELEGATION_ORPHANED
    assert len(run.all_effects(FailTargetWork)) == 1  # at most one retry per session
    generations = [e.incident.generation for e in run.all_effects(OpenIncident)]
    assert generations == [1, 2]


def test_failed_member_with_pending_tasks_is_orphaned() -> None:
    """A FAILED session whose tasks survive the grace is the same invariant failure."""
    run = Run()
    view = member(state=S.FAILED, pending_tasks=2)
    run.tick(live(agent("m1")), [view], advance=TEARDOWN_GRACE)
    assert run.member() is M.DELEGATION_ORPHANED


def test_a_broken_teardown_part_is_orphaned_under_its_name_and_retried_once() -> None:
    """A released member whose teardown left a part of §8.5 broken is DELEGATION_ORPHANED after
    the grace, its cause the first broken part, every part in the evidence; one retry only."""
    run = Run()
    broken = ("turn_after_teardown", "send_gate_open_after_teardown")
    released = member(state=S.RELEASED, since=T0, teardown_violations=broken)
    run.tick(live(), [released], advance=TEARDOWN_GRACE - TICK)
    assert run.member() is M.RELEASED
    run.tick(live(), [released])
    assert run.member() is M.DELEGATION_ORPHANED
    [opened] = run.effects(OpenIncident)
    assert opened.incident.key.cause == "turn_after_teardown"
    evidence = dict(opened.incident.evidence)
    assert evidence["teardown_invariants"] == ",".join(broken)
    assert "pending_tasks" not in evidence
    assert run.effects(FailTargetWork) == [
        FailTargetWork(target="m1", session_id="s-m1", cause=FailCause.DELEGATION_ORPHANED)
    ]
    run.tick(live(), [released])
    assert not run.effects(FailTargetWork)
    run.tick(live(), [member(state=S.RELEASED, since=T0)])  # the invariant holds again
    assert run.member() is M.RELEASED
    assert [r.incident.id for r in run.effects(ResolveIncident)] == [opened.incident.id]


def test_pending_tasks_name_the_cause_before_any_other_broken_part() -> None:
    """Tasks still pending are the cause of record; the other parts stay in the evidence."""
    run = Run()
    view = member(
        state=S.RELEASED,
        pending_tasks=1,
        teardown_violations=("waiter_after_teardown", "pending_after_teardown"),
    )
    run.tick(live(), [view], advance=TEARDOWN_GRACE)
    [opened] = run.effects(OpenIncident)
    assert opened.incident.key.cause == "pending_after_teardown"
    assert dict(opened.incident.evidence)["pending_tasks"] == "1"


def test_a_steady_released_member_is_looked_at_again_when_the_grace_ends() -> None:
    """The timer rule wakes a quiet released member whose teardown broke, exactly at the grace."""
    run = Run()
    view = member(state=S.RELEASED, teardown_violations=("queue_after_teardown",))
    for _ in range(3):
        run.tick(live(), [view], advance=TEARDOWN_GRACE / 4)
    assert run.member() is M.RELEASED
    run.tick(live(), [view], advance=TEARDOWN_GRACE / 4)
    assert run.member() is M.DELEGATION_ORPHANED


# --- WORK_PRODUCT_AT_RISK ----------------------------------------------------------------------


def _ahead(commits: int | None, **fields: Any) -> MemberView:
    return member(state=S.DONE, worktree=WorktreeFacts(commits_ahead=commits), **fields)


def test_branch_ahead_after_long_idle_is_only_a_warning() -> None:
    """Evidence limit: commits ahead of base are a warning, never proof of lost work."""
    run = Run()
    run.tick(live(agent("m1", L.DONE)), [_ahead(2)], advance=timedelta(seconds=899))
    assert run.member() is M.IDLE
    run.tick(live(agent("m1", L.DONE)), [_ahead(2)], advance=timedelta(seconds=1))
    assert run.member() is M.WORK_PRODUCT_AT_RISK
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.severity, opened.incident.certainty) == ("warning", "suspected")
    assert not run.effects(FailTargetWork)


@pytest.mark.parametrize("commits", [None, 0])
def test_no_commits_ahead_is_not_at_risk(commits: int | None) -> None:
    """Unknown or zero commits ahead never warn."""
    run = Run()
    run.tick(live(agent("m1", L.DONE)), [_ahead(commits)], advance=timedelta(days=2))
    assert run.member() is M.IDLE


def test_preserved_released_worktree_ahead_is_at_risk() -> None:
    """A released member whose preserved worktree is ahead still warns."""
    run = Run()
    view = member(state=S.RELEASED, worktree=WorktreeFacts(commits_ahead=1, preserved=True))
    run.tick(live(), [view], advance=timedelta(hours=1))
    assert run.member() is M.WORK_PRODUCT_AT_RISK


def test_committed_work_flags_a_stranded_reply_incident() -> None:
    """Committed work with REPLY_STRANDED marks that incident instead of opening another."""
    run = Run()
    boxes = [inbox("lead-a", capped=True)]
    run.tick(live(agent("m1", L.DONE)), [_ahead(None, uncollected_replies=1)], inboxes=boxes)
    [opened] = run.effects(OpenIncident)
    assert not opened.incident.committed_work_at_risk
    run.tick(live(agent("m1", L.DONE)), [_ahead(3, uncollected_replies=1)], inboxes=boxes)
    [updated] = run.effects(UpdateIncident)
    assert updated.incident.committed_work_at_risk
    assert updated.incident.id == opened.incident.id
    assert not run.effects(OpenIncident)
