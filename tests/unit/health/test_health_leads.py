"""Lead states (M4 §4.4), lead identity retention, and member-incident routing (§7.3)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fleetd.health import (
    HealthSettings,
    InboxView,
    LeadState,
    LeadView,
    LiveStatus,
    LiveView,
    MemberView,
    OpenIncident,
    ProbeResult,
    ProbeSource,
    PublishHealthRecord,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    RetireLead,
    RouteToHuman,
    SessionState,
    SupersedeAssignment,
)
from tests.unit.health.health_fleet import (
    LEAD,
    TICK,
    Run,
    agent,
    failed_list,
    inbox,
    lead,
    live,
    member,
)

L, LS = LiveStatus, LeadState


def lead_only(status: LiveStatus | None, **fields: Any) -> LiveView:
    agents = () if status is None else (agent("lead-a", status, **fields),)
    return live(*agents, with_lead=False)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (L.IDLE, LS.LEAD_IDLE),
        (L.DONE, LS.LEAD_IDLE),
        (L.WORKING, LS.LEAD_WORKING),
        (L.BLOCKED, LS.LEAD_WORKING),
        (L.UNKNOWN, LS.LEAD_STATUS_UNKNOWN),
    ],
)
def test_present_lead_states(status: LiveStatus, expected: LeadState) -> None:
    """A present lead is idle, working (also when blocked: not injectable) or status-unknown."""
    run = Run()
    run.tick(lead_only(status), [])
    assert run.lead() is expected
    assert not run.effects(OpenIncident)


def test_two_successful_absences_with_working_ping_are_unreachable() -> None:
    """Absent from two successful lists while ping works: LEAD_UNREACHABLE, routed onward."""
    run = Run()
    run.tick(lead_only(L.IDLE), [])
    run.tick(lead_only(None), [])
    assert run.lead() is LS.LEAD_IDLE  # one absence is no evidence: the prior state stands
    assert run.effects(RequestTargetLookup) == [RequestTargetLookup(target="lead-a")]
    run.tick(lead_only(None), [])
    assert run.lead() is LS.LEAD_UNREACHABLE
    [opened] = run.effects(OpenIncident)
    assert (opened.incident.scope, opened.incident.severity) == ("lead", "critical")
    [human] = run.effects(RouteToHuman)  # the sole lead: no peer can take it
    assert (human.reason, human.on_behalf_of) == ("human_no_healthy_lead", "lead-a")
    assert run.state.leads["lead-a"].last_seen_at == run.now - 2 * TICK


@pytest.mark.parametrize(
    ("status", "capped", "kept"),
    [
        (L.IDLE, False, LS.LEAD_IDLE),
        (L.WORKING, False, LS.LEAD_WORKING),
        (L.UNKNOWN, False, LS.LEAD_STATUS_UNKNOWN),
        (L.IDLE, True, LS.LEAD_UNRESPONSIVE),
    ],
)
def test_one_absence_keeps_the_prior_state_and_its_incident(
    status: LiveStatus, capped: bool, kept: LeadState
) -> None:
    """Absent from one list: nothing changes (no LEAD_STATUS_UNKNOWN, no incident churn)."""
    run = Run(settings=HealthSettings(lead_unresponsive_after=timedelta(0)))
    view = lead(actionable_waiting=1, nudge_cap_reached_at=run.now) if capped else LEAD
    run.tick(lead_only(status), [], leads=[view], advance=timedelta(minutes=5))
    assert run.lead() is kept
    opened = run.state.open_incidents()
    run.tick(lead_only(None), [], leads=[view])
    assert run.lead() is kept
    assert not run.effects(OpenIncident)
    assert not run.effects(ResolveIncident)
    assert run.state.open_incidents() == opened
    run.tick(lead_only(status), [], leads=[view])
    assert run.lead() is kept
    assert not run.effects(OpenIncident)


def test_a_lead_named_apart_from_its_agent_owns_its_inbox() -> None:
    """An inbox key is the lead's name: a capped lead inbox is no orphan REPLY_STRANDED."""
    run = Run()
    named = LeadView(name="alpha", agent_name="lead-a", terminal_id="term_lead-a")
    run.tick(lead_only(L.WORKING), [], leads=[named], inboxes=[inbox("alpha", capped=True)])
    assert run.state.open_incidents() == ()
    assert run.lead("alpha") is LS.LEAD_WORKING


