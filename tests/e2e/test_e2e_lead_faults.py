"""What is and is not a lead fault, end to end (M4 §4.3–§4.4, §7.6; Unit 4 criteria 2, 14, 16).

A herdr that stops answering is the control link's fault, never a lead's. A lead missing from one
successful list keeps its state; missing from two while ping works, it is unreachable, and when
it is back the peer standing in for it keeps its incidents (§7.4: reassigned only if that peer
fails or retires) while the owner sees them in its own ``fleet_list``. With no healthy lead
left — always, for a sole lead — incidents go to the passive human leg: kept open, never a
restart, coverage ``partial`` everywhere.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.e2e.e2e_fleet import E2EFleet, start_e2e
from tests.e2e.lead_fleet import (
    HEALTH,
    fleet,
    healthz,
    incidents,
    lead_row,
    lifecycle_since,
    member_incident,
    metrics,
    poll,
    routing,
    sample,
    ticks,
)

HUMAN = (None, "human", "human_no_healthy_lead")


async def _owned_incident(e2e: E2EFleet, lead: object) -> str:
    """A member incident its owner has collected (so the owner stays healthy)."""
    sid = await member_incident(e2e, lead)
    await ticks(e2e, 1)
    assert {m["state"] for m in await poll(e2e, lead, "lead") if m["kind"] == "health"} == {
        "ERROR_ON_SCREEN",
        "MUTE",
    }
    return sid


async def test_an_unanswering_herdr_is_a_control_link_fault_and_never_a_lead_fault(
    tmp_path: Path,
) -> None:
    """herdr stops answering: the link goes down and its incident goes to a person; both leads
    keep their state and the member incident stays with its owner; nothing moves on recovery."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b")) as e2e,
        e2e.as_lead("lead") as lead,
    ):
        sid = await _owned_incident(e2e, lead)
        e2e.simulator.unresponsive = True
        health = e2e.service.health
        await e2e.until(lambda: str(health.state.link.state) == "CONTROL_LINK_DOWN")
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        assert listed["controlLink"]["state"] == "down"
        assert [lead_row(listed, n)["health"]["state"] for n in ("lead", "lead-b")] == [
            "LEAD_IDLE",
            "LEAD_IDLE",
        ]
        assert incidents(listed, subject="lead") == incidents(listed, subject="lead-b") == {}
        member = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(member) == ("lead", "lead", "owner", 1, None)
        [link] = [i for i in listed["incidents"] if i["scope"] == "control_link"]
        assert routing(link) == (None, "human", "human_control_link_down", 1, None)
        assert link["routing"]["outcome"] == "passive_no_sink"
        assert (await healthz(e2e))["components"]["controlLink"]["state"] == "down"
        assert sample(await metrics(e2e), "fleetd_control_link_up") == 0

        e2e.simulator.unresponsive = False
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        assert listed["controlLink"]["state"] == "up"
        assert [i for i in listed["incidents"] if i["scope"] == "control_link"] == []
        assert routing(incidents(listed, subject=sid)["ERROR_ON_SCREEN"])[3] == 1  # never moved
        assert str(health.state.leads["lead"].state) == "LEAD_IDLE"


