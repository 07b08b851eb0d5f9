"""fleet_list v1: each field in one place; a lead sees its own part, the operator the fleet."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
from jsonschema import Draft202012Validator

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.errors import ControlLinkError, HerdrError
from fleetd.inbox.codec import DecodeReason
from fleetd.inbox.failures import DecodeFailure, Disposition
from fleetd.inbox.records import InboxRecord, MessageKind, Severity
from fleetd.testing import LEAD_TOKEN, OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.unit.troubled_inbox import TroubledInbox

LEAD = Caller(role=Role.LEAD, name="lead")
LEAD_B = Caller(role=Role.LEAD, name="lead-b")
OPERATOR = Caller(role=Role.OPERATOR, name="operator")
_PEER_FIELDS = {"name", "agent", "liveStatus", "health"}
RESULT_SCHEMA = (
    Path(__file__).resolve().parents[3] / "contracts" / "api" / "fleet_list.result.schema.json"
)


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


def _bad_entry(key: str, message_id: str, reason: DecodeReason) -> DecodeFailure:
    return DecodeFailure(
        key=key,
        reason=reason,
        disposition=Disposition.QUARANTINED,
        message_id=message_id,
        version=1,
        detail="redacted",
        first_seen_epoch_millis=1_000,
        last_seen_epoch_millis=2_000,
        occurrences=1,
    )


def _record(lead: str, index: int, kind: MessageKind, created: int) -> InboxRecord:
    health: dict[str, Any] = {}
    if kind is MessageKind.HEALTH:
        health = {
            "subject_terminal": f"m-{index}",
            "severity": Severity.WARNING,
            "state": "REPLY_STRANDED",
            "evidence": {},
            "first_seen_epoch_millis": created,
            "last_seen_epoch_millis": created,
            "recovery_tried": False,
            "suggested_tool_calls": (f'fleet_status(sessionId="m-{index}")',),
        }
    return InboxRecord(
        msg_id=f"{lead}-{index}",
        kind=kind,
        target=f"m-{index}",
        recipient_lead=lead,
        content="held",
        created_at_epoch_millis=created,
        **health,
    )


async def _troubled_fleet(tmp_path: Path, *, quiet: str | None = None) -> TestFleet:
    """lead-b has three records held in memory and two bad entries; lead has one of each; one
    bad entry sits under a key no lead owns. The ``quiet`` lead's are left out."""
    inbox = TroubledInbox()
    fleet = build_test_fleet(tmp_path, inbox=inbox)
    await fleet.service.own_lead_keys()
    inbox.down = True
    held = [
        _record("lead-b", 1, MessageKind.HEALTH, 1_000),
        _record("lead", 2, MessageKind.REPLY, 5_000),
        _record("lead-b", 3, MessageKind.REPLY, 2_000),
        _record("lead-b", 4, MessageKind.HEALTH, 3_000),
    ]
    for record in held:
        if record.recipient_lead != quiet:
            await fleet.bridge.outbox.keep(record)
    bad = [
        _bad_entry("lead-b", "b-1", DecodeReason.MALFORMED_JSON),
        _bad_entry("lead", "a-1", DecodeReason.MISSING_FIELD),
        _bad_entry("lead-b", "b-2", DecodeReason.UNSUPPORTED_VERSION),
        _bad_entry("stray", "s-1", DecodeReason.MALFORMED_UTF8),
    ]
    inbox.bad = [entry for entry in bad if entry.key != quiet]
    return fleet


