"""fleet_list v1: each field in one place; a lead sees its own part, the operator the fleet."""

from __future__ import annotations

from pathlib import Path

from fleetd.api.tools import Caller, Role
from fleetd.testing import TestFleet, build_test_fleet, sample_document

LEAD = Caller(role=Role.LEAD, name="lead")
LEAD_B = Caller(role=Role.LEAD, name="lead-b")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")
_PEER_FIELDS = {"name", "agent", "liveStatus", "health"}


async def _fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True, "leadUnresponsiveAfterSeconds": 120}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    return fleet


async def _step(fleet: TestFleet, seconds: float = 31) -> None:
    fleet.clock.advance(seconds)
    await fleet.service.push.push_once()
    await fleet.service.health.tick()


async def _stranded_for_lead_b(fleet: TestFleet) -> tuple[str, str]:
    """One member each; lead-b leaves its member's reply uncollected until it is stranded."""
    own = (await fleet.ok("fleet_spawn", LEAD, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(own))
    other = (await fleet.ok("fleet_spawn", LEAD_B, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(other))
    await fleet.ok("fleet_send", LEAD_B, target=other, prompt="x")
    await fleet.ok("fleet_reply", fleet.member(other), content="done")
    for _ in range(10):
        await _step(fleet)
    await fleet.ok("fleet_poll", LEAD)  # lead keeps its own inbox empty
    return str(own), str(other)


async def test_a_lead_sees_its_own_members_and_no_other_leads(tmp_path: Path) -> None:
    """Members and herdr agents of another lead stay hidden; of a peer lead only its health."""
    fleet = await _fleet(tmp_path)
    own, other = await _stranded_for_lead_b(fleet)
    everything = await fleet.ok("fleet_list", OPERATOR)
    names = {m["sessionId"]: m["name"] for m in everything["members"]}
    assert set(names) == {own, other}
    listed = await fleet.ok("fleet_list", LEAD)
    assert [m["sessionId"] for m in listed["members"]] == [own]
    agents = {a["name"] for a in listed["agents"]}
    assert names[own] in agents
    assert names[other] not in agents
    assert {"lead", "lead-b"} <= agents
    assert {names[own], names[other], "lead", "lead-b"} <= {a["name"] for a in everything["agents"]}
    rows = {row["name"]: row for row in listed["leads"]}
    assert set(rows["lead-b"]) == _PEER_FIELDS
    assert rows["lead-b"]["health"]["state"] == "LEAD_UNRESPONSIVE"
    assert "foreignIncidents" not in rows["lead-b"]["health"]  # a peer's holdings: count only
    assert rows["lead-b"]["health"]["assignedForeignIncidents"] == 0
    assert rows["lead"]["health"]["assignedForeignIncidents"] == 2  # it holds lead-b's two
    foreign = rows["lead"]["health"]["foreignIncidents"]
    # the member's incident went to its owner lead-b first, then to the peer: generation 2
    assert {i["subject"]: i["routingGeneration"] for i in foreign} == {other: 2, "lead-b": 1}
    assert {"inboxDepth", "nudgesForHead", "nudgeCapReached"} <= set(rows["lead"])
    for row in everything["leads"]:
        assert {"inboxDepth", "nudgesForHead", "nudgeCapReached", "health"} <= set(row)


async def test_a_lead_sees_only_its_own_incidents(tmp_path: Path) -> None:
    """Another lead's stranded reply and that lead's own incident reach it, the operator, and
    the healthy peer that holds them for it — as their recipient, nobody else."""
    fleet = await _fleet(tmp_path)
    _, other = await _stranded_for_lead_b(fleet)
    open_ = {(i.subject, str(i.state)) for i in fleet.service.health.state.open_incidents()}
    assert {(other, "REPLY_STRANDED"), ("lead-b", "LEAD_UNRESPONSIVE")} <= open_
    operator = await fleet.ok("fleet_list", OPERATOR)
    assert {(i["subject"], i["state"]) for i in operator["incidents"]} == open_
    theirs = {
        (i["subject"], i["state"]) for i in (await fleet.ok("fleet_list", LEAD_B))["incidents"]
    }
    assert {(other, "REPLY_STRANDED"), ("lead-b", "LEAD_UNRESPONSIVE")} <= theirs
    mine = (await fleet.ok("fleet_list", LEAD))["incidents"]
    held = [i for i in mine if i["subject"] in (other, "lead-b")]
    assert {(i["recipient"], i["routing"]["onBehalfOf"]) for i in held} == {("lead", "lead-b")}
    assert {i["routing"]["reason"] for i in held} == {"peer_owner_unhealthy", "peer_lead_incident"}
    for incident in mine:
        assert "lead" in (incident["owner"], incident["recipient"], incident["subject"]) or (
            incident["scope"] in ("control_link", "profile")
        )


async def test_a_fleet_wide_incident_reaches_every_lead(tmp_path: Path) -> None:
    """A down control link bears on every lead: each one's view lists the incident."""
    fleet = await _fleet(tmp_path)
    await fleet.service.health.tick()
    fleet.control.link_down()
    for _ in range(3):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    for caller in (LEAD, LEAD_B, OPERATOR):
        incidents = (await fleet.ok("fleet_list", caller))["incidents"]
        assert [i["state"] for i in incidents] == ["CONTROL_LINK_DOWN"]


async def test_no_field_appears_twice(tmp_path: Path) -> None:
    """controlLink and the leads' health live once: at the top level and in the lead rows."""
    fleet = await _fleet(tmp_path)
    await _stranded_for_lead_b(fleet)
    for caller in (LEAD, OPERATOR):
        view = await fleet.ok("fleet_list", caller)
        assert set(view["health"]) == {"enabled", "ticks", "paneReads"}
        assert not set(view["health"]) & set(view)
        assert view["controlLink"]["classifiedBy"] == "health"
        assert {row["health"]["state"] for row in view["leads"]} >= {"LEAD_UNRESPONSIVE"}
