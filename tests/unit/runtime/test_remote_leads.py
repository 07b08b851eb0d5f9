"""The leads another instance published, as routing reads them (issue 24): from a summary as
stored, only leads with a health this build knows; nothing from a summary it cannot read."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from fleetd.health import LeadState, LiveStatus, RemoteLead
from fleetd.health.instances import Sighting
from fleetd.runtime.fleet_summary import summarize
from fleetd.runtime.instances import RemotePeers, published_leads
from tests.unit.runtime.test_fleet_summary import _view

T0 = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
SEEN = Sighting(
    last_seen=T0 - timedelta(hours=9),  # host-a's clock: never compared with this one's
    since=T0 - timedelta(seconds=7),
    every=timedelta(seconds=15),
)


def _text(view: dict[str, object]) -> str:
    return summarize(view, instance="host-a").model_dump_json(by_alias=True)


def test_a_published_summary_gives_its_leads_with_instance_and_renewal() -> None:
    """A lead with a health comes back as a value: its state, herdr status, the foreign
    incidents its instance assigned it, the instance, when it was last seen renewing (this
    instance's clock) and its interval; a lead
    no tick has judged yet (no health: its instance just started or was taken over) comes back
    LEAD_STATUS_UNKNOWN — no candidate, but what is pinned to it stays (issue 24: a take-over
    paged a person for an incident its lead held)."""
    leads = published_leads("host-a", SEEN, _text(_view([], [])))
    assert leads == (
        RemoteLead(
            instance="host-a",
            name="lead",
            state=LeadState.LEAD_IDLE,
            raw_status=LiveStatus.IDLE,
            assigned=1,
            last_seen=SEEN.since,
            renew_every=SEEN.every,
        ),
        RemoteLead(
            instance="host-a",
            name="lead-b",
            state=LeadState.LEAD_STATUS_UNKNOWN,
            raw_status=None,
            assigned=0,
            last_seen=SEEN.since,
            renew_every=SEEN.every,
        ),
    )
    assert leads[0].peer_candidate
    assert leads[1].healthy
    assert not leads[1].peer_candidate


def test_a_lead_whose_state_or_status_this_build_does_not_know_is_left_out() -> None:
    """A newer build's lead state or herdr status is not guessed: that lead is no candidate;
    an unlisted lead (no herdr status) keeps ``None``."""
    view = _view([], [])
    first, second = view["leads"]
    second["health"] = dict(first["health"], state="LEAD_FROM_A_NEWER_BUILD")
    view["leads"] = [
        first,
        second,
        dict(first, name="lead-c", liveStatus="dreaming"),
        dict(first, name="lead-d", liveStatus=None),
    ]
    leads = published_leads("host-a", SEEN, _text(view))
    assert [(lead.name, lead.raw_status) for lead in leads] == [
        ("lead", LiveStatus.IDLE),
        ("lead-d", None),
    ]


def test_nothing_from_a_summary_this_build_cannot_read() -> None:
    """Another summary version, or text that is not a summary: no leads, no error."""
    other = json.loads(_text(_view([], [])))
    other["version"] = 2
    assert published_leads("host-a", SEEN, json.dumps(other)) == ()
    assert published_leads("host-a", SEEN, "{not json") == ()
    assert published_leads("host-a", SEEN, '{"version": 1, "leads": "many"}') == ()


def test_remote_peers_hand_routing_the_values_and_the_registry_their_names() -> None:
    """What the instances loop kept: the values for routing, the names for the inbox registry."""
    peers = RemotePeers()
    assert (peers.leads(), peers.names()) == ((), frozenset())
    peers.kept = published_leads("host-a", SEEN, _text(_view([], [])))
    assert [lead.name for lead in peers.leads()] == ["lead", "lead-b"]
    assert peers.names() == {"lead", "lead-b"}


def test_the_leads_of_an_instance_not_yet_seen_to_renew_keep_pins_but_are_no_peers() -> None:
    """A row read once (this instance just started; it may be a dead instance's): its leads
    come back ``LEAD_STATUS_UNKNOWN`` — what is pinned to them stays, none is chosen anew."""
    once = Sighting(last_seen=SEEN.last_seen, since=SEEN.since, every=SEEN.every, renewed=False)
    leads = published_leads("host-a", once, _text(_view([], [])))
    assert [lead.state for lead in leads] == [LeadState.LEAD_STATUS_UNKNOWN] * 2
    assert all(lead.healthy and not lead.peer_candidate for lead in leads)