def test_global_link_failure_is_not_lead_disappearance() -> None:
    """Failed lists carry no absence evidence, however many there are."""
    run = Run()
    run.tick(lead_only(L.IDLE), [])
    for _ in range(5):
        run.tick(failed_list(ping=True), [])
    run.tick(lead_only(None), [])
    assert run.lead() is LS.LEAD_IDLE


def test_absence_while_ping_fails_is_not_counted() -> None:
    """An absence observed while ping fails proves nothing about the lead."""
    run = Run()
    for _ in range(3):
        run.tick(LiveView(list_ok=True, agents=(), ping_ok=False), [])
    assert run.lead() is LS.LEAD_STATUS_UNKNOWN


def test_targeted_not_found_is_unreachable_at_once() -> None:
    """A ``*_not_found`` lookup with a healthy link is definitive."""
    run = Run()
    run.tick(live(targeted={"lead-a": "agent_not_found"}, with_lead=False), [])
    assert run.lead() is LS.LEAD_UNREACHABLE
    run.tick(lead_only(None), [])
    assert run.lead() is LS.LEAD_UNREACHABLE
    assert not run.effects(RequestTargetLookup)


def test_a_lead_sighted_again_is_not_lost_on_an_earlier_lookups_not_found() -> None:
    """Missed once, then looked up while gone, then listed again (relaunched under its name in
    a new pane): the list is the newer fact, so the lead is idle and no incident opens."""
    run = Run()
    run.tick(lead_only(L.IDLE), [])
    run.tick(lead_only(None), [])
    assert run.effects(RequestTargetLookup)
    relaunched = agent("lead-a", terminal="term_lead-a-2", pane="w2:p1")
    now = LeadView(name="lead-a", agent_name="lead-a", terminal_id="term_lead-a-2")
    lost = {"lead-a": "agent_not_found"}
    run.tick(live(relaunched, targeted=lost, with_lead=False), [], leads=[now])
    assert run.lead() is LS.LEAD_IDLE
    assert not run.effects(OpenIncident)
    assert run.state.leads["lead-a"].lookup_error == "agent_not_found"  # kept as evidence


def test_returning_lead_recovers_and_resolves() -> None:
    """Seen again at its prompt, the lead is idle and its incident resolves."""
    run = Run()
    run.tick(lead_only(None), [])
    run.tick(lead_only(None), [])
    run.tick(lead_only(L.IDLE), [])
    assert run.lead() is LS.LEAD_IDLE
    assert [e.reason for e in run.effects(ResolveIncident)] == ["cleared"]


def test_exhausted_nudges_make_an_idle_lead_unresponsive_after_the_floor() -> None:
    """Actionable work, an injectable lead and a reached nudge cap: unresponsive after 120 s."""
    run = Run(settings=HealthSettings(lead_unresponsive_after=timedelta(0)))
    capped = lead(actionable_waiting=2, nudges_sent=3, nudge_cap_reached_at=run.now)
    run.tick(lead_only(L.IDLE), [], leads=[capped], advance=timedelta(seconds=119))
    assert run.lead() is LS.LEAD_IDLE
    run.tick(lead_only(L.IDLE), [], leads=[capped], advance=timedelta(seconds=1))
    assert run.lead() is LS.LEAD_UNRESPONSIVE
    final = run.effects(RequestPaneProbe)
    assert [(p.source, p.reason) for p in final] == [("visible", "final_evidence")]
    run.tick(lead_only(L.IDLE), [], leads=[capped], advance=timedelta(minutes=5))
    assert not run.effects(RequestPaneProbe)


