"""Lead health drives routing tick by tick (M4 Unit 4 criterion 14, §7.4–§7.6)."""

from __future__ import annotations

from datetime import timedelta

from fleetd.health import (
    FailTargetWork,
    LeadState,
    LiveAgent,
    LiveStatus,
    LiveView,
    OpenIncident,
    ProbeResult,
    PublishHealthRecord,
    RecordTransition,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    RetireLead,
    RouteToHuman,
    SupersedeAssignment,
)
from tests.unit.health.health_fleet import Run, agent, failed_list, lead, live, member

L, LS = LiveStatus, LeadState
LEADS = (lead("lead-a"), lead("lead-b"), lead("lead-c"))
GONE_M1 = {"m1": "agent_not_found"}  # member m1 (owned by lead-a) is gone: one member incident


def fleet(
    *present: str | tuple[str, LiveStatus], targeted: dict[str, str] | None = None
) -> LiveView:
    """A successful list showing these leads (idle unless a status is given)."""
    agents: list[LiveAgent] = []
    for entry in present:
        name, status = entry if isinstance(entry, tuple) else (entry, L.IDLE)
        agents.append(agent(name, status))
    return live(*agents, targeted=targeted, with_lead=False)


def holder(run: Run) -> tuple[str | None, int]:
    """Who holds the member incident now, and in which routing generation."""
    [held] = [i for i in run.state.open_incidents() if i.scope == "member"]
    return held.recipient_lead, held.routing_generation


def test_a_busy_owner_keeps_its_incident_and_a_dead_one_loses_it() -> None:
    """A working owner is reachable: it keeps the incident; unreachable, a peer takes over."""
    run = Run()
    for _ in range(3):
        run.tick(fleet(("lead-a", L.WORKING), "lead-b", targeted=GONE_M1), [member()], leads=LEADS)
    assert run.lead("lead-a") is LS.LEAD_WORKING
    assert holder(run) == ("lead-a", 1)
    run.tick(fleet("lead-b", "lead-c"), [member()], leads=LEADS)
    assert holder(run) == ("lead-a", 1)  # one absence proves nothing
    run.tick(fleet("lead-b", "lead-c"), [member()], leads=LEADS)
    assert run.lead("lead-a") is LS.LEAD_UNREACHABLE
    # lead-a's own incident went first (key order: lead before member) to lead-b, so the
    # member incident goes to the less loaded lead-c
    assert holder(run) == ("lead-c", 2)
    [superseded] = run.effects(SupersedeAssignment)
    assert superseded.previous.recipient == "lead-a"


def test_every_open_incident_is_routed_within_its_opening_tick() -> None:
    """Open effects already carry the assignment, and nothing in the state is unrouted."""
    run = Run()
    run.tick(
        fleet("lead-b", targeted={**GONE_M1, "lead-a": "agent_not_found"}), [member()], leads=LEADS
    )
    opened = run.effects(OpenIncident)
    assert {o.incident.state for o in opened} == {"GONE", "LEAD_UNREACHABLE"}
    assert all(o.incident.assignment is not None for o in opened)
    assert all(i.assignment is not None for i in run.state.open_incidents())
    assert {(p.incident.scope, p.recipient_lead) for p in run.effects(PublishHealthRecord)} == {
        ("member", "lead-b"),
        ("lead", "lead-b"),
    }


def test_a_raw_unknown_lead_is_an_owner_but_never_a_peer() -> None:
    """LEAD_STATUS_UNKNOWN keeps its own incidents; as the only other lead it takes none."""
    run = Run()
    leads = LEADS[:2]
    run.tick(fleet(("lead-a", L.UNKNOWN), "lead-b", targeted=GONE_M1), [member()], leads=leads)
    assert holder(run) == ("lead-a", 1)
    lost_a = {**GONE_M1, "lead-a": "agent_not_found"}
    run.tick(fleet(("lead-b", L.UNKNOWN), targeted=lost_a), [member()], leads=leads)
    assert holder(run) == (None, 2)
    [told] = [e for e in run.effects(RouteToHuman) if e.incident.scope == "member"]
    assert (told.reason, told.on_behalf_of) == ("human_no_healthy_lead", "lead-a")


def test_a_global_list_failure_moves_nothing() -> None:
    """Blind ticks keep every lead's health and so every assignment; no lead goes unreachable."""
    run = Run()
    run.tick(fleet("lead-a", "lead-b", targeted=GONE_M1), [member()], leads=LEADS[:2])
    before = run.state.open_incidents()
    for _ in range(4):
        run.tick(failed_list(ping=True), [member()], leads=LEADS[:2])
        assert not run.effects(SupersedeAssignment)
        assert not run.effects(PublishHealthRecord)
    assert run.state.open_incidents() == before
    assert run.lead("lead-a") is LS.LEAD_IDLE


