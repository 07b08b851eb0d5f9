"""``route()``: owner, healthy peer or person, one rule per case (M4 §7.3–§7.6, Figure 2)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetd.health import (
    Assignment,
    Incident,
    IncidentKey,
    LeadFacts,
    LeadState,
    LiveStatus,
    MemberState,
    PublishHealthRecord,
    Route,
    RouteToHuman,
    RoutingReason,
    Scope,
    SupersedeAssignment,
    foreign_assignments,
    route,
)
from fleetd.health.incidents import IncidentBook
from fleetd.health.states import (
    ControlLinkState,
    HealthStateName,
    InboxState,
    InstanceState,
    spec_of,
)
from tests.unit.health.health_fleet import T0

LS, R = LeadState, RoutingReason
FAULTS = [LS.LEAD_UNREACHABLE, LS.LEAD_UNRESPONSIVE, LS.LEAD_STALL_SUSPECTED]
_STATES: dict[Scope, HealthStateName] = {
    Scope.MEMBER: MemberState.GONE,
    Scope.LEAD: LS.LEAD_UNREACHABLE,
    Scope.CONTROL_LINK: ControlLinkState.CONTROL_LINK_DOWN,
    Scope.INBOX: InboxState.INBOX_DECODE_FAILED,
    Scope.PROFILE: MemberState.MUTE,
    Scope.INSTANCE: InstanceState.INSTANCE_DOWN,
}


def incident(
    subject: str = "s-1",
    *,
    scope: Scope = Scope.MEMBER,
    owner: str | None = "lead-a",
    assignment: Assignment | None = None,
) -> Incident:
    state = _STATES[scope]
    return Incident(
        id=f"inc_{scope}_{subject}",
        key=IncidentKey(scope=scope, subject=subject, state=state, cause="c"),
        generation=1,
        target=None,
        severity=spec_of(state).severity,
        certainty=spec_of(state).certainty,
        opened_at=T0,
        owner_lead=owner,
        assignment=assignment,
    )


def facts(
    name: str,
    state: LeadState = LS.LEAD_IDLE,
    *,
    raw: LiveStatus | None = LiveStatus.IDLE,
    present: bool = True,
    retiring: bool = False,
) -> LeadFacts:
    return LeadFacts(
        name=name,
        terminal_id=f"term_{name}",
        state=state,
        raw_status=raw,
        present=present,
        retiring=retiring,
    )


def to(
    recipient: str, reason: RoutingReason = R.OWNER, generation: int = 1, **kw: str
) -> Assignment:
    return Assignment(
        route=Route.LEAD, recipient=recipient, reason=reason, generation=generation, **kw
    )


def human(reason: RoutingReason, generation: int = 1, by: str | None = None) -> Assignment:
    return Assignment(
        route=Route.HUMAN, recipient=None, reason=reason, generation=generation, on_behalf_of=by
    )


def assigned(*incidents: Incident, leads: list[LeadFacts]) -> Assignment | None:
    [routed] = route(incidents, leads).routed
    return routed.assignment


A, B, C = facts("lead-a"), facts("lead-b"), facts("lead-c")


# --- the plan of one incident --------------------------------------------------------------------


@pytest.mark.parametrize("owner_state", [LS.LEAD_IDLE, LS.LEAD_WORKING, LS.LEAD_STATUS_UNKNOWN])
def test_a_healthy_owner_receives_its_member_incident(owner_state: LeadState) -> None:
    """Not in a fault state (even busy, or raw UNKNOWN): the exact owner gets it, generation 1."""
    result = route([incident()], [facts("lead-a", owner_state), B])
    [published] = result.effects
    assert published == PublishHealthRecord(
        recipient_lead="lead-a",
        incident=result.routed[0],
        generation=1,
        reason=R.OWNER,
        recipient_terminal="term_lead-a",
    )
    assert result.routed[0].assignment == to("lead-a")


@pytest.mark.parametrize("fault", FAULTS)
def test_an_unhealthy_owner_hands_its_incident_to_a_peer(fault: LeadState) -> None:
    """An owner in any fault state: a healthy peer holds the incident on its behalf."""
    got = assigned(incident(), leads=[facts("lead-a", fault), B])
    assert got == to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")


def test_an_owner_health_no_longer_knows_counts_as_unhealthy() -> None:
    """A retired owner is not guessed back: a peer takes the incident for it."""
    got = assigned(incident(owner="lead-gone"), leads=[B])
    assert got == to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-gone")


def test_a_member_incident_without_owner_goes_to_a_person_even_with_healthy_leads() -> None:
    """No exact owner: no lead is guessed (Figure 2), the person gets it."""
    result = route([incident(owner=None)], [A, B])
    [routed] = result.routed
    assert routed.assignment == human(R.HUMAN_NO_OWNER)
    assert result.effects == (RouteToHuman(incident=routed, generation=1, reason=R.HUMAN_NO_OWNER),)


def test_a_down_control_link_goes_to_a_person() -> None:
    """With the herdr link down no lead can be pushed: a person, whatever the leads' health."""
    got = assigned(incident("herdr", scope=Scope.CONTROL_LINK, owner=None), leads=[A, B])
    assert got == human(R.HUMAN_CONTROL_LINK_DOWN)


