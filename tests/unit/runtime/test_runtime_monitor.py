"""The fleet health monitor: one list per tick, no reads for a healthy fleet, effects applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from fleetd.api.app import create_app
from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet, sample_document


async def _fleet(tmp_path: Path, **health: Any) -> TestFleet:
    document = sample_document(tmp_path)
    document["profiles"]["codex"] = {"kind": "codex"}
    if health:
        document["health"] = health
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    return fleet


async def test_disabled_monitor_does_no_herdr_work(tmp_path: Path) -> None:
    """health.enabled=false (the default): a tick makes no herdr call at all."""
    fleet = await _fleet(tmp_path)
    await fleet.spawn_ready("codex")
    before = len(fleet.control.calls)
    for _ in range(5):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    assert len(fleet.control.calls) == before
    assert fleet.service.health.ticks == 0
    assert fleet.service.health.coverage().detection == "disabled"


async def test_healthy_fifty_member_fleet_reads_no_pane_and_lists_once_per_tick(
    tmp_path: Path,
) -> None:
    """Fifty idle members over ten ticks: ten agent.list calls, zero pane reads, no incident."""
    fleet = await _fleet(tmp_path, enabled=True)
    for _ in range(50):
        await fleet.spawn_ready("codex")
    fleet.control.calls.clear()
    for _ in range(10):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    methods = [c.method for c in fleet.control.calls]
    assert methods.count("list_agents") == 10
    assert "read" not in methods
    assert "ping" not in methods
    assert fleet.service.health.pane_reads == 0
    assert fleet.service.health.state.incidents == {}
    states = {str(e.state) for e in fleet.service.health.state.members.values()}
    assert states == {"IDLE"}
    listed = await fleet.ok("fleet_list")
    assert {m["health"]["state"] for m in listed["members"]} == {"IDLE"}
    assert {m["health"]["certainty"] for m in listed["members"]} == {"certain"}


async def test_gone_member_is_failed_through_the_target_wide_operation(tmp_path: Path) -> None:
    """A member missing from the list and not found by lookup becomes GONE; its ticket fails."""
    fleet = await _fleet(tmp_path, enabled=True)
    sid = await fleet.spawn_ready("codex")
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    fleet.control.remove(session.name)
    for _ in range(4):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert polled["status"] == "failed"
    assert fleet.session(sid).released_cause == "gone"


async def test_link_down_opens_one_control_link_incident_and_no_member_fault(
    tmp_path: Path,
) -> None:
    """Two failed lists plus a failed ping: CONTROL_LINK_DOWN; members keep their state."""
    fleet = await _fleet(tmp_path, enabled=True)
    sid = await fleet.spawn_ready("codex")
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    fleet.control.link_down()
    for _ in range(3):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    view = await fleet.ok("fleet_list")
    assert [i["state"] for i in view["incidents"]] == ["CONTROL_LINK_DOWN"]
    assert str(fleet.service.health.state.link.state) == "CONTROL_LINK_DOWN"
    link = (await fleet.ok("fleet_list"))["controlLink"]
    assert (link["state"], link["classifiedBy"]) == ("down", "health")
    assert str(fleet.service.health.state.members[sid].state) == "IDLE"


async def test_error_screen_is_found_by_a_budgeted_probe(tmp_path: Path) -> None:
    """A sustained non-working turn earns a read; a tested signature yields ERROR_ON_SCREEN."""
    fleet = await _fleet(tmp_path, enabled=True)
    sid = await fleet.spawn_ready("sonnet")
    await fleet.ok("fleet_send", target=sid, prompt="x")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    fleet.set_status(sid, AgentStatus.BLOCKED)
    fleet.control.set_screen(
        session.pane_id,
        '● Working on it\n\n  ⎿  API Error: 529 {"type":"error","error":{"type":'
        '"overloaded_error","message":"Overloaded"}}\n',
    )
    for _ in range(6):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    evidence = fleet.service.health.state.members[sid]
    assert (str(evidence.state), evidence.cause) == ("ERROR_ON_SCREEN", "claude.api_error_529")
    reads = fleet.control.calls_to("read")
    assert 1 <= len(reads) <= 6
    assert {c.args["source"].value for c in reads} <= {"visible", "detection"}
    listed = await fleet.ok("fleet_list")
    assert "Overloaded" not in str(listed)  # states and codes only, never pane text


async def test_healthz_and_fleet_list_show_partial_coverage_without_a_sink(
    tmp_path: Path,
) -> None:
    """Enabled detection without a human sink is partial on /healthz and in fleet_list."""
    fleet = await _fleet(tmp_path, enabled=True)
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://f") as client:
        healthz = await client.get("/healthz")
    assert healthz.status_code == 200
    assert healthz.json()["components"]["fleetHealth"]["status"] == "partial"
    listed = await fleet.ok("fleet_list")
    assert listed["healthCoverage"]["humanEscalation"] == "unavailable"
    assert listed["healthCoverage"]["status"] == "partial"


async def test_the_notification_capability_series_follows_the_coverage(tmp_path: Path) -> None:
    """/metrics has one fleet_health_notification_capability series at 1: the mode and the
    coverage status fleet_list and /healthz show (off while detection is off); every other
    mode and status reads 0."""
    for health, status in (({}, "off"), ({"enabled": True}, "partial")):
        fleet = await _fleet(tmp_path / status, **health)
        text = fleet.service.metrics.exposition().decode()
        series = [
            line
            for line in text.splitlines()
            if line.startswith("fleet_health_notification_capability{")
        ]
        assert [line for line in series if line.endswith(" 1.0")] == [
            f'fleet_health_notification_capability{{mode="disabled",status="{status}"}} 1.0'
        ]
        assert len(series) == 5 * 4  # mode x coverage status
        assert fleet.service.health.coverage().status == status


async def test_preserved_branch_with_commits_is_work_product_at_risk(tmp_path: Path) -> None:
    """A released member whose preserved branch is ahead of its base earns only a warning."""
    fleet = await _fleet(tmp_path, enabled=True)
    sid = await fleet.spawn_ready("codex")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    fleet.worktrees.add_commits(session.worktree, 2)
    fleet.worktrees.mark_dirty(session.worktree.path)
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped["worktree"] == "preserve"
    assert fleet.session(sid).commits_ahead == 2
    for _ in range(40):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    [incident] = (await fleet.ok("fleet_list"))["incidents"]
    assert (incident["state"], incident["severity"]) == ("WORK_PRODUCT_AT_RISK", "warning")
    assert fleet.worktrees.removed == []


async def test_a_sole_lead_that_vanishes_is_left_to_a_person_passively(tmp_path: Path) -> None:
    """One lead, no sink: its loss goes to the human leg, which stays passive, and says so."""
    document = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    lead = document["leads"][0]["agent"]
    fleet.control.remove(lead)
    for _ in range(3):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    listed = await fleet.ok("fleet_list")
    [incident] = listed["incidents"]
    assert (incident["state"], incident["recipient"]) == ("LEAD_UNREACHABLE", None)
    assert incident["routing"] == {
        "route": "human",
        "reason": "human_no_healthy_lead",
        "generation": 1,
        "onBehalfOf": document["leads"][0]["name"],
        "outcome": "passive_no_sink",
    }
    assert listed["healthCoverage"]["peerRouting"] == "no_peer"
    assert fleet.control.calls_to("start_agent") == []


async def test_a_tick_at_the_readiness_deadline_reads_the_bridge_s_release(tmp_path: Path) -> None:
    """The readiness grace of a member with a waiting send ends and a health tick comes before
    the poller's next pass: the tick lets the bridge release the member first, so the one
    NEVER_READY incident names the ticket the release failed (health's own rule for the same
    deadline would open it without)."""
    fleet = await _fleet(tmp_path, enabled=True)
    sid = (await fleet.ok("fleet_spawn", profile="codex"))["sessionId"]
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="never typed"))["ticket"]
    fleet.clock.advance(61)  # past the 60 s grace; no poller pass has run since
    await fleet.service.health.tick()
    [incident] = fleet.service.health.state.incidents.values()
    assert (incident.subject, incident.key.state, incident.key.cause) == (
        sid,
        "NEVER_READY",
        "readiness_grace_expired",
    )
    assert dict(incident.evidence)["failed_tickets"] == ticket
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "never_ready")
