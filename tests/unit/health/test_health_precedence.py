"""Classification precedence (M4 §3): a lower rule never hides a higher one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from hypothesis import given
from hypothesis import strategies as st

from fleetd.health import (
    ControlLinkState,
    FailTargetWork,
    LiveStatus,
    LossCause,
    MemberState,
    OpenIncident,
    ProbeSource,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    RouteToHuman,
    SessionState,
    TargetLoss,
)
from fleetd.health.member_rules import MemberSeen, classify
from fleetd.health.states import spec_of
from tests.unit.health.health_fleet import T0, Run, agent, failed_list, inbox, live, member, turn

S, L, M = SessionState, LiveStatus, MemberState

LADDER = [
    ("gone", M.GONE),
    ("never_ready", M.NEVER_READY),
    ("orphaned", M.DELEGATION_ORPHANED),
    ("lost", M.TURN_BOUNDARY_LOST),
    ("fatal", M.ERROR_ON_SCREEN),
    ("boundary_fatal", M.ERROR_ON_SCREEN),
    ("stalled", M.STALL_SUSPECTED),
    ("stranded", M.REPLY_STRANDED),
    ("at_risk", M.WORK_PRODUCT_AT_RISK),
]


def _seen(flags: dict[str, bool], *, released: bool = False, loss: bool = False) -> MemberSeen:
    # a stand-in carrying only the rule inputs classify reads; a real MemberSeen needs a tick
    return cast(
        MemberSeen,
        SimpleNamespace(
            released=released,
            loss=(
                TargetLoss(cause=LossCause.GONE, code="agent_not_found", at=T0) if loss else None
            ),
            gone_code="agent_not_found" if flags["gone"] else None,
            never_ready=flags["never_ready"],
            orphaned="pending_after_teardown" if flags["orphaned"] else None,
            boundary_count=2 if flags["lost"] else 0,
            fatal=flags["fatal"],
            boundary_fatal="sig.boundary" if flags["boundary_fatal"] else None,
            probe=SimpleNamespace(signature="sig.id" if flags["fatal"] else None),
            stalled=flags["stalled"],
            stranded=flags["stranded"],
            at_risk=flags["at_risk"],
            view=member(state=S.BUSY, turn=turn()),
            raw=LiveStatus.WORKING,
            in_turn=True,
            inbox_depth=0,
        ),
    )


@given(st.fixed_dictionaries({name: st.booleans() for name, _ in LADDER}))
def test_the_highest_present_rule_wins(flags: dict[str, bool]) -> None:
    """For any mix of evidence the classifier returns the highest-ranked rule present."""
    state, _ = classify(_seen(flags))
    expected = next((s for name, s in LADDER if flags[name]), M.WORKING)
    assert state is expected


@given(st.fixed_dictionaries({name: st.booleans() for name, _ in LADDER}))
def test_released_members_answer_only_to_teardown_inbox_and_worktree(
    flags: dict[str, bool],
) -> None:
    """A released session is judged by orphaned tasks, stranded replies and its worktree only."""
    state, _ = classify(_seen(flags, released=True))
    order = [("orphaned", M.DELEGATION_ORPHANED), ("stranded", M.REPLY_STRANDED)]
    order.append(("at_risk", M.WORK_PRODUCT_AT_RISK))
    assert state is next((s for name, s in order if flags[name]), M.RELEASED)


@given(st.fixed_dictionaries({name: st.booleans() for name, _ in LADDER}))
def test_a_loss_the_bridge_released_for_outranks_every_released_rule(
    flags: dict[str, bool],
) -> None:
    """A released session with an unreported target loss is classified by that loss first."""
    assert classify(_seen(flags, released=True, loss=True)) == (M.GONE, "agent_not_found")


def _link(run: Run) -> ControlLinkState:
    """The link state now (a call, so mypy does not carry a narrowing across ticks)."""
    return run.state.link.state


def test_ladder_order_matches_the_state_table_ranks() -> None:
    """The ladder and the table's rank column agree, so docs and code cannot drift."""
    ranks = [spec_of(state).rank for _, state in LADDER]
    assert ranks == sorted(ranks)
    assert ranks[-1] < spec_of(M.IDLE).rank


def test_control_link_down_needs_two_failed_lists_and_a_failed_ping() -> None:
    """One failed list with a failed ping is not yet a dead link; the second one is."""
    run = Run()
    run.tick(live(agent("m1")), [member()])
    run.tick(failed_list(ping=False), [member()])
    assert _link(run) is ControlLinkState.CONTROL_LINK_OK
    run.tick(failed_list(ping=False), [member()])
    assert _link(run) is ControlLinkState.CONTROL_LINK_DOWN
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.scope, opened.incident.severity) == ("control_link", "critical")
    [human] = run.effects(RouteToHuman)
    assert (human.reason, human.generation) == ("human_control_link_down", 1)


