"""Faults the bridge handles itself reach health and the owning lead (M4 §6, issue 8 §2).

The 250 ms poller fails and releases a member that never became ready or whose pane vanished
mid-turn, and the completion fallback resolves a turn that ended on a fatal screen, all before
the next fleet tick. These tests run the real path — the herdr simulator, fleetd built through
the composition root on uvicorn, the monitor loop on the FakeClock — and check that the fault
still shows in health, opens an incident and reaches the owning lead as one typed record.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from fleetd.bridge.sessions import SessionState
from fleetd.health.states import MemberState
from fleetd.screens.markers import COMPLETION_FALLBACK_MARKER
from tests.e2e.e2e_fleet import E2EFleet, start_e2e

HEALTH = {"enabled": True, "snapshotIntervalSeconds": 15}


def _member_state(e2e: E2EFleet, session_id: str) -> str | None:
    evidence = e2e.service.health.state.members.get(session_id)
    return None if evidence is None else str(evidence.state)


def _failed_count(e2e: E2EFleet) -> float:
    value = e2e.service.metrics.registry.get_sample_value(
        "fleetd_tickets_total", {"outcome": "failed", "source": "none"}
    )
    return value or 0.0


async def _health_records(e2e: E2EFleet, lead: Any) -> list[dict[str, Any]]:
    inbox = await e2e.tool(lead, "fleet_poll")
    return [m for m in inbox["messages"] if m["kind"] == "health"]


async def _outlive_two_ticks(e2e: E2EFleet) -> None:
    health = e2e.service.health
    ticks = health.ticks
    await e2e.until(lambda: health.ticks >= ticks + 2)


@pytest.mark.parametrize(
    ("name", "bridge", "code"),
    [
        # herdr says interactive after 25 s; no contact within the 10 s grace
        ("m-slow-1", {"readinessGraceSeconds": 10}, "readiness_grace_expired"),
        # herdr gives up the launch after its 30 s start timeout
        ("m-never-1", {}, "launch_failed"),
    ],
)
async def test_never_ready_handled_by_the_bridge_reaches_health_and_the_lead(
    tmp_path: Any, caplog: pytest.LogCaptureFixture, name: str, bridge: dict[str, Any], code: str
) -> None:
    """A send waiting on a member that never becomes ready: NEVER_READY, incident, one record."""
    overrides = {"health": HEALTH, "bridge": bridge}
    caplog.set_level(logging.WARNING, logger="fleetd.health")
    async with start_e2e(tmp_path, overrides) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name=name))["sessionId"]
        agent = e2e.simulator.agent(name)
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="never typed"))["ticket"]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.RELEASED)
        assert e2e.session(sid).released_cause == "never_ready"
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.NEVER_READY)
        [incident] = e2e.service.health.state.incidents.values()
        assert (incident.subject, incident.key.cause) == (sid, code)
        assert (incident.owner_lead, incident.recipient_lead) == ("lead", "lead")
        assert dict(incident.evidence)["failed_tickets"] == ticket
        await _outlive_two_ticks(e2e)
        assert _member_state(e2e, sid) == MemberState.RELEASED
        [record] = await _health_records(e2e, lead)
        assert (record["state"], record["target"]) == ("NEVER_READY", name)
        assert record["evidence"]["tickets_failed"] == "1"
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["reason"]) == ("failed", "never_ready")
        assert _failed_count(e2e) == 1
        assert agent.turns == 0  # nothing was typed, so nothing could be typed again
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"NEVER_READY ({code})" in line for line in warned)


async def test_a_launch_herdr_gives_up_with_nothing_sent_rolls_back_with_a_warning(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing waits (no NEVER_READY by M4 §4.2): the spawn rolls back, said once in the log."""
    caplog.set_level(logging.WARNING, logger="fleetd.bridge")
    async with start_e2e(tmp_path, {"health": HEALTH}) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-never-2"))["sessionId"]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.RELEASED)
        assert e2e.session(sid).released_cause == "spawn_rollback"
        status = await e2e.tool(lead, "fleet_status", sessionId=sid)
        assert status["state"] == "released"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("gave up on its launch" in line and sid in line for line in warned) == 1


async def test_pane_lost_mid_turn_reaches_health_and_the_lead(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A busy member whose process exits: GONE, incident, one record, ticket failed once."""
    caplog.set_level(logging.WARNING, logger="fleetd.health")
    async with start_e2e(tmp_path, {"health": HEALTH}) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name="m-exit-1"))["sessionId"]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.READY)
        agent = e2e.simulator.agent("m-exit-1")
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="one"))["ticket"]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.RELEASED)
        assert e2e.session(sid).released_cause == "gone"
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.GONE)
        [incident] = e2e.service.health.state.incidents.values()
        assert incident.subject == sid
        assert incident.key.cause.endswith("_not_found")
        assert incident.recipient_lead == "lead"
        await _outlive_two_ticks(e2e)
        assert _member_state(e2e, sid) == MemberState.RELEASED
        [record] = await _health_records(e2e, lead)
        assert (record["state"], record["evidence"]["failed_tickets"]) == ("GONE", ticket)
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["reason"]) == ("failed", "gone")
        assert _failed_count(e2e) == 1
        assert agent.turns == 1  # typed once, never again
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("GONE" in line and "opened" in line for line in warned)


@pytest.mark.parametrize(
    ("profile", "signature"),
    [("sonnet", "claude.usage_limit"), ("codex", "codex.usage_limit")],
)
async def test_usage_limit_screen_at_the_boundary_is_error_on_screen(
    tmp_path: Any, profile: str, signature: str
) -> None:
    """herdr shows the usage-limit screen as idle: the ticket names it, ERROR_ON_SCREEN opens."""
    async with start_e2e(tmp_path, {"health": HEALTH}) as e2e, e2e.http() as lead:
        sid = (await e2e.tool(lead, "fleet_spawn", profile=profile, name="m-usage-1"))["sessionId"]
        await e2e.until(lambda: e2e.session(sid).state is SessionState.READY)
        result = await e2e.tool(lead, "fleet_send", target=sid, prompt="big task", wait=60)
        assert (result["status"], result["source"]) == ("done", "fallback")
        first, second = result["content"].splitlines()[:2]
        assert first == COMPLETION_FALLBACK_MARKER
        assert second.startswith(f"[error on screen {signature} - ")
        assert e2e.simulator.agent("m-usage-1").status.value in ("idle", "done")
        await e2e.until(lambda: _member_state(e2e, sid) == MemberState.ERROR_ON_SCREEN)
        evidence = e2e.service.health.state.members[sid]
        assert evidence.cause == signature
        incidents = {i.key.state: i for i in e2e.service.health.state.incidents.values()}
        incident = incidents[MemberState.ERROR_ON_SCREEN]
        assert (incident.subject, incident.key.cause) == (sid, signature)
        assert dict(incident.evidence)["ticket"] == result["ticket"]
        records = await _health_records(e2e, lead)
        assert "ERROR_ON_SCREEN" in [r["state"] for r in records]
        listed = await e2e.tool(lead, "fleet_list")
        [row] = [m for m in listed["members"] if m["sessionId"] == sid]
        assert row["health"]["state"] == "ERROR_ON_SCREEN"
        assert "hit your" not in str(listed)  # codes and our own words only, never pane text
        assert e2e.simulator.agent("m-usage-1").turns == 1  # the lead decides; nothing retried