def test_a_lead_only_the_stale_identity_cache_shows_is_no_peer() -> None:
    """Listed as expected but absent from the live list: not a candidate, a present peer is."""
    run = Run()
    lost_a = {**GONE_M1, "lead-a": "agent_not_found"}
    run.tick(fleet("lead-c", targeted=lost_a), [member()], leads=LEADS)
    assert holder(run) == ("lead-c", 1)
    assert RequestTargetLookup(target="lead-b") in run.effects(RequestTargetLookup)


def test_a_peer_leaving_the_identity_map_holds_its_incidents_until_it_retires() -> None:
    """Through the two-successful-snapshot grace the pinned peer keeps them; then it retires
    (its key may go once empty) and the incidents move on, superseded."""
    run = Run()
    lost_a = {**GONE_M1, "lead-a": "agent_not_found"}
    run.tick(fleet("lead-b", targeted=lost_a), [member()], leads=LEADS[:2])
    assert holder(run) == ("lead-b", 1)
    without_b = (LEADS[0], LEADS[2])
    run.tick(fleet("lead-b", "lead-c", targeted=lost_a), [member()], leads=without_b)
    assert holder(run) == ("lead-b", 1)
    assert "lead-b" in run.state.leads
    run.tick(failed_list(ping=True), [member()], leads=without_b)  # a blind tick is no snapshot
    assert holder(run) == ("lead-b", 1)
    run.tick(fleet("lead-b", "lead-c", targeted=lost_a), [member()], leads=without_b)
    assert "lead-b" not in run.state.leads
    assert run.effects(RetireLead) == [
        RetireLead(lead="lead-b", agent_name="lead-b", terminal_id="term_lead-b")
    ]
    assert holder(run) == ("lead-c", 2)
    superseded = run.effects(SupersedeAssignment)
    assert [(s.incident.scope, s.previous.recipient) for s in superseded] == [
        ("lead", "lead-b"),
        ("member", "lead-b"),
    ]


def test_a_lead_removed_from_the_config_survives_the_retirement_grace() -> None:
    """A lead the identity map no longer lists is kept for two successful snapshots, then
    retired. Its view is built as the runtime builds every lead's: configured, from config."""
    run = Run()
    run.tick(fleet("lead-d"), [], leads=[lead("lead-d")])
    assert run.state.leads["lead-d"].configured
    assert not run.state.leads["lead-d"].discovered
    run.tick(fleet("lead-d"), [], leads=[])
    assert run.state.leads["lead-d"].identity_missing == 1
    run.tick(failed_list(ping=True), [], leads=[])
    assert run.state.leads["lead-d"].identity_missing == 1  # a failed list proves nothing
    run.tick(fleet("lead-d"), [], leads=[])
    assert "lead-d" not in run.state.leads
    assert [e.lead for e in run.effects(RetireLead)] == ["lead-d"]


def test_several_peers_share_a_failed_leads_incidents() -> None:
    """Two peers, four incidents of a dead owner: two each, by load then name."""
    run = Run()
    members = [member(f"m{n}") for n in range(4)]
    gone = {f"m{n}": "agent_not_found" for n in range(4)}
    run.tick(
        fleet("lead-b", "lead-c", targeted={**gone, "lead-a": "agent_not_found"}),
        members,
        leads=LEADS,
    )
    held = sorted(
        (i.subject, i.recipient_lead) for i in run.state.open_incidents() if i.scope == "member"
    )
    lead_incident = [i for i in run.state.open_incidents() if i.scope == "lead"]
    assert [i.recipient_lead for i in lead_incident] == ["lead-b"]  # key order: routed first
    assert [r for _, r in held] == ["lead-c", "lead-b", "lead-c", "lead-b"]  # then by load


def test_a_pinned_peer_turning_unhealthy_hands_over_and_the_owner_takes_back() -> None:
    """Peer lead-c goes unresponsive: lead-b (generation 2); lead-a returns while lead-b is
    healthy: lead-b keeps it (§7.4); lead-b goes unresponsive too: the owner takes it (3)."""
    run = Run()
    lost_a = {**GONE_M1, "lead-a": "agent_not_found"}
    run.tick(fleet("lead-b", "lead-c", targeted=lost_a), [member()], leads=LEADS)
    assert holder(run) == ("lead-c", 1)  # lead-b took lead-a's own incident first
    capped_c = (*LEADS[:2], lead("lead-c", actionable_waiting=1, nudge_cap_reached_at=run.now))
    run.tick(
        fleet("lead-b", "lead-c", targeted=lost_a),
        [member()],
        leads=capped_c,
        advance=timedelta(minutes=5),
    )
    assert run.lead("lead-c") is LS.LEAD_UNRESPONSIVE
    assert holder(run) == ("lead-b", 2)
    run.tick(fleet("lead-a", "lead-b", "lead-c", targeted=GONE_M1), [member()], leads=LEADS)
    assert run.lead("lead-a") is LS.LEAD_IDLE
    assert holder(run) == ("lead-b", 2)
    capped_b = (
        LEADS[0],
        lead("lead-b", actionable_waiting=1, nudge_cap_reached_at=run.now),
        LEADS[2],
    )
    run.tick(
        fleet("lead-a", "lead-b", "lead-c", targeted=GONE_M1),
        [member()],
        leads=capped_b,
        advance=timedelta(minutes=5),
    )
    assert run.lead("lead-b") is LS.LEAD_UNRESPONSIVE
    assert holder(run) == ("lead-a", 3)
    [told] = [e for e in run.effects(PublishHealthRecord) if e.incident.scope == "member"]
    assert (told.reason, told.on_behalf_of) == ("owner", None)


