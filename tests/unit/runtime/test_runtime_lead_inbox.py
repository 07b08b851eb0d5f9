"""Lead inboxes as health and fleet_list read them: whose reply waits, and which lead owns a key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetd.api.tools import Caller, Role
from fleetd.testing import TestFleet, build_test_fleet, sample_document


async def _fleet(tmp_path: Path, *, leads: list[dict[str, str]] | None = None) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True, "leadUnresponsiveAfterSeconds": 120}
    if leads is not None:
        document["leads"] = leads
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    return fleet


async def _step(fleet: TestFleet, seconds: float = 31) -> None:
    """One push pass and one monitor tick, ``seconds`` later."""
    fleet.clock.advance(seconds)
    await fleet.service.push.push_once()
    await fleet.service.health.tick()


async def _replied(fleet: TestFleet, caller: Caller | None = None) -> str:
    sid: str = (await fleet.ok("fleet_spawn", caller, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(sid))
    await fleet.ok("fleet_send", caller, target=sid, prompt="x")
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    return sid


def _row(listed: dict[str, Any], sid: str) -> dict[str, Any]:
    row: dict[str, Any] = next(m for m in listed["members"] if m["sessionId"] == sid)
    return row


def _member_state(fleet: TestFleet, sid: str) -> str:
    return str(fleet.service.health.state.members[sid].state)


async def test_idle_for_seconds_only_without_turn_or_inbox(tmp_path: Path) -> None:
    """fleet_list and fleet_status show idleForSeconds only once the member's reply is collected."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready("codex")
    assert "idleForSeconds" in _row(await fleet.ok("fleet_list"), sid)
    await fleet.ok("fleet_send", target=sid, prompt="x")
    assert "idleForSeconds" not in _row(await fleet.ok("fleet_list"), sid)
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    fleet.clock.advance(90)
    row = _row(await fleet.ok("fleet_list"), sid)
    assert (row["state"], row["pendingTickets"]) == ("done", [])
    assert "idleForSeconds" not in row
    assert "idleForSeconds" not in await fleet.ok("fleet_status", sessionId=sid)
    await fleet.ok("fleet_poll")
    assert _row(await fleet.ok("fleet_list"), sid)["idleForSeconds"] == 90
    assert (await fleet.ok("fleet_status", sessionId=sid))["idleForSeconds"] == 90


async def test_reply_waiting_in_the_lead_inbox_is_pending_then_stranded(tmp_path: Path) -> None:
    """The member whose reply its lead leaves uncollected is WORK_PENDING, then REPLY_STRANDED."""
    fleet = await _fleet(tmp_path)
    sid = await _replied(fleet)
    await _step(fleet, 1)
    assert _member_state(fleet, sid) == "WORK_PENDING"
    for _ in range(5):
        await _step(fleet)
    assert fleet.service.push.outcomes["lead"].cap_reached_at is not None
    assert _member_state(fleet, sid) == "REPLY_STRANDED"
    stranded = [i for i in (await fleet.ok("fleet_list"))["incidents"] if i["subject"] == sid]
    assert [(i["scope"], i["state"]) for i in stranded] == [("member", "REPLY_STRANDED")]
    await fleet.ok("fleet_poll")
    await _step(fleet)
    assert _member_state(fleet, sid) == "IDLE"
    assert not [i for i in (await fleet.ok("fleet_list"))["incidents"] if i["subject"] == sid]


async def test_a_lead_named_apart_from_its_agent_has_no_orphan_inbox(tmp_path: Path) -> None:
    """A lead whose name is not its herdr agent name owns its inbox: no inbox REPLY_STRANDED."""
    fleet = await _fleet(tmp_path, leads=[{"name": "alpha", "agent": "lead", "tokenEnv": "T_LEAD"}])
    alpha = Caller(role=Role.LEAD, name="alpha")
    await _replied(fleet, alpha)
    for _ in range(10):
        await _step(fleet)
    assert fleet.service.push.outcomes["alpha"].cap_reached_at is not None
    incidents = (await fleet.ok("fleet_list", alpha))["incidents"]
    assert {(i["scope"], i["state"]) for i in incidents} == {
        ("member", "REPLY_STRANDED"),
        ("lead", "LEAD_UNRESPONSIVE"),
    }


async def test_a_lead_absent_from_one_list_keeps_its_state(tmp_path: Path) -> None:
    """One absence is no evidence (not LEAD_STATUS_UNKNOWN); a lost lead is then unreachable."""
    fleet = await _fleet(tmp_path)

    def lead_state(listed: dict[str, Any]) -> str:
        [row] = [lead for lead in listed["leads"] if lead["name"] == "lead"]
        return str(row["health"]["state"])

    await _step(fleet)
    assert lead_state(await fleet.ok("fleet_list")) == "LEAD_IDLE"
    fleet.control.remove("lead")
    await _step(fleet)
    assert lead_state(await fleet.ok("fleet_list")) == "LEAD_IDLE"
    await _step(fleet)
    assert lead_state(await fleet.ok("fleet_list")) == "LEAD_UNREACHABLE"


async def test_the_push_loops_outcomes_reach_the_lead_evidence(tmp_path: Path) -> None:
    """What the push loop read and did before not injecting is health evidence (criterion 4)."""
    fleet = await _fleet(tmp_path)
    await _replied(fleet)
    for _ in range(6):
        await _step(fleet)
    outcome = fleet.service.push.outcomes["lead"]
    evidence = fleet.service.health.state.leads["lead"]
    assert evidence.nudges_sent == outcome.nudges_for_head > 0
    assert evidence.nudge_cap_reached_at == outcome.cap_reached_at
    assert evidence.last_nudge_at == outcome.last_nudge_at
    assert evidence.push_status is not None
    assert evidence.push_status.value == outcome.last_status
    assert evidence.actionable_waiting >= 1  # the reply (and the health record about it)
    assert evidence.first_seen_at is not None