@pytest.mark.parametrize(
    ("case", "by"),
    [
        (incident(), "lead-a"),  # healthy owner
        (incident(owner=None), None),  # no owner
        (incident("lead-a", scope=Scope.LEAD, owner=None), "lead-a"),  # about a lead
        (incident("p", scope=Scope.PROFILE, owner=None), None),  # fleet-wide
    ],
)
def test_while_publication_fails_every_incident_goes_to_a_person(
    case: Incident, by: str | None
) -> None:
    """Health records cannot reach any lead's inbox (§10.1): a person, on behalf of the lead the
    incident belongs to or is about, however healthy the leads are."""
    result = route([case], [A, B], publication_failed=True)
    [routed] = result.routed
    assert routed.assignment == human(R.HUMAN_PUBLICATION_FAILED, by=by)
    assert [type(e) for e in result.effects] == [RouteToHuman]


def test_an_instance_incident_always_goes_to_a_person() -> None:
    """INSTANCE_DOWN (issue 24): a person, whatever leads are healthy and even while publication
    fails; no lead can act on a fleetd that is gone."""
    for failed in (False, True):
        got = route(
            [incident("host-b", scope=Scope.INSTANCE, owner=None)],
            [A, B],
            publication_failed=failed,
        )
        [routed] = got.routed
        assert routed.assignment == human(R.HUMAN_INSTANCE_DOWN)


def test_a_down_control_link_stays_its_own_reason_while_publication_fails() -> None:
    """The link incident keeps its plan: a person, because the link is down."""
    got = route(
        [incident("herdr", scope=Scope.CONTROL_LINK, owner=None)], [A, B], publication_failed=True
    ).routed[0]
    assert got.assignment == human(R.HUMAN_CONTROL_LINK_DOWN)


def test_when_publication_recovers_the_owner_takes_its_incident_back() -> None:
    """The person held it while the inbox refused records; the healthy owner gets it back in a
    new generation, superseding the person's assignment (whose undelivered events are then
    cancelled by the runtime)."""
    [held] = route([incident()], [A, B], publication_failed=True).routed
    assert route([held], [A, B], publication_failed=True).routed == ()  # pinned, said once
    result = route([held], [A, B])
    [back] = result.routed
    assert back.assignment == to("lead-a", generation=2)
    assert held.assignment is not None
    assert result.effects[0] == SupersedeAssignment(incident=back, previous=held.assignment)


def test_a_lead_incident_goes_to_a_peer_never_to_its_subject() -> None:
    """The lead an incident is about never receives it, however healthy it looks."""
    got = assigned(incident("lead-a", scope=Scope.LEAD, owner=None), leads=[A, B])
    assert got == to("lead-b", R.PEER_LEAD_INCIDENT, on_behalf_of="lead-a")


def test_a_sole_lead_incident_goes_to_a_person() -> None:
    """One lead and no peer is normal (§7.6): its own fault goes to a person, nothing else."""
    result = route([incident("lead-a", scope=Scope.LEAD, owner=None)], [A])
    [routed] = result.routed
    assert routed.assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-a")
    assert [type(e) for e in result.effects] == [RouteToHuman]


