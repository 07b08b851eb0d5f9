"""Invariants of ``route()`` over generated incidents, leads and prior assignments (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.health import (
    Assignment,
    Incident,
    IncidentKey,
    LeadFacts,
    LeadState,
    LiveStatus,
    PublishHealthRecord,
    Route,
    RouteToHuman,
    Routing,
    RoutingReason,
    Scope,
    SupersedeAssignment,
    route,
)
from fleetd.health.states import (
    ControlLinkState,
    HealthStateName,
    InboxState,
    InstanceState,
    MemberState,
    spec_of,
)
from tests.unit.health.health_fleet import T0

NAMES = [f"lead-{c}" for c in "abcdefgh"]
_STATES: dict[Scope, HealthStateName] = {
    Scope.MEMBER: MemberState.GONE,
    Scope.LEAD: LeadState.LEAD_UNREACHABLE,
    Scope.CONTROL_LINK: ControlLinkState.CONTROL_LINK_DOWN,
    Scope.INBOX: InboxState.INBOX_DECODE_FAILED,
    Scope.PROFILE: MemberState.MUTE,
    Scope.INSTANCE: InstanceState.INSTANCE_DOWN,
}


@st.composite
def lead_facts(draw: st.DrawFn) -> list[LeadFacts]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    return [
        LeadFacts(
            name=name,
            terminal_id=draw(st.sampled_from([None, f"term_{name}"])),
            state=draw(st.sampled_from(list(LeadState))),
            raw_status=draw(st.sampled_from([None, *LiveStatus])),
            present=draw(st.booleans()),
            retiring=draw(st.booleans()),
        )
        for name in names
    ]


@st.composite
def assignments(draw: st.DrawFn) -> Assignment | None:
    generation = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["none", "lead", "human"]))
    if kind == "none":
        return None
    by = draw(st.sampled_from([None, *NAMES[:3]]))
    if kind == "human":
        reason = draw(st.sampled_from([r for r in RoutingReason if r.startswith("human")]))
        return Assignment(
            route=Route.HUMAN, recipient=None, reason=reason, generation=generation, on_behalf_of=by
        )
    reason = draw(st.sampled_from([r for r in RoutingReason if not r.startswith("human")]))
    return Assignment(
        route=Route.LEAD,
        recipient=draw(st.sampled_from([*NAMES, "lead-retired"])),
        reason=reason,
        generation=generation,
        on_behalf_of=by,
    )


@st.composite
def incidents(draw: st.DrawFn) -> list[Incident]:
    made: dict[IncidentKey, Incident] = {}
    for n in range(draw(st.integers(0, 25))):
        scope = draw(st.sampled_from(list(Scope)))
        subjects = {Scope.MEMBER: f"s-{n % 5}", Scope.PROFILE: "opus", Scope.CONTROL_LINK: "herdr"}
        subject = subjects.get(scope) or draw(st.sampled_from([*NAMES[:4], "old-key"]))
        owner = None
        if scope is Scope.MEMBER:
            owner = draw(st.sampled_from([None, *NAMES[:4], "lead-retired"]))
        elif scope is Scope.INBOX:
            owner = draw(st.sampled_from([None, subject]))
        state = _STATES[scope]
        key = IncidentKey(scope=scope, subject=subject, state=state, cause="c")
        made[key] = Incident(
            id=f"inc_{n}",
            key=key,
            generation=1,
            target=None,
            severity=spec_of(state).severity,
            certainty=spec_of(state).certainty,
            opened_at=T0,
            owner_lead=owner,
            assignment=draw(assignments()),
        )
    return list(made.values())


def after(before: list[Incident], result: Routing) -> list[Incident]:
    routed = {incident.id: incident for incident in result.routed}
    return [routed.get(incident.id, incident) for incident in before]


CASES = settings(max_examples=100, deadline=None)


@CASES
@given(incidents(), lead_facts(), st.randoms(use_true_random=False))
def test_routing_is_deterministic_and_independent_of_input_order(
    open_: list[Incident], leads: list[LeadFacts], rnd: random.Random
) -> None:
    """Shuffled incidents and leads give the very same assignments, effects and loads."""
    result = route(open_, leads)
    assert route(open_, leads) == result
    open_, leads = list(open_), list(leads)
    rnd.shuffle(open_)
    rnd.shuffle(leads)
    assert route(open_, leads) == result


@CASES
@given(incidents(), lead_facts())
def test_a_new_peer_is_never_the_subject_the_failed_owner_or_an_excluded_lead(
    open_: list[Incident], leads: list[LeadFacts]
) -> None:
    """A peer chosen now is present, known, idle or working, in the map, neither subject nor
    owner; a lead incident never reaches its own subject at all."""
    index = {facts.name: facts for facts in leads}
    result = route(open_, leads)
    for incident in result.routed:
        assignment = incident.assignment
        assert assignment is not None
        if assignment.reason.startswith("peer"):
            assert assignment.recipient is not None
            assert index[assignment.recipient].peer_candidate
            assert assignment.recipient not in (incident.subject, incident.owner_lead)
    for incident in after(open_, result):
        if incident.scope is Scope.LEAD:
            assert incident.recipient_lead != incident.subject


@CASES
@given(incidents(), lead_facts())
def test_each_reassignment_has_one_recipient_and_supersedes_the_previous_one(
    open_: list[Incident], leads: list[LeadFacts]
) -> None:
    """Every routed incident moves up one generation, with exactly one delivery effect, and a
    supersede effect naming its previous assignment when it had one; others stay untouched."""
    before = {incident.id: incident for incident in open_}
    result = route(open_, leads)
    deliveries = [e for e in result.effects if isinstance(e, PublishHealthRecord | RouteToHuman)]
    supersedes = [e for e in result.effects if isinstance(e, SupersedeAssignment)]
    assert [e.incident for e in deliveries] == list(result.routed)
    for effect in deliveries:
        incident = effect.incident
        assert incident.assignment is not None
        assert effect.generation == incident.assignment.generation
        prior = before[incident.id].assignment
        assert incident.assignment.generation == (prior.generation + 1 if prior else 1)
        recipient = effect.recipient_lead if isinstance(effect, PublishHealthRecord) else None
        assert recipient == incident.assignment.recipient
    assert [(e.incident, e.previous) for e in supersedes] == [
        (i, before[i.id].assignment) for i in result.routed if before[i.id].assignment is not None
    ]
    assert len({i.id for i in result.routed}) == len(result.routed)


@CASES
@given(incidents(), lead_facts())
def test_a_healthy_owner_holds_its_incidents_unless_a_healthy_peer_stands_in(
    open_: list[Incident], leads: list[LeadFacts]
) -> None:
    """An owner not in a fault state holds its incidents, except those a healthy peer already
    holds on its behalf (§7.4: pinned); nothing is left unassigned."""
    index = {facts.name: facts for facts in leads}
    healthy = {facts.name for facts in leads if facts.healthy}
    before = {incident.id: incident.assignment for incident in open_}
    for incident in after(open_, route(open_, leads)):
        assert incident.assignment is not None
        if incident.owner_lead not in healthy:
            continue
        prior = before[incident.id]
        pinned = (
            prior is not None
            and prior.reason is RoutingReason.PEER_OWNER_UNHEALTHY
            and prior.recipient in healthy
            and prior.recipient in index
        )
        assert incident.assignment.route is Route.LEAD
        if pinned:
            assert incident.assignment == prior
        else:
            assert incident.recipient_lead == incident.owner_lead


@CASES
@given(incidents(), lead_facts())
def test_a_second_pass_over_the_same_leads_changes_nothing(
    open_: list[Incident], leads: list[LeadFacts]
) -> None:
    """Assignments are pinned: with nothing new, routing again moves no incident."""
    settled = after(open_, route(open_, leads))
    again = route(settled, leads)
    assert (again.routed, again.effects) == ((), ())


@CASES
@given(incidents(), lead_facts())
def test_load_counts_the_foreign_incidents_each_lead_holds(
    open_: list[Incident], leads: list[LeadFacts]
) -> None:
    """The reported load is, per known lead, the incidents it holds for others."""
    result = route(open_, leads)
    expected = dict.fromkeys((facts.name for facts in leads), 0)
    for incident in after(open_, result):
        recipient = incident.recipient_lead
        if recipient is not None and recipient != incident.owner_lead:
            expected[recipient] += 1
    assert dict(result.load) == expected


@CASES
@given(
    st.lists(st.sampled_from(list(LeadState)), min_size=1, max_size=24),
    st.lists(st.booleans(), min_size=24, max_size=24),
)
def test_a_flapping_owner_never_raises_the_generation_while_the_peer_stays_healthy(
    owner_states: list[LeadState], owner_present: list[bool]
) -> None:
    """Whatever the owner does, tick after tick, once a healthy peer holds its incident the
    routing generation stays where it is (§7.4: reassign only if that peer fails or retires)."""
    peer = LeadFacts(
        name="lead-b",
        terminal_id="term_lead-b",
        state=LeadState.LEAD_IDLE,
        raw_status=LiveStatus.IDLE,
        present=True,
    )
    key = IncidentKey(scope=Scope.MEMBER, subject="s-1", state=MemberState.GONE, cause="c")
    current = Incident(
        id="inc_1",
        key=key,
        generation=1,
        target=None,
        severity=spec_of(key.state).severity,
        certainty=spec_of(key.state).certainty,
        opened_at=T0,
        owner_lead="lead-a",
    )
    held_by_peer_at: int | None = None
    for state, present in zip(owner_states, owner_present, strict=False):
        owner = LeadFacts(
            name="lead-a",
            terminal_id="term_lead-a",
            state=state,
            raw_status=LiveStatus.IDLE if present else None,
            present=present,
        )
        [current] = after([current], route([current], [owner, peer]))
        assignment = current.assignment
        assert assignment is not None
        if held_by_peer_at is not None:
            assert (assignment.recipient, assignment.generation) == ("lead-b", held_by_peer_at)
        elif assignment.recipient == "lead-b":
            held_by_peer_at = assignment.generation
    assert current.routing_generation <= 2