async def test_a_lead_missing_from_one_list_keeps_its_state_from_two_is_unreachable(
    tmp_path: Path,
) -> None:
    """herdr's list misses the owner once (it still answers by name): nothing changes. Missed
    twice with ping working: LEAD_UNREACHABLE on absences alone, its member incident goes to the
    peer. Listed again: the peer keeps the incident (§7.4), is told nothing new, and the owner
    sees it, with its recipient, in its own fleet_list."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b")) as e2e,
        e2e.as_lead("lead") as lead,
        e2e.as_lead("lead-b") as peer,
    ):
        sid = await _owned_incident(e2e, lead)
        before = len(e2e.requests)
        e2e.simulator.unlist("lead")
        await ticks(e2e, 1)
        e2e.simulator.unlist("lead", unlisted=False)
        await ticks(e2e, 1)
        asked = [(r["method"], r["params"].get("target")) for r in e2e.requests[before:]]
        assert ("ping", None) in asked  # an expected lead missing: is herdr itself alive?
        assert ("agent.get", "lead") in asked  # and the lead, by name: found
        listed = await fleet(e2e)
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_IDLE"
        assert incidents(listed, subject="lead") == {}
        assert routing(incidents(listed, subject=sid)["ERROR_ON_SCREEN"])[:4] == (
            "lead",
            "lead",
            "owner",
            1,
        )

        e2e.simulator.unlist("lead")
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        [dead] = incidents(listed, subject="lead").values()
        assert dead["state"] == "LEAD_UNREACHABLE"
        member = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(member) == ("lead-b", "lead", "peer_owner_unhealthy", 2, "lead")
        records = {m["state"]: m for m in await poll(e2e, peer, "lead-b")}
        evidence = records["LEAD_UNREACHABLE"]["evidence"]
        assert evidence["consecutive_absences"] == "2"
        assert "lookup_error" not in evidence  # the absences alone, herdr reachable

        e2e.simulator.unlist("lead", unlisted=False)
        await ticks(e2e, 1)
        listed = await fleet(e2e)
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_IDLE"
        assert incidents(listed, subject="lead") == {}
        member = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(member) == ("lead-b", "lead", "peer_owner_unhealthy", 2, "lead")
        assert not [m for m in await poll(e2e, peer, "lead-b") if m["state"] == "SUPERSEDED"]
        own = await e2e.tool(lead, "fleet_list")
        assert routing(incidents(own, subject=sid)["ERROR_ON_SCREEN"])[:4] == (
            "lead-b",
            "lead",
            "peer_owner_unhealthy",
            2,
        )


async def test_a_lead_relaunched_by_hand_before_the_next_list_never_pages_its_peer(
    tmp_path: Path,
) -> None:
    """The owner's pane dies and fleetd's lookup finds nothing, but a person relaunches it under
    its name before the next list: that list is the newer fact, so no LEAD_UNREACHABLE, the
    incident stays with its owner and the peer is never told or prompted."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b")) as e2e,
        e2e.as_lead("lead") as lead,
    ):
        sid = await _owned_incident(e2e, lead)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 1)
        await e2e.advance(1)  # the tick's lookup of the missing lead has been answered
        e2e.simulator.start_by_hand("lead")
        await ticks(e2e, 2)
        assert e2e.service.health.state.leads["lead"].lookup_error == "agent_not_found"
        listed = await fleet(e2e)
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_IDLE"
        assert incidents(listed, subject="lead") == {}
        assert routing(incidents(listed, subject=sid)["ERROR_ON_SCREEN"])[:4] == (
            "lead",
            "lead",
            "owner",
            1,
        )
        assert e2e.prompts_to("lead-b") == []


async def test_with_no_healthy_lead_left_incidents_wait_for_a_person_and_coverage_is_partial(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two leads, both die in turn: the first one's incident goes to the survivor; once the
    survivor dies too, every incident moves to the passive human leg, kept open."""
    caplog.set_level(logging.WARNING, logger="fleetd")
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b")) as e2e,
        e2e.as_lead("lead") as lead,
    ):
        sid = await _owned_incident(e2e, lead)
        e2e.simulator.agent("lead-b").exit()
        await ticks(e2e, 2)
        [first] = incidents(await fleet(e2e), subject="lead-b").values()
        assert routing(first) == ("lead", "lead", "peer_lead_incident", 1, "lead-b")
        killed = len(e2e.requests)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        rows = {(i["subject"], i["state"]): i for i in listed["incidents"]}
        assert routing(rows["lead-b", "LEAD_UNREACHABLE"]) == (*HUMAN, 2, "lead-b")
        assert routing(rows["lead", "LEAD_UNREACHABLE"]) == (*HUMAN, 1, "lead")
        assert routing(rows[sid, "ERROR_ON_SCREEN"]) == (*HUMAN, 2, "lead")
        assert {i["routing"]["outcome"] for i in listed["incidents"]} == {"passive_no_sink"}
        assert {
            lead_row(listed, n)["health"]["assignedForeignIncidents"] for n in ("lead", "lead-b")
        } == {0}
        assert listed["healthCoverage"]["status"] == "partial"
        assert listed["healthCoverage"]["humanEscalation"] == "unavailable"
        assert (await healthz(e2e))["components"]["fleetHealth"]["status"] == "partial"
        assert lifecycle_since(e2e, killed) == []
    passive = [r.getMessage() for r in caplog.records if "no lead can act" in r.getMessage()]
    assert len(passive) == len(rows)  # one WARN per incident handed to the passive leg