@pytest.mark.parametrize(("scope", "subject"), [(Scope.PROFILE, "opus"), (Scope.INBOX, "old-key")])
def test_a_fleet_wide_incident_with_no_owner_goes_to_a_peer(scope: Scope, subject: str) -> None:
    """A profile's MUTE rate or a key no lead owns: a healthy lead, on nobody's behalf."""
    got = assigned(incident(subject, scope=scope, owner=None), leads=[B, A])
    assert got == to("lead-a", R.PEER_NO_OWNER)


def test_an_inbox_incident_of_an_unhealthy_lead_skips_that_lead() -> None:
    """A decode failure on lead-a's own key, lead-a unreachable: a peer, never lead-a."""
    inbox = incident("lead-a", scope=Scope.INBOX, owner="lead-a")
    got = assigned(inbox, leads=[facts("lead-a", LS.LEAD_UNREACHABLE, raw=None), B])
    assert got == to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")


# --- the peer set --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "excluded",
    [
        facts("lead-b", present=False, raw=None),  # absent from the latest successful list
        facts("lead-b", LS.LEAD_STATUS_UNKNOWN, raw=LiveStatus.UNKNOWN),
        facts("lead-b", raw=LiveStatus.UNKNOWN),  # raw UNKNOWN, whatever the state says
        facts("lead-b", retiring=True),  # gone from the identity map, inside its grace
        *(facts("lead-b", fault) for fault in FAULTS),
    ],
)
def test_excluded_leads_are_never_chosen(excluded: LeadFacts) -> None:
    """Absent, raw-unknown, retiring and unhealthy leads are no peers: the person gets it."""
    got = assigned(incident(), leads=[facts("lead-a", LS.LEAD_UNREACHABLE), excluded])
    assert got == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-a")


@pytest.mark.parametrize("raw", [LiveStatus.WORKING, LiveStatus.BLOCKED])
def test_a_reachable_working_peer_may_be_chosen(raw: LiveStatus) -> None:
    """A working (or blocked) peer is reachable: it is chosen; its push waits for its prompt."""
    got = assigned(
        incident(),
        leads=[facts("lead-a", LS.LEAD_UNREACHABLE), facts("lead-b", LS.LEAD_WORKING, raw=raw)],
    )
    assert got == to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")


def test_the_peer_with_fewest_foreign_incidents_wins_before_the_name() -> None:
    """lead-b holds two foreign incidents, lead-c none: lead-c, despite its later name.

    Incidents a lead holds as their owner are not foreign and do not count.
    """
    down = facts("lead-a", LS.LEAD_UNREACHABLE)
    held = [
        incident(f"s-{n}", owner="lead-x", assignment=to("lead-b", R.PEER_OWNER_UNHEALTHY))
        for n in (1, 2)
    ]
    own = [incident(f"s-c{n}", owner="lead-c", assignment=to("lead-c")) for n in range(5)]
    result = route([*held, *own, incident("s-new")], [down, B, C])
    [routed] = result.routed
    assert routed.recipient_lead == "lead-c"
    assert dict(result.load) == {"lead-a": 0, "lead-b": 2, "lead-c": 1}


def test_equal_loads_go_by_lead_name_and_new_incidents_spread() -> None:
    """Ties break by name; each assignment counts, so four incidents split two and two."""
    down = facts("lead-a", LS.LEAD_UNREACHABLE)
    result = route([incident(f"s-{n}") for n in range(4)], [C, down, B])
    recipients = [i.recipient_lead for i in result.routed]
    assert recipients == ["lead-b", "lead-c", "lead-b", "lead-c"]
    assert [i.subject for i in result.routed] == ["s-0", "s-1", "s-2", "s-3"]


def test_lead_names_must_be_unique() -> None:
    """Two facts for one name would make the choice depend on input order: refused."""
    with pytest.raises(ValueError, match="one LeadFacts per lead name"):
        route([], [A, facts("lead-a", LS.LEAD_WORKING)])


# --- pinning and reassignment --------------------------------------------------------------------

PEER_B = to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")