def test_failed_list_with_working_ping_is_never_a_member_or_link_fault() -> None:
    """A failed list alone claims nothing: no link fault, no lookups, no member change."""
    run = Run()
    run.tick(live(agent("m1")), [member()])
    for ping in (True, None, True, None):
        run.tick(failed_list(ping=ping), [member()])
        assert run.state.link.state is ControlLinkState.CONTROL_LINK_OK
        assert run.member() is M.IDLE
        assert run.last is not None
        assert not [e for e in run.last.effects if not isinstance(e, type(None))]


def test_control_link_down_hides_member_faults() -> None:
    """While the link is down a member that would be NEVER_READY is not flagged or stopped."""
    run = Run()
    spawning = member(state=S.SPAWNING, presence=False, turn=turn(delivered=False))
    run.tick(live(agent("m1", L.UNKNOWN)), [spawning])
    run.tick(failed_list(ping=False), [spawning])
    run.tick(failed_list(ping=False), [spawning], advance=run.settings.readiness_grace * 3)
    assert run.state.link.state is ControlLinkState.CONTROL_LINK_DOWN
    assert run.member() is M.STARTING
    assert not run.all_effects(FailTargetWork)
    assert run.opened() == [ControlLinkState.CONTROL_LINK_DOWN]


def test_link_down_keeps_member_incidents_as_they_were() -> None:
    """An open member incident neither resolves nor changes while the link is down."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.DONE)), [busy])
    run.tick(live(agent("m1", L.DONE)), [busy])
    assert run.member() is M.TURN_BOUNDARY_LOST
    run.tick(failed_list(ping=False), [busy])
    run.tick(failed_list(ping=False), [busy])
    assert run.member() is M.TURN_BOUNDARY_LOST
    assert not run.effects(ResolveIncident)
    assert not run.effects(RequestPaneProbe)
    assert not run.effects(RequestTargetLookup)


def test_link_recovers_only_when_a_list_succeeds() -> None:
    """A ping coming back does not restore the view; a successful list does."""
    run = Run()
    run.tick(failed_list(ping=False), [])
    run.tick(failed_list(ping=False), [])
    run.tick(failed_list(ping=True), [])
    assert _link(run) is ControlLinkState.CONTROL_LINK_DOWN
    run.tick(live(), [])
    assert _link(run) is ControlLinkState.CONTROL_LINK_OK
    assert [e.reason for e in run.effects(ResolveIncident)] == ["cleared"]


def test_members_resume_from_their_retained_evidence_after_the_link_returns() -> None:
    """The lost-boundary count survives a blind tick: no observation is not a conflict."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.DONE)), [busy])
    run.tick(failed_list(ping=True), [busy])
    run.tick(live(agent("m1", L.DONE)), [busy])
    assert run.member() is M.TURN_BOUNDARY_LOST


def test_gone_beats_turn_boundary_lost() -> None:
    """Definitive loss replaces a lost boundary: the TBL incident is superseded."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.DONE)), [busy])
    run.tick(live(agent("m1", L.DONE)), [busy])
    run.tick(live(targeted={"m1": "agent_not_found"}), [busy])
    assert run.member() is M.GONE
    [resolved] = run.effects(ResolveIncident)
    assert (resolved.incident.state, resolved.reason) == (M.TURN_BOUNDARY_LOST, "superseded")
    assert run.opened() == [M.GONE]


def test_gone_beats_never_ready() -> None:
    """A spawning member that herdr no longer knows is GONE, not NEVER_READY."""
    run = Run()
    spawning = member(state=S.SPAWNING, presence=False, turn=turn(delivered=False))
    run.tick(
        live(targeted={"m1": "agent_not_found"}),
        [spawning],
        advance=run.settings.readiness_grace * 2,
    )
    assert run.member() is M.GONE


def test_lost_boundary_beats_a_fatal_signature() -> None:
    """A fatal screen while BUSY at the prompt twice is still a lost boundary first."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn())
    run.tick(live(agent("m1", L.BLOCKED)), [busy])
    run.tick(live(agent("m1", L.BLOCKED)), [busy])
    sig = run.answers(fatal_signature_id="claude.api_error_529")
    run.tick(live(agent("m1", L.DONE)), [busy], probes=sig)
    assert run.member() is M.ERROR_ON_SCREEN
    run.tick(live(agent("m1", L.DONE)), [busy])
    assert run.member() is M.TURN_BOUNDARY_LOST


def test_error_on_screen_beats_reply_stranded() -> None:
    """Screen evidence (rank 5) outranks a stranded reply (rank 7)."""
    run = Run()
    busy = member(state=S.BUSY, turn=turn(), uncollected_replies=1)
    boxes = [inbox("lead-a", capped=True)]
    run.tick(live(agent("m1", L.UNKNOWN)), [busy], inboxes=boxes)
    assert run.member() is M.REPLY_STRANDED
    run.tick(live(agent("m1", L.UNKNOWN)), [busy], inboxes=boxes)
    assert [e.source for e in run.effects(RequestPaneProbe)] == [ProbeSource.DETECTION]
    sig = run.answers(fatal_signature_id="codex.usage_limit")
    run.tick(live(agent("m1", L.UNKNOWN)), [busy], inboxes=boxes, probes=sig)
    assert run.member() is M.ERROR_ON_SCREEN
