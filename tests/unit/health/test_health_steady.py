"""The steady-state shortcut: reused evidence is exactly what a full evaluation would give."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fleetd.health import (
    FleetSnapshot,
    HealthSettings,
    HealthState,
    InboxFailureView,
    InboxView,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberState,
    MemberView,
    OpenTurn,
    ProbeResult,
    ProbeSource,
    RequestPaneProbe,
    SessionState,
    WorktreeFacts,
    decide,
)
from fleetd.health.evidence import MemberEvidence
from fleetd.health.incidents import IncidentKey
from fleetd.health.states import Scope
from tests.unit.health.health_fleet import LEAD, T0, TICK, Run, agent, live, member, turn

S, L, M = SessionState, LiveStatus, MemberState


def undecodable(*, occurrences: int) -> InboxFailureView:
    return InboxFailureView(
        key="lead-a",
        reason="malformed_json",
        message_id="m-1",
        unsettled=True,
        occurrences=occurrences,
        last_seen_at=T0,
    )


def test_unchanged_member_keeps_the_very_same_evidence_object() -> None:
    """Nothing changed and no timer is due: the prior evidence is returned as is."""
    run = Run()
    view = member()
    for _ in range(3):
        run.tick(live(agent("m1")), [view])
    before = run.state.members["s-m1"]
    run.tick(live(agent("m1")), [replace(view)])
    assert run.state.members["s-m1"] is before


@pytest.mark.parametrize(
    ("view", "status", "due", "expected"),
    [
        pytest.param(
            member(state=S.SPAWNING, presence=False, turn=turn(delivered=False)),
            L.UNKNOWN,
            timedelta(seconds=120),
            M.NEVER_READY,
            id="readiness-grace",
        ),
        pytest.param(
            member(state=S.FAILED, pending_tasks=1),
            L.IDLE,
            timedelta(seconds=60),
            M.DELEGATION_ORPHANED,
            id="teardown-grace",
        ),
        pytest.param(
            member(state=S.DONE, worktree=WorktreeFacts(commits_ahead=1)),
            L.DONE,
            timedelta(seconds=900),
            M.WORK_PRODUCT_AT_RISK,
            id="long-idle",
        ),
    ],
)
def test_timer_rules_fire_on_time_through_the_shortcut(
    view: MemberView, status: LiveStatus, due: timedelta, expected: MemberState
) -> None:
    """A steady member still changes exactly when a timer rule comes due."""
    run = Run()
    step = timedelta(seconds=5)
    while run.now + step < T0 + due:
        run.tick(live(agent("m1", status)), [view], advance=step)
        assert run.member() is not expected
    run.tick(live(agent("m1", status)), [view], advance=T0 + due - run.now)
    assert run.member() is expected


def test_working_turn_becomes_eligible_for_a_read_at_the_suspect_age() -> None:
    """The first progress read comes due through the shortcut, at the configured age."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn(at=T0))
    while run.now < T0 + timedelta(seconds=590):
        run.tick(live(agent("m1", L.WORKING)), [busy], advance=timedelta(seconds=10))
        assert run.reads() == 0
    run.tick(live(agent("m1", L.WORKING)), [busy], advance=timedelta(seconds=10))
    assert run.reads() == 1


def test_a_settings_change_re_evaluates_steady_members() -> None:
    """A hot reload that lowers the suspect age takes effect on the very next tick."""
    run = Run(settings=HealthSettings(working_suspect_after=timedelta(hours=2)))
    busy = member(state=S.BUSY, turn=turn(at=T0))
    for _ in range(20):
        run.tick(live(agent("m1", L.WORKING)), [busy])
    assert run.reads() == 0
    run.tick(live(agent("m1", L.WORKING)), [busy], settings=HealthSettings())
    assert run.reads() == 1


def test_member_without_terminal_is_matched_by_name_on_steady_ticks() -> None:
    """Before the bridge knows the terminal id, the agent name identifies the member."""
    run = Run()
    view = member(terminal=None)
    for status in (L.IDLE, L.IDLE, L.IDLE, L.WORKING):
        run.tick(live(agent("m1", status, terminal="term_other")), [view])
    assert run.member() is M.WORKING


def test_ambiguous_live_agents_resolve_to_the_smallest_pane_whatever_the_order() -> None:
    """Two agents claiming one terminal or one name: the smallest pane id wins in any order."""
    a = LiveAgent(name="m1", pane_id="w1:p1", terminal_id="term_m1", status=L.WORKING)
    b = LiveAgent(name="m1", pane_id="w1:p9", terminal_id="term_m1", status=L.IDLE)
    for agents in ((a, b), (b, a)):
        for view in (member(), member(terminal=None)):
            run = Run()
            run.tick(LiveView(list_ok=True, agents=agents), [view])
            assert run.member() is M.WORKING


def test_lead_without_terminal_and_unnamed_agents_are_handled() -> None:
    """A lead known only by name is matched by name; nameless panes never match anything."""
    nameless = LiveAgent(name=None, pane_id="w1:p5", terminal_id="term_x", status=L.IDLE)
    lead_by_name = replace(LEAD, terminal_id=None)
    run = Run()
    run.tick(
        LiveView(list_ok=True, agents=(nameless, agent("lead-a", terminal="term_new"))),
        [member(terminal=None)],
        leads=[lead_by_name],
    )
    assert run.lead() == "LEAD_IDLE"
    assert run.member() is M.IDLE  # absent, not matched to the nameless pane