@pytest.mark.parametrize(
    "pinned",
    [
        facts("lead-b"),
        facts("lead-b", present=False, raw=None),  # one missed sighting
        facts("lead-b", LS.LEAD_STATUS_UNKNOWN, raw=LiveStatus.UNKNOWN),
        facts("lead-b", retiring=True),  # not retired yet
    ],
)
def test_a_pinned_peer_keeps_the_incident(pinned: LeadFacts) -> None:
    """Only a fault or retirement moves an incident: not load, absence or ambiguity."""
    held = incident(assignment=PEER_B)
    result = route([held], [facts("lead-a", LS.LEAD_UNREACHABLE), pinned, facts("lead-0")])
    assert result.routed == ()
    assert result.effects == ()
    assert result.load["lead-b"] == 1


@pytest.mark.parametrize("gone", ["fault", "retired"])
def test_a_peer_that_fails_or_retires_is_superseded(gone: str) -> None:
    """The next generation goes to another peer; the old recipient is named as superseded."""
    held = incident(assignment=PEER_B)
    leads = [facts("lead-a", LS.LEAD_UNREACHABLE), C]
    if gone == "fault":
        leads.append(facts("lead-b", LS.LEAD_UNRESPONSIVE))
    result = route([held], leads)
    [routed] = result.routed
    assert routed.assignment == replace(PEER_B, recipient="lead-c", generation=2)
    supersede, publish = result.effects
    assert supersede == SupersedeAssignment(incident=routed, previous=PEER_B)
    assert isinstance(publish, PublishHealthRecord)
    assert (publish.recipient_lead, publish.generation, publish.on_behalf_of) == (
        "lead-c",
        2,
        "lead-a",
    )


@pytest.mark.parametrize(
    ("peer", "holder", "generation"),
    [
        (facts("lead-b"), "lead-b", 3),  # the pinned peer is healthy: it keeps the incident
        (facts("lead-b", present=False, raw=None), "lead-b", 3),  # one missed sighting
        (facts("lead-b", LS.LEAD_STATUS_UNKNOWN, raw=LiveStatus.UNKNOWN), "lead-b", 3),
        (facts("lead-b", retiring=True), "lead-b", 3),  # not retired yet
        (facts("lead-b", LS.LEAD_UNRESPONSIVE), "lead-a", 4),  # the peer failed
        (facts("lead-b", LS.LEAD_UNREACHABLE), "lead-a", 4),
        (None, "lead-a", 4),  # the peer retired
    ],
)
def test_a_recovered_owner_takes_its_incident_back_only_when_the_peer_fails_or_retires(
    peer: LeadFacts | None, holder: str, generation: int
) -> None:
    """§7.4: a peer holding an incident keeps it until it is unhealthy or retires; the owner
    getting healthy again does not pull it back while the peer holds it."""
    held = replace(PEER_B, generation=3)
    result = route([incident(assignment=held)], [A, C] if peer is None else [A, peer, C])
    after = result.routed[0].assignment if result.routed else held
    assert after is not None
    assert (after.recipient, after.generation) == (holder, generation)
    if holder == "lead-a":
        assert after == to("lead-a", generation=4)
        assert result.effects[0] == SupersedeAssignment(incident=result.routed[0], previous=held)
    else:
        assert result.effects == ()
        assert result.load["lead-b"] == 1  # still a foreign incident it holds


def test_a_recovered_owner_takes_its_incident_back_from_a_person() -> None:
    """A person held it because no lead could: the healthy owner now can, so it takes it."""
    held = human(R.HUMAN_NO_HEALTHY_LEAD, generation=2, by="lead-a")
    [routed] = route([incident(assignment=held)], [A, B]).routed
    assert routed.assignment == to("lead-a", generation=3)


def test_a_person_hands_over_to_a_peer_that_appears() -> None:
    """No peer at first: a person; once a peer is healthy, it takes over (generation 2)."""
    first = route([incident()], [facts("lead-a", LS.LEAD_UNREACHABLE)])
    [waiting] = first.routed
    assert waiting.assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-a")
    again = route(
        [waiting], [facts("lead-a", LS.LEAD_UNREACHABLE), facts("lead-b", present=False, raw=None)]
    )
    assert (again.routed, again.effects) == ((), ())  # still nobody: nothing said twice
    later = route([waiting], [facts("lead-a", LS.LEAD_UNREACHABLE), B])
    [taken] = later.routed
    assert taken.assignment == replace(PEER_B, generation=2)
    assert later.effects[0] == SupersedeAssignment(incident=taken, previous=waiting.assignment)


