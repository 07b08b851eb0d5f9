"""Peer routing end to end (M4 §7.3–§7.4, Unit 4 criterion 14), two and three leads.

Each lead is an agent in the simulated herdr with its own token; every fault is made in herdr
(an agent exits, works for a long time, shows an unknown status, stops collecting) or in the
config file (the identity map stops naming a lead), and every check reads a user's surface:
``fleet_list``, the peer's ``fleet_poll``, the nudges herdr was asked to type, ``/healthz`` and
``/metrics``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from fleetd.herdr.model import AgentStatus
from tests.e2e.e2e_fleet import OPERATOR_TOKEN, E2EFleet, start_e2e
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
    prompted_while_busy,
    routing,
    sample,
    ticks,
)

PEER = "peer_owner_unhealthy"


async def test_a_busy_owner_keeps_its_incident_and_a_dead_one_hands_it_to_the_working_peer(
    tmp_path: Path,
) -> None:
    """Busy is not dead: a lead WORKING for minutes keeps its member's incident and is never
    typed into; once its agent exits, the incident moves to the one peer, whose nudge waits for
    its prompt, names the failed lead and gives the exact fleet_poll call."""
    slow = {"lead": {"turn_seconds": 900}, "lead-b": {"turn_seconds": 120}}
    async with (
        start_e2e(tmp_path, HEALTH, agents=slow, leads=("lead", "lead-b")) as e2e,
        e2e.as_lead("lead") as lead,
        e2e.as_lead("lead-b") as peer,
    ):
        e2e.simulator.agent("lead").submit("plan the next release")  # a long, live turn
        sid = await member_incident(e2e, lead)
        await ticks(e2e, 32)  # eight minutes: past the stall threshold and two probe intervals
        listed = await fleet(e2e)
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_WORKING"
        member = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(member) == ("lead", "lead", "owner", 1, None)
        assert incidents(listed, subject="lead") == {}
        assert e2e.prompts_to("lead") == []  # its records wait; a working lead is not typed into

        e2e.simulator.agent("lead-b").submit("review the plan")  # the peer is busy too
        killed = len(e2e.requests)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_UNREACHABLE"
        assert lead_row(listed, "lead-b")["health"]["state"] == "LEAD_WORKING"
        member = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(member) == ("lead-b", "lead", PEER, 2, "lead")
        assert member["owner"] == "lead"  # ownership stays; the peer only stands in
        [dead] = incidents(listed, subject="lead").values()
        assert dead["state"] == "LEAD_UNREACHABLE"
        assert routing(dead) == ("lead-b", "lead", "peer_lead_incident", 1, "lead")
        held = lead_row(listed, "lead-b")["health"]
        assert held["assignedForeignIncidents"] == len(held["foreignIncidents"]) == 3
        assert {i["id"] for i in held["foreignIncidents"]} >= {member["id"], dead["id"]}
        assert e2e.prompts_to("lead-b") == []  # still working: the nudge waits

        await e2e.until(lambda: bool(e2e.prompts_to("lead-b")), max_seconds=150)
        [(nudge, status)] = e2e.prompts_to("lead-b")
        assert status in ("idle", "done")
        assert "health incidents of lead lead, which cannot act" in nudge
        assert nudge.endswith('Collect them with fleet_poll(target="lead-b").')
        records = {m["state"]: m for m in await poll(e2e, peer, "lead-b")}
        assert {"ERROR_ON_SCREEN", "LEAD_UNREACHABLE"} <= records.keys()
        evidence = records["ERROR_ON_SCREEN"]["evidence"]
        assert (evidence["onBehalfOf"], evidence["routingGeneration"]) == ("lead", 2)
        assert evidence["routingReason"] == "peer_owner_unhealthy"
        assert records["LEAD_UNREACHABLE"]["evidence"]["onBehalfOf"] == "lead"
        assert records["ERROR_ON_SCREEN"]["subjectTerminal"] == sid

        component = (await healthz(e2e))["components"]["fleetHealth"]
        assert (component["status"], component["openIncidents"]) == ("partial", 3)
        text = await metrics(e2e)
        assert sample(text, "fleet_lead_health", lead="lead", state="LEAD_UNREACHABLE") == 1
        assert sample(text, "fleet_lead_health", lead="lead", state="LEAD_WORKING") == 0
        assert sample(text, "fleet_lead_health", lead="lead-b", state="LEAD_WORKING") == 1
        assert sample(text, "fleet_lead_assigned_incidents", lead="lead-b") == 3
        assert sample(text, "fleet_lead_assigned_incidents", lead="lead") == 0
        assert lifecycle_since(e2e, killed) == []  # nothing restarts or replaces the lead
        assert prompted_while_busy(e2e, "lead") == prompted_while_busy(e2e, "lead-b") == []


async def test_several_peers_share_a_dead_owners_incidents_fewest_assigned_first_then_by_name(
    tmp_path: Path,
) -> None:
    """Three leads, the owner dies: its incidents go, in key order, each to the peer holding the
    fewest foreign incidents at that point, a tie to the smaller name — lead-b, lead-c, lead-b."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b", "lead-c")) as e2e,
        e2e.as_lead("lead") as lead,
        e2e.as_lead("lead-b") as peer_b,
        e2e.as_lead("lead-c") as peer_c,
    ):
        sid = await member_incident(e2e, lead)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        member = incidents(listed, subject=sid)
        [dead] = incidents(listed, subject="lead").values()
        assert routing(dead) == ("lead-b", "lead", "peer_lead_incident", 1, "lead")
        assert routing(member["ERROR_ON_SCREEN"]) == ("lead-c", "lead", PEER, 2, "lead")
        assert routing(member["MUTE"]) == ("lead-b", "lead", PEER, 2, "lead")
        assert lead_row(listed, "lead-b")["health"]["assignedForeignIncidents"] == 2
        assert lead_row(listed, "lead-c")["health"]["assignedForeignIncidents"] == 1
        assert (
            "foreignIncidents"
            not in lead_row(await e2e.tool(peer_b, "fleet_list"), "lead-c")["health"]
        )  # a peer sees another lead's count, not its incidents
        await e2e.until(lambda: bool(e2e.prompts_to("lead-b")) and bool(e2e.prompts_to("lead-c")))
        assert {m["state"] for m in await poll(e2e, peer_b, "lead-b")} == {
            "LEAD_UNREACHABLE",
            "MUTE",
        }
        assert [m["state"] for m in await poll(e2e, peer_c, "lead-c")] == ["ERROR_ON_SCREEN"]
        text = await metrics(e2e)
        assert sample(text, "fleet_lead_assigned_incidents", lead="lead-b") == 2
        assert sample(text, "fleet_lead_assigned_incidents", lead="lead-c") == 1