def test_working_lead_is_never_unresponsive() -> None:
    """A lead in a live turn is busy, not unresponsive."""
    run = Run()
    capped = lead(actionable_waiting=1, nudge_cap_reached_at=run.now)
    run.tick(lead_only(L.WORKING), [], leads=[capped], advance=timedelta(hours=1))
    assert run.lead() is LS.LEAD_WORKING


def test_unchanged_digests_on_a_long_working_lead_are_stall_suspected() -> None:
    """A lead working past the threshold with two equal digests is LEAD_STALL_SUSPECTED."""
    run = Run()
    pending: tuple[ProbeResult, ...] = ()
    for _ in range(30):
        run.tick(lead_only(L.WORKING), [], probes=pending)
        pending = run.answers(digest="same")
    assert run.lead() is LS.LEAD_STALL_SUSPECTED
    reads = run.all_effects(RequestPaneProbe)
    assert {r.source for r in reads} == {ProbeSource.RECENT_UNWRAPPED}
    assert reads[0].target == "lead-a"


def test_quiet_leads_cause_no_reads() -> None:
    """Idle and briefly working leads are never read."""
    run = Run()
    for status in (L.IDLE, L.WORKING, L.WORKING, L.IDLE) * 3:
        run.tick(lead_only(status), [])
        assert run.reads() == 0


def test_lead_leaving_the_identity_map_survives_a_two_snapshot_grace() -> None:
    """A vanished identity is kept for two successful snapshots, then retired when healthy."""
    run = Run()
    run.tick(lead_only(L.IDLE), [])
    run.tick(lead_only(L.IDLE), [], leads=[])
    assert "lead-a" in run.state.leads
    run.tick(failed_list(ping=True), [], leads=[])
    assert "lead-a" in run.state.leads
    run.tick(lead_only(L.IDLE), [], leads=[])
    assert "lead-a" not in run.state.leads


def test_a_healthy_discovered_lead_that_vanishes_retires_after_the_grace() -> None:
    """A discovered identity seen alive outside a fault state retires once it has been missing
    from the map for two successful snapshots."""
    found = lead(configured=False, discovered=True)
    run = Run()
    run.tick(lead_only(L.IDLE), [], leads=[found])
    run.tick(lead_only(L.IDLE), [], leads=[])
    assert "lead-a" in run.state.leads
    run.tick(lead_only(L.IDLE), [], leads=[])
    assert "lead-a" not in run.state.leads
    assert run.all_effects(RetireLead)


def test_dead_discovered_lead_cannot_escape_by_vanishing_from_the_map() -> None:
    """A discovered identity that disappears from the scanner's map and from herdr is still
    found unreachable, and stays so past the grace."""
    found = lead(configured=False, discovered=True)
    run = Run()
    run.tick(lead_only(L.IDLE), [], leads=[found])
    run.tick(lead_only(None), [], leads=[])
    run.tick(lead_only(None), [], leads=[])
    assert run.lead() is LS.LEAD_UNREACHABLE
    for _ in range(4):
        run.tick(lead_only(None), [], leads=[])
    assert run.lead() is LS.LEAD_UNREACHABLE
    assert not run.all_effects(RetireLead)


def test_a_dead_lead_removed_from_the_config_retires_and_its_incident_resolves() -> None:
    """Issue 20 4b: an unreachable lead (its agent gone, its incident with a person) taken out of
    the configuration retires after the two-successful-snapshot grace, and its incident
    resolves as ``subject_retired``; a blind tick does not count toward the grace."""
    run = Run()
    run.tick(lead_only(L.IDLE), [])
    for _ in range(2):
        run.tick(lead_only(None), [])
    assert run.lead() is LS.LEAD_UNREACHABLE
    [held] = run.state.open_incidents()
    assert held.state == "LEAD_UNREACHABLE"
    assert held.route == "human"
    run.tick(lead_only(None), [], leads=[])
    run.tick(failed_list(ping=True), [], leads=[])
    assert run.lead() is LS.LEAD_UNREACHABLE  # inside the grace: still tracked
    assert not run.all_effects(RetireLead)
    run.tick(lead_only(None), [], leads=[])
    assert "lead-a" not in run.state.leads
    assert run.effects(RetireLead) == [
        RetireLead(lead="lead-a", agent_name="lead-a", terminal_id="term_lead-a")
    ]
    [resolved] = run.effects(ResolveIncident)
    assert (resolved.incident.id, resolved.reason) == (held.id, "subject_retired")
    assert run.state.open_incidents() == ()
    for _ in range(3):
        run.tick(lead_only(None), [], leads=[])
        assert run.last is not None
        assert run.last.effects == ()