def test_a_sole_failed_lead_is_never_restarted_or_replaced() -> None:
    """Unreachable or stalled, the only lead gets evidence reads and a person: nothing more."""
    run = Run()
    pending: tuple[ProbeResult, ...] = ()
    for _ in range(30):
        run.tick(live(agent("lead-a", L.WORKING), with_lead=False), [], probes=pending)
        pending = run.answers(digest="same")
    assert run.lead() is LS.LEAD_STALL_SUSPECTED
    for _ in range(3):
        run.tick(live(with_lead=False), [])
    assert run.lead() is LS.LEAD_UNREACHABLE
    allowed = (
        RecordTransition,
        OpenIncident,
        ResolveIncident,
        RouteToHuman,
        SupersedeAssignment,
        RequestPaneProbe,
        RequestTargetLookup,
    )
    everything = [e for d in run.history for e in d.effects]
    assert all(isinstance(e, allowed) for e in everything), {type(e) for e in everything}
    assert not [e for e in everything if isinstance(e, FailTargetWork | RequestLostBoundaryRepair)]
    humans = [e for e in everything if isinstance(e, RouteToHuman)]
    assert [(h.incident.state, h.generation) for h in humans] == [
        ("LEAD_STALL_SUSPECTED", 1),
        ("LEAD_UNREACHABLE", 1),
    ]
    assert not run.all_effects(PublishHealthRecord)


def test_a_record_the_inbox_refused_for_two_intervals_sends_incidents_to_a_person() -> None:
    """§10.1 "incident publication itself fails": while a refused health record has waited less
    than two snapshot intervals the owner keeps its incident; from two intervals on a person
    holds it (on the owner's behalf); once the record got through, the owner takes it back."""
    run = Run()
    present = fleet("lead-a", "lead-b", "lead-c", targeted=GONE_M1)
    run.tick(present, [member()], leads=LEADS)
    assert holder(run) == ("lead-a", 1)
    refused_at = run.now
    run.tick(present, [member()], leads=LEADS, unpublished_since=refused_at)
    assert holder(run) == ("lead-a", 1)  # one interval: the push may still get it through
    run.tick(present, [member()], leads=LEADS, unpublished_since=refused_at)
    assert holder(run) == (None, 2)
    [told] = run.effects(RouteToHuman)
    assert (told.reason, told.on_behalf_of) == ("human_publication_failed", "lead-a")
    run.tick(present, [member()], leads=LEADS)  # the inbox took what waited
    assert holder(run) == ("lead-a", 3)
    [back] = run.effects(SupersedeAssignment)
    assert back.previous.route == "human"


def test_a_flapping_owner_does_not_bounce_its_incident_between_inboxes() -> None:
    """Issue 20 4a: three absent-2/present-1 cycles of the owner move the member incident once,
    to the peer (routing generation 2), and never back while the peer stays healthy (§7.4)."""
    run = Run()
    leads = LEADS[:2]
    run.tick(fleet("lead-a", "lead-b", targeted=GONE_M1), [member()], leads=leads)
    assert holder(run) == ("lead-a", 1)
    for _ in range(3):
        for _ in range(2):
            run.tick(fleet("lead-b", targeted=GONE_M1), [member()], leads=leads)
        assert run.lead("lead-a") is LS.LEAD_UNREACHABLE
        assert holder(run) == ("lead-b", 2)
        run.tick(fleet("lead-a", "lead-b", targeted=GONE_M1), [member()], leads=leads)
        assert run.lead("lead-a") is LS.LEAD_IDLE
        assert holder(run) == ("lead-b", 2)
    records = [
        (e.recipient_lead, e.generation)
        for e in run.all_effects(PublishHealthRecord)
        if e.incident.scope == "member"
    ]
    assert records == [("lead-a", 1), ("lead-b", 2)]
    assert len(run.all_effects(SupersedeAssignment)) == 1