def _inbox_figures(view: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    inbox = view["inbox"]
    return inbox["heldInMemory"], [(f["key"], f["messageId"]) for f in inbox["failures"]]


async def test_a_lead_sees_only_its_own_inbox_figures(tmp_path: Path) -> None:
    """Held records and decode failures of another lead's key stay hidden, in counts too; the
    operator sees every key."""
    fleet = await _troubled_fleet(tmp_path)
    held, failures = _inbox_figures(await fleet.ok("fleet_list", OPERATOR))
    assert (held["records"], held["byLead"]) == (4, {"lead": 1, "lead-b": 3})
    assert (held["byKind"], held["oldestCreatedEpochMillis"]) == ({"health": 2, "reply": 2}, 1_000)
    assert failures == [("lead-b", "b-1"), ("lead", "a-1"), ("lead-b", "b-2"), ("stray", "s-1")]
    held, failures = _inbox_figures(await fleet.ok("fleet_list", LEAD))
    assert (held["records"], held["byLead"]) == (1, {"lead": 1})
    assert (held["byKind"], held["oldestCreatedEpochMillis"]) == ({"reply": 1}, 5_000)
    assert failures == [("lead", "a-1")]
    held, failures = _inbox_figures(await fleet.ok("fleet_list", LEAD_B))
    assert (held["records"], held["byLead"]) == (3, {"lead-b": 3})
    assert (held["byKind"], held["oldestCreatedEpochMillis"]) == ({"health": 2, "reply": 1}, 1_000)
    assert failures == [("lead-b", "b-1"), ("lead-b", "b-2")]


async def test_a_lead_with_nothing_held_sees_empty_figures_not_the_fleets(tmp_path: Path) -> None:
    """A lead whose key holds nothing sees zeros, the same shape as the operator's view."""
    fleet = await _troubled_fleet(tmp_path, quiet="lead")
    operator = (await fleet.ok("fleet_list", OPERATOR))["inbox"]
    assert operator["heldInMemory"]["records"] == 3
    listed = (await fleet.ok("fleet_list", LEAD))["inbox"]
    assert listed["failures"] == []
    assert listed["heldInMemory"] == {
        "records": 0,
        "byLead": {},
        "byKind": {},
        "oldestCreatedEpochMillis": None,
        "gaveWay": 0,
    }
    assert set(listed) == set(operator)
    assert set(listed["heldInMemory"]) == set(operator["heldInMemory"])


async def test_over_http_a_lead_does_not_see_another_leads_counts(tmp_path: Path) -> None:
    """``GET /v1/fleet`` with a lead's token scopes the inbox figures to that lead's key, and
    both answers obey the committed result schema."""
    fleet = await _troubled_fleet(tmp_path)
    schema = Draft202012Validator(json.loads(RESULT_SCHEMA.read_text(encoding="utf-8")))
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        views = {}
        for who, token in (("lead", LEAD_TOKEN), ("operator", OPERATOR_TOKEN)):
            answer = await client.get("/v1/fleet", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200
            views[who] = answer.json()["result"]
            assert [e.message for e in schema.iter_errors(views[who])] == []
    held, failures = _inbox_figures(views["lead"])
    assert (held["records"], held["byLead"], failures) == (1, {"lead": 1}, [("lead", "a-1")])
    assert "lead-b" not in json.dumps(views["lead"]["inbox"])
    held, failures = _inbox_figures(views["operator"])
    assert (held["records"], len(failures)) == (4, 4)


async def test_a_lead_rows_live_status_is_the_views_own_list(tmp_path: Path) -> None:
    """A lead's liveStatus comes from herdr's last agent.list (the loops list, fleet_list reads):
    null once herdr no longer lists it (never the status the push loop last read), the push
    loop's read only while the list itself fails."""
    fleet = await _fleet(tmp_path)
    for lead in (LEAD, LEAD_B):  # a reply waits for each lead: the push loop reads its status
        sid = (await fleet.ok("fleet_spawn", lead, profile="codex"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(sid))
        await fleet.ok("fleet_send", lead, target=sid, prompt="x")
        await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    await _step(fleet)
    assert {o.last_status for o in fleet.service.push.outcomes.values()} == {"idle"}

    async def statuses() -> dict[str, str | None]:
        with contextlib.suppress(HerdrError):  # a loop's agent.list, as the observer records it
            await fleet.service.control.list_agents()
        listed = await fleet.ok("fleet_list", OPERATOR)
        return {row["name"]: row["liveStatus"] for row in listed["leads"]}

    assert await statuses() == {"lead": "idle", "lead-b": "idle"}
    fleet.control.fail("list_agents", ControlLinkError("connect_failed", "down"))
    fleet.control.remove("lead-b")
    assert await statuses() == {"lead": "idle", "lead-b": "idle"}  # last reads, list failed
    fleet.control.fail("list_agents", None)
    assert await statuses() == {"lead": "idle", "lead-b": None}


async def test_fleet_list_and_the_incident_list_scope_a_lead_alike(tmp_path: Path) -> None:
    """On one fleet, each lead's /v1/incidents lists the open incidents its fleet_list shows —
    lead-b's own LEAD_UNRESPONSIVE held by its peer, and lead-b's member's incident the peer now
    holds (routing generation 2), included — and the operator's lists agree too."""
    fleet = await _fleet(tmp_path)
    await _stranded_for_lead_b(fleet)
    await fleet.service.scheduler.run_once("webhook")  # records the ticks' incidents
    tokens = {LEAD: LEAD_TOKEN, LEAD_B: LEAD_TOKEN + "-b", OPERATOR: OPERATOR_TOKEN}
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        for caller, token in tokens.items():
            listed = {i["id"] for i in (await fleet.ok("fleet_list", caller))["incidents"]}
            answer = await client.get("/v1/incidents", headers={"Authorization": f"Bearer {token}"})
            journal = answer.json()["result"]["incidents"]
            assert {row["id"] for row in journal if row["status"] == "open"} == listed, caller
    [about_itself] = [
        i
        for i in fleet.service.health.state.open_incidents()
        if (i.subject, str(i.state)) == ("lead-b", "LEAD_UNRESPONSIVE")
    ]
    assert about_itself.recipient_lead == "lead"
    assert about_itself.id in {i["id"] for i in (await fleet.ok("fleet_list", LEAD_B))["incidents"]}