async def test_an_unknown_lead_is_passed_over_and_a_peer_that_stops_collecting_is_superseded(
    tmp_path: Path,
) -> None:
    """A raw-UNKNOWN lead is no routing target even with the smaller name; the chosen peer
    that leaves its records uncollected becomes LEAD_UNRESPONSIVE, its assignments move on with
    the generation bumped and a SUPERSEDED record tells it so; the new pin then holds."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b", "lead-c")) as e2e,
        e2e.as_lead("lead") as lead,
        e2e.as_lead("lead-b") as peer_b,
        e2e.as_lead("lead-c") as peer_c,
    ):
        await member_incident(e2e, lead)
        e2e.simulator.set_status("lead-b", AgentStatus.UNKNOWN)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 2)
        listed = await fleet(e2e)
        assert lead_row(listed, "lead-b")["health"]["state"] == "LEAD_STATUS_UNKNOWN"
        first = {i["id"]: routing(i) for i in listed["incidents"]}
        assert {r[0] for r in first.values()} == {"lead-c"}
        assert len(first) == 3
        assert e2e.prompts_to("lead-b") == []

        e2e.simulator.set_status("lead-b", AgentStatus.IDLE)
        health = e2e.service.health
        await e2e.until(
            lambda: str(health.state.leads["lead-c"].state) == "LEAD_UNRESPONSIVE",
            max_seconds=400,
        )  # three nudges it never answered, then the unresponsive delay
        assert len(e2e.prompts_to("lead-c")) == 3
        listed = await fleet(e2e)
        moved = {i["id"]: routing(i) for i in listed["incidents"] if i["id"] in first}
        assert {r[0] for r in moved.values()} == {"lead-b"}
        assert all(moved[i][3] == first[i][3] + 1 for i in first)  # one generation further
        unresponsive = incidents(listed, subject="lead-c")["LEAD_UNRESPONSIVE"]
        assert routing(unresponsive) == ("lead-b", "lead", "peer_lead_incident", 1, "lead-c")

        told = [m for m in await poll(e2e, peer_c, "lead-c") if m["state"] == "SUPERSEDED"]
        assert sorted(m["evidence"]["supersededGeneration"] for m in told) == sorted(
            first[i][3] for i in first
        )
        assert {m["evidence"]["newRecipient"] for m in told} == {"lead-b"}
        assert all("is no longer yours" in m["content"] for m in told)
        records = await poll(e2e, peer_b, "lead-b")
        assert {m["evidence"]["onBehalfOf"] for m in records} == {"lead", "lead-c"}

        await ticks(e2e, 2)  # lead-c collected: healthy again, yet the pin stays with lead-b
        listed = await fleet(e2e)
        assert lead_row(listed, "lead-c")["health"]["state"] == "LEAD_IDLE"
        assert incidents(listed, subject="lead-c") == {}
        assert {i["id"]: routing(i) for i in listed["incidents"]} == moved


async def test_a_peer_dropped_from_the_config_keeps_its_assignment_through_the_grace(
    tmp_path: Path,
) -> None:
    """The identity map stops naming a peer that holds an incident: for the two-snapshot grace
    the pin holds, then the lead retires and the incident moves on, one generation further."""
    async with (
        start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b", "lead-c")) as e2e,
        e2e.as_lead("lead") as lead,
    ):
        sid = await member_incident(e2e, lead)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 2)
        held = incidents(await fleet(e2e), subject=sid)["ERROR_ON_SCREEN"]
        assert routing(held) == ("lead-c", "lead", PEER, 2, "lead")

        document = yaml.safe_load(e2e.config_path.read_text(encoding="utf-8"))
        document["leads"] = [row for row in document["leads"] if row["name"] != "lead-c"]
        e2e.config_path.write_text(yaml.safe_dump(document), encoding="utf-8")
        health = e2e.service.health
        await e2e.until(lambda: health.state.leads["lead-c"].identity_missing == 1)  # the grace
        listed = await fleet(e2e)
        assert [row["name"] for row in listed["leads"]] == ["lead", "lead-b"]
        assert routing(incidents(listed, subject=sid)["ERROR_ON_SCREEN"]) == routing(held)

        await ticks(e2e, 1)
        assert "lead-c" not in health.state.leads  # retired
        listed = await fleet(e2e)
        moved = incidents(listed, subject=sid)["ERROR_ON_SCREEN"]
        assert routing(moved) == ("lead-b", "lead", PEER, 3, "lead")
        assert lead_row(listed, "lead-b")["health"]["assignedForeignIncidents"] == 3


async def test_a_dead_lead_dropped_from_the_config_retires_and_its_incident_resolves(
    tmp_path: Path,
) -> None:
    """Issue 20 4b: a lead whose agent is gone (LEAD_UNREACHABLE, held by its peer) is taken out
    of the config: after the two-snapshot grace it retires and its incident resolves as
    ``subject_retired`` — fleet_list and /v1/incidents say so, nothing stays open for it."""
    async with start_e2e(tmp_path, HEALTH, leads=("lead", "lead-b")) as e2e:
        e2e.simulator.agent("lead-b").exit()
        health = e2e.service.health
        await e2e.until(lambda: bool(incidents_about(e2e, "lead-b")))
        [dead] = incidents(await fleet(e2e), subject="lead-b").values()
        assert dead["state"] == "LEAD_UNREACHABLE"

        document = yaml.safe_load(e2e.config_path.read_text(encoding="utf-8"))
        document["leads"] = [row for row in document["leads"] if row["name"] != "lead-b"]
        e2e.config_path.write_text(yaml.safe_dump(document), encoding="utf-8")
        await e2e.until(lambda: "lead-b" not in health.state.leads)
        listed = await fleet(e2e)
        assert incidents(listed, subject="lead-b") == {}
        assert [row["name"] for row in listed["leads"]] == ["lead"]
        await ticks(e2e, 2)
        assert incidents(await fleet(e2e), subject="lead-b") == {}
        async with e2e.http(OPERATOR_TOKEN) as operator:
            journal = (await e2e.run(operator.get("/v1/incidents"))).json()["result"]
        [row] = [i for i in journal["incidents"] if i["id"] == dead["id"]]
        assert (row["status"], row["resolveReason"]) == ("resolved", "subject_retired")


def incidents_about(e2e: E2EFleet, subject: str) -> list[str]:
    """The states of health's open incidents about ``subject``."""
    return [
        str(i.state) for i in e2e.service.health.state.incidents.values() if i.subject == subject
    ]