def test_evidence_pointing_at_a_missing_incident_is_tolerated() -> None:
    """A prior that lost an incident record (say, a journal restore) resolves nothing."""
    key = IncidentKey(scope=Scope.MEMBER, subject="s-m1", state=M.GONE, cause="agent_not_found")
    prior = HealthState(
        members={
            "s-m1": MemberEvidence(
                session_id="s-m1",
                target="m1",
                profile="sonnet",
                state=M.GONE,
                cause="agent_not_found",
                since=T0,
                incident=key,
            )
        }
    )
    run = Run(state=prior)
    decision = run.tick(live(agent("m1")), [member(state=S.RELEASED)])
    assert run.member() is M.RELEASED
    kinds = [type(e).__name__ for e in decision.effects if getattr(e, "scope", "") != "lead"]
    assert kinds == ["RecordTransition"]


def test_failed_read_with_another_error_keeps_evidence() -> None:
    """A read that failed with a non-loss error (timeout) is neither loss nor evidence."""
    run = Run()
    failed = ProbeResult(target="m1", source=ProbeSource.VISIBLE, ok=False, error_code="timeout")
    run.tick(live(agent("m1")), [member()], probes=[failed])
    assert run.member() is M.IDLE


@pytest.mark.parametrize(
    "build",
    [
        lambda: member(queued_sends=-1),
        lambda: LiveView(list_ok=False, agents=(agent("m1"),)),
        lambda: ProbeResult(target="m1", source=ProbeSource.VISIBLE, ok=True, error_code="x"),
        lambda: ProbeResult(target="m1", source=ProbeSource.VISIBLE, ok=False, digest="d"),
        lambda: InboxView(key="k", depth=-1),
        lambda: OpenTurn(token="t", number=1, accepted_at=T0) and member(mute_events=-2),
        lambda: undecodable(occurrences=0),
        lambda: undecodable(occurrences=-1),
    ],
)
def test_snapshot_values_reject_impossible_facts(build: Callable[[], object]) -> None:
    """Negative counts, agents from a failed list, contradictory probe results and a decode
    failure seen zero times are refused."""
    with pytest.raises(
        ValueError, match=r"must not be negative|no agents|no error|no digest|at least 1"
    ):
        build()


def test_snapshot_reuse_across_ticks_is_safe() -> None:
    """The same snapshot object fed twice gives the same classification and no new effects."""
    snapshot = FleetSnapshot(live=live(agent("m1")), members=(member(),), leads=(LEAD,))
    first = decide(snapshot, HealthState(), T0 + TICK)
    second = decide(snapshot, first.state, T0 + 2 * TICK)
    assert second.effects == ()
    assert second.state.members["s-m1"].state is first.state.members["s-m1"].state
    assert not [e for e in first.effects if isinstance(e, RequestPaneProbe)]


def test_long_working_members_stay_cheap_and_still_rotate_through_the_budget() -> None:
    """Old working turns keep their candidacy through the shortcut; reads rotate over all."""
    run = Run()
    names = [f"m{i}" for i in range(5)]
    views = [member(n, state=S.BUSY, turn=turn(f"tok-{n}", at=T0)) for n in names]
    agents = [agent(n, L.WORKING) for n in names]
    run.tick(live(*agents), views, advance=timedelta(seconds=700))
    read: list[str] = [e.target for e in run.effects(RequestPaneProbe)]
    run.tick(live(*agents), views, advance=timedelta(seconds=60))  # first quiet evaluation
    previous = {e.target for e in run.effects(RequestPaneProbe)}
    read += sorted(previous)
    for _ in range(3):
        before = dict(run.state.members)
        run.tick(live(*agents), views, advance=timedelta(seconds=60))
        granted = {e.target for e in run.effects(RequestPaneProbe)}
        read += sorted(granted)
        reused = {n for n in names if run.state.members[f"s-{n}"] is before[f"s-{n}"]}
        assert reused == set(names) - granted - previous
        previous = granted
    assert set(read) == set(names)
    assert len(read) == 10


def test_a_reload_that_leaves_member_timers_alone_keeps_the_shortcut() -> None:
    """Changing only the read cadence or the lead delay does not re-evaluate members."""
    run = Run()
    for _ in range(3):
        run.tick(live(agent("m1")), [member()])
    before = run.state.members["s-m1"]
    reload = HealthSettings(
        pane_probe_interval=timedelta(seconds=120), lead_unresponsive_after=timedelta(hours=1)
    )
    run.tick(live(agent("m1")), [member()], settings=reload)
    assert run.state.members["s-m1"] is before


def test_decide_refuses_two_members_with_one_session_id() -> None:
    """Two members with one session id is a runtime bug: decide refuses the snapshot before it
    asks any member, whether or not a tick came before (nothing carries over then)."""
    run = Run()
    run.tick(live(agent("m1")), [member()])
    with pytest.raises(ValueError, match="duplicate member session_id"):
        run.tick(live(agent("m1")), [member(), member()])
    with pytest.raises(ValueError, match="duplicate member session_id"):
        Run().tick(live(agent("m1")), [member(), member()])


@pytest.mark.parametrize(
    "fields",
    [
        {"leads": (LEAD, LEAD)},
        {"inboxes": (InboxView(key="k", depth=1), InboxView(key="k", depth=2))},
    ],
)
def test_snapshot_refuses_duplicate_identities(fields: dict[str, Any]) -> None:
    """Two leads with one name, or two inboxes with one key, is a runtime bug."""
    with pytest.raises(ValueError, match="duplicate"):
        FleetSnapshot(live=live(), **fields)
