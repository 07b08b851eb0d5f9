"""``route()`` with leads on other hosts (issue 24): peers of last resort, same rules, pinned."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetd.health import (
    LeadState,
    LiveStatus,
    PublishHealthRecord,
    RemoteLead,
    RouteToHuman,
    Scope,
    SupersedeAssignment,
    route,
)
from tests.unit.health.health_fleet import T0, Run, live
from tests.unit.health.test_health_routing import FAULTS, R, facts, human, incident, to

LS = LeadState


def remote(
    name: str,
    instance: str = "host-b",
    *,
    state: LeadState = LS.LEAD_IDLE,
    raw: LiveStatus | None = LiveStatus.IDLE,
    assigned: int = 0,
) -> RemoteLead:
    return RemoteLead(
        instance=instance,
        name=name,
        state=state,
        raw_status=raw,
        assigned=assigned,
        last_seen=T0,
        renew_every=timedelta(seconds=30),
    )


DEAD_A = facts("lead-a", LS.LEAD_UNREACHABLE)


def test_a_dead_owner_with_no_peer_here_hands_its_incident_to_a_lead_on_another_host() -> None:
    """The only healthy lead of the team runs on another host: it gets the record, under its own
    inbox key, named with its instance (no terminal: this instance does not know it)."""
    result = route([incident()], [DEAD_A], remote=[remote("lead-r")])
    [routed] = result.routed
    assert routed.assignment == to("lead-r", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")
    assert result.effects == (
        PublishHealthRecord(
            recipient_lead="lead-r",
            incident=routed,
            generation=1,
            reason=R.PEER_OWNER_UNHEALTHY,
            on_behalf_of="lead-a",
            recipient_terminal=None,
            recipient_instance="host-b",
        ),
    )


def test_a_healthy_peer_here_wins_over_any_remote_lead() -> None:
    """Local peers first: a remote lead with fewer assigned incidents is not chosen while a lead
    of this instance can take the incident."""
    busy_b = [incident(f"s-{n}", assignment=to("lead-b", R.OWNER), owner="lead-b") for n in (1, 2)]
    result = route(
        [incident(), *busy_b],
        [DEAD_A, facts("lead-b")],
        remote=[remote("lead-r", assigned=0)],
    )
    [routed] = result.routed
    assert routed.assignment == to("lead-b", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")
    [published] = result.effects
    assert isinstance(published, PublishHealthRecord)
    assert published.recipient_instance is None
    assert published.recipient_terminal == "term_lead-b"


def test_remote_leads_are_chosen_by_fewest_assigned_then_instance_then_name() -> None:
    """Fewest foreign incidents (as its own instance counts them, plus this pass's), then the
    smaller instance name, then the smaller lead name."""
    leads = [
        remote("lead-z", "host-c", assigned=1),
        remote("lead-y", "host-b", assigned=1),
        remote("lead-x", "host-b", assigned=2),
        remote("lead-w", "host-c", assigned=0),
    ]
    incidents = [incident(f"s-{n}") for n in range(5)]
    result = route(incidents, [DEAD_A], remote=leads)
    got = [i.recipient_lead for i in result.routed]
    # w (0) first; then y and z tie at 1 (host-b < host-c); w is at 1 too after its pick
    assert got == ["lead-w", "lead-y", "lead-w", "lead-z", "lead-x"]


def test_pinned_remote_incidents_count_toward_that_remote_leads_load() -> None:
    """An incident this instance already pinned on a remote lead counts toward its load, so a
    new incident goes to the other remote lead."""
    pinned = incident("s-0", assignment=to("lead-r", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a"))
    result = route([pinned, incident("s-1")], [DEAD_A], remote=[remote("lead-r"), remote("lead-s")])
    [routed] = result.routed
    assert routed.recipient_lead == "lead-s"


@pytest.mark.parametrize(
    ("state", "raw"),
    [
        *((fault, LiveStatus.IDLE) for fault in FAULTS),
        (LS.LEAD_STATUS_UNKNOWN, LiveStatus.IDLE),
        (LS.LEAD_IDLE, LiveStatus.UNKNOWN),
        (LS.LEAD_IDLE, None),
    ],
)
def test_a_remote_lead_that_is_not_a_peer_candidate_is_never_chosen(
    state: LeadState, raw: LiveStatus | None
) -> None:
    """The §7.4 exclusions hold for remote leads: fault states, raw UNKNOWN, status unknown or
    absent leave the incident with a person."""
    got = route([incident()], [DEAD_A], remote=[remote("lead-r", state=state, raw=raw)])
    [routed] = got.routed
    assert routed.assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-a")


def test_a_lead_incident_never_goes_to_its_subject_even_when_listed_remotely() -> None:
    """The subject and the failed owner are excluded by name wherever the lead is listed."""
    about = incident("lead-r", scope=Scope.LEAD, owner=None)
    got = route([about], [], remote=[remote("lead-r")])
    assert isinstance(got.effects[0], RouteToHuman)
    got = route([incident(owner="lead-r")], [], remote=[remote("lead-r", state=LS.LEAD_IDLE)])
    # the owner itself is listed healthy elsewhere but is no peer of its own incident
    assert got.routed[0].assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-r")


def test_a_name_this_instance_serves_is_judged_by_its_own_evidence() -> None:
    """A remote listing of a lead this instance serves does not make it a candidate: the local
    evidence (dead here) wins, and a name two instances list is the smaller instance's."""
    got = route([incident("s-1", owner="lead-q")], [DEAD_A], remote=[remote("lead-a")])
    assert got.routed[0].assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-q")
    twice = [remote("lead-r", "host-c"), remote("lead-r", "host-b", state=LS.LEAD_UNREACHABLE)]
    got = route([incident()], [DEAD_A], remote=twice)
    assert got.routed[0].assignment == human(R.HUMAN_NO_HEALTHY_LEAD, by="lead-a")


def test_a_remote_recipient_stays_pinned_while_healthy_even_when_a_local_peer_recovers() -> None:
    """§7.4 pinning: once a remote lead holds the incident, a lead here turning healthy does not
    pull it back; nothing is routed again."""
    held = incident(assignment=to("lead-r", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a"))
    got = route([held], [DEAD_A, facts("lead-b")], remote=[remote("lead-r")])
    assert got.routed == ()
    assert got.effects == ()


def test_a_remote_recipient_its_instance_has_not_judged_yet_keeps_the_incident() -> None:
    """Its instance was just taken over: the new holder publishes the lead before any tick has
    judged it (LEAD_STATUS_UNKNOWN, no herdr status). The incident stays pinned, with no new
    generation and no page."""
    held = incident(assignment=to("lead-r", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a"))
    unjudged = remote("lead-r", state=LS.LEAD_STATUS_UNKNOWN, raw=None)
    got = route([held], [DEAD_A], remote=[unjudged])
    assert (got.routed, got.effects) == ((), ())


@pytest.mark.parametrize("listed", [False, True])
def test_a_remote_recipient_that_fails_or_vanishes_is_replaced_with_a_new_generation(
    listed: bool,
) -> None:
    """Unhealthy on its instance, or gone from the live instances' leads (its instance down):
    the incident moves on, generation + 1, the old assignment superseded."""
    prior = to("lead-r", R.PEER_OWNER_UNHEALTHY, on_behalf_of="lead-a")
    held = incident(assignment=prior)
    others = [remote("lead-r", state=LS.LEAD_UNRESPONSIVE)] if listed else []
    got = route([held], [DEAD_A, facts("lead-b")], remote=others)
    [routed] = got.routed
    assert routed.assignment == to(
        "lead-b", R.PEER_OWNER_UNHEALTHY, generation=2, on_behalf_of="lead-a"
    )
    assert got.effects[0] == SupersedeAssignment(incident=routed, previous=prior)


# --- through decide: the instance's liveness is judged at the tick's time -------------------


@pytest.mark.parametrize(
    ("silent", "every", "expected"),
    [(60, 30, "lead-r"), (61, 30, None), (120, 60, "lead-r"), (121, 60, None), (31, 15, None)],
)
def test_decide_never_picks_a_lead_of_a_down_instance(
    silent: int, every: int, expected: str | None
) -> None:
    """The sole local lead dies; a remote lead whose instance was seen renewing within two of
    *its own* intervals takes its incident (this instance's interval is 30 s), and one whose
    instance has been silent longer is never picked."""
    run = Run()
    run.tick(live(with_lead=True))
    run.tick(live(with_lead=False))
    other = RemoteLead(
        instance="host-b",
        name="lead-r",
        state=LS.LEAD_IDLE,
        raw_status=LiveStatus.IDLE,
        assigned=0,
        last_seen=run.now + timedelta(seconds=30) - timedelta(seconds=silent),
        renew_every=timedelta(seconds=every),
    )
    run.tick(live(with_lead=False), remote_leads=[other])
    assert run.lead() is LS.LEAD_UNREACHABLE
    [opened] = run.state.open_incidents()
    assert opened.recipient_lead == expected, silent