def test_fixed_human_routes_stay_put_without_effects() -> None:
    """No-owner and control-link incidents keep their person, tick after tick, silently."""
    kept = [
        incident(owner=None, assignment=human(R.HUMAN_NO_OWNER)),
        incident(
            "herdr",
            scope=Scope.CONTROL_LINK,
            owner=None,
            assignment=human(R.HUMAN_CONTROL_LINK_DOWN),
        ),
    ]
    result = route(kept, [A, B])
    assert (result.routed, result.effects) == ((), ())


def test_generations_count_every_recipient() -> None:
    """owner, peer, person, peer, owner (once that peer fails): generations 1 to 5, one
    recipient each."""
    steps = [
        [A, B],
        [facts("lead-a", LS.LEAD_UNREACHABLE), B],
        [facts("lead-a", LS.LEAD_UNREACHABLE), facts("lead-b", LS.LEAD_UNRESPONSIVE)],
        [facts("lead-a", LS.LEAD_UNREACHABLE), C],
        [A, facts("lead-c", LS.LEAD_STALL_SUSPECTED)],
    ]
    current, seen = incident(), []
    for leads in steps:
        [current] = route([current], leads).routed
        assert current.assignment is not None
        seen.append((current.assignment.generation, current.assignment.recipient))
    assert seen == [(1, "lead-a"), (2, "lead-b"), (3, None), (4, "lead-c"), (5, "lead-a")]


# --- values --------------------------------------------------------------------------------------


def test_assignments_name_one_recipient_exactly_for_a_lead_route() -> None:
    """A lead route names its lead, a human route none, and generations start at 1."""
    with pytest.raises(ValueError, match="names its recipient"):
        Assignment(route=Route.LEAD, recipient=None, reason=R.OWNER, generation=1)
    with pytest.raises(ValueError, match="names its recipient"):
        Assignment(route=Route.HUMAN, recipient="a", reason=R.HUMAN_NO_OWNER, generation=1)
    with pytest.raises(ValueError, match="starts at 1"):
        Assignment(route=Route.LEAD, recipient="a", reason=R.OWNER, generation=0)


def test_an_unrouted_incident_has_no_recipient_route_or_reason() -> None:
    """Before its first routing pass an incident reads as generation 0 with nobody."""
    fresh = incident()
    assert (fresh.recipient_lead, fresh.route, fresh.routing_reason, fresh.routing_generation) == (
        None,
        None,
        None,
        0,
    )
    routed = incident(assignment=PEER_B)
    assert (routed.route, routed.routing_reason, routed.routing_generation) == (
        Route.LEAD,
        R.PEER_OWNER_UNHEALTHY,
        1,
    )


def test_the_book_stores_only_open_incidents() -> None:
    """Routing results replace open incidents; an unknown one is a bug, refused."""
    book = IncidentBook({}, {})
    opened = book.open_new(incident().key, now=T0, target=None, owner_lead="lead-a")
    book.store([replace(opened, assignment=to("lead-a"))])
    assert book.open[opened.key].recipient_lead == "lead-a"
    with pytest.raises(ValueError, match="no open incident"):
        book.store([incident("s-9")])


def test_foreign_assignments_are_the_incidents_a_lead_holds_for_others() -> None:
    """Held for another lead or for nobody counts; an owner's own incident does not."""
    mine = incident("s-1", assignment=to("lead-a"))
    theirs = incident("s-2", owner="lead-b", assignment=to("lead-a", R.PEER_OWNER_UNHEALTHY))
    fleet = incident(
        "opus", scope=Scope.PROFILE, owner=None, assignment=to("lead-a", R.PEER_NO_OWNER)
    )
    nobody = incident("s-3", owner=None, assignment=human(R.HUMAN_NO_OWNER))
    assert foreign_assignments([mine, theirs, fleet, nobody]) == {"lead-a": [theirs, fleet]}


def test_a_routed_copy_changes_only_the_assignment() -> None:
    """``Incident.routed`` is ``replace(assignment=...)``: every other field is carried over."""
    full = replace(
        incident(assignment=PEER_B),
        target="m1",
        committed_work_at_risk=True,
        evidence=(("ticket", "t-1"),),
    )
    assert full.routed(to("lead-c")) == replace(full, assignment=to("lead-c"))