# --- routing of member incidents -----------------------------------------------------------------


def stranded(owner: str | None = "lead-a") -> tuple[MemberView, InboxView]:
    return member(state=SessionState.DONE, owner=owner, uncollected_replies=1), inbox(
        owner or "lead-a", capped=True
    )


def test_member_incident_goes_to_its_exact_owning_lead() -> None:
    """A healthy owner receives the member incident; nobody else does."""
    run = Run()
    view, box = stranded()
    run.tick(live(agent("m1")), [view], inboxes=[box])
    [published] = run.effects(PublishHealthRecord)
    assert published.recipient_lead == "lead-a"
    assert published.incident.recipient_lead == "lead-a"
    assert (published.reason, published.generation, published.on_behalf_of) == ("owner", 1, None)
    assert not run.effects(RouteToHuman)


def test_member_incident_without_owner_goes_to_a_person() -> None:
    """No known owner: no lead is guessed, the incident goes to a person (Figure 2)."""
    run = Run()
    gone = live(targeted={"m1": "agent_not_found"})  # no owner, so no lead inbox to strand in
    run.tick(gone, [member(owner=None)])
    assert not run.effects(PublishHealthRecord)
    assert [e.reason for e in run.effects(RouteToHuman)] == ["human_no_owner"]


def test_member_incident_of_an_unhealthy_owner_goes_to_a_healthy_peer() -> None:
    """An owner that is itself unreachable cannot receive the incident: its peer does."""
    run = Run()
    view, box = stranded(owner="lead-b")
    leads = [LEAD, lead("lead-b")]
    lost_b = live(agent("m1"), targeted={"lead-b": "agent_not_found"})
    run.tick(lost_b, [view], leads=leads)
    run.tick(lost_b, [view], leads=leads, inboxes=[box])
    [told] = [e for e in run.effects(PublishHealthRecord) if e.incident.scope == "member"]
    assert (told.recipient_lead, told.reason, told.on_behalf_of) == (
        "lead-a",
        "peer_owner_unhealthy",
        "lead-b",
    )
    assert not run.effects(RouteToHuman)


def test_sole_owner_turning_unhealthy_hands_its_incidents_to_a_person() -> None:
    """When the only lead becomes unreachable its member incidents go to a person, once."""
    run = Run()
    view, box = stranded()
    run.tick(live(agent("m1")), [view], inboxes=[box])
    lost_a = live(agent("m1"), targeted={"lead-a": "agent_not_found"}, with_lead=False)
    run.tick(lost_a, [view], inboxes=[box])
    rerouted = [e for e in run.effects(RouteToHuman) if e.incident.scope == "member"]
    assert [(e.reason, e.generation, e.incident.recipient_lead) for e in rerouted] == [
        ("human_no_healthy_lead", 2, None)
    ]
    [superseded] = run.effects(SupersedeAssignment)
    assert (superseded.previous.recipient, superseded.previous.generation) == ("lead-a", 1)
    held = {i.scope: (i.route, i.recipient_lead) for i in run.state.open_incidents()}
    assert held == {"member": ("human", None), "lead": ("human", None)}
    run.tick(lost_a, [view], inboxes=[box])
    assert not run.effects(RouteToHuman)
    assert not run.effects(SupersedeAssignment)
