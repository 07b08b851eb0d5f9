"""ERROR_ON_SCREEN from the completion fallback's boundary read, on recorded agent screens.

herdr reports an errored Claude Code or Codex turn as ``idle``/``done``, so the turn ends at an
ordinary boundary and the bridge resolves it from the pane. These tests drive the service built
through the composition root (fakes for herdr, git and the inbox) and the monitor tick on the
FakeClock, with the real usage-limit screens under ``tests/fixtures/screens``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.screens.markers import COMPLETION_FALLBACK_MARKER
from fleetd.testing import TestFleet, build_test_fleet, sample_document

SCREENS = Path(__file__).parents[2] / "fixtures" / "screens"


async def _fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    return fleet


async def _turn_ends_on(fleet: TestFleet, sid: str, screen: str, status: AgentStatus) -> str:
    """Deliver one send, let the member work, then show ``screen`` at its prompt."""
    ticket: str = (await fleet.ok("fleet_send", target=sid, prompt="the big task"))["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.control.set_screen(session.pane_id, screen)
    fleet.set_status(sid, status)
    await fleet.poll()
    await fleet.poll(1.0)  # past the reply grace: the completion fallback reads the pane
    return ticket


@pytest.mark.parametrize(
    ("profile", "fixture", "signature"),
    [
        ("sonnet", "claude/error-usage-limit.txt", "claude.usage_limit"),
        ("codex", "codex/error-usage-limit.txt", "codex.usage_limit"),
    ],
)
async def test_usage_limit_at_an_idle_boundary_opens_error_on_screen(
    tmp_path: Path, profile: str, fixture: str, signature: str
) -> None:
    """A usage-limit screen reported idle: the ticket names the signature and health opens it."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready(profile)
    ticket = await _turn_ends_on(fleet, sid, (SCREENS / fixture).read_text(), AgentStatus.IDLE)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["source"]) == ("done", "fallback")
    lines = polled["content"].splitlines()
    assert lines[0] == COMPLETION_FALLBACK_MARKER
    assert lines[1].startswith(f"[error on screen {signature} - ")
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    evidence = fleet.service.health.state.members[sid]
    assert (str(evidence.state), evidence.cause) == ("ERROR_ON_SCREEN", signature)
    listed = (await fleet.ok("fleet_list"))["incidents"]
    incidents = [i for i in listed if i["subject"] == sid]
    assert {i["state"] for i in incidents} >= {"ERROR_ON_SCREEN"}
    [error] = [i for i in incidents if i["state"] == "ERROR_ON_SCREEN"]
    assert error["recipient"] == "lead"
    messages = (await fleet.ok("fleet_poll"))["messages"]
    [record] = [m for m in messages if m["kind"] == "health" and m["state"] == "ERROR_ON_SCREEN"]
    assert record["evidence"]["ticket"] == ticket
    assert "hit your" not in str(record)  # our codes, never the pane's words


async def test_the_next_delivered_turn_ends_error_on_screen(tmp_path: Path) -> None:
    """The fatal screen belongs to the turn it ended: a new delivery leaves ERROR_ON_SCREEN."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready("sonnet")
    screen = (SCREENS / "claude" / "error-usage-limit.txt").read_text()
    await _turn_ends_on(fleet, sid, screen, AgentStatus.DONE)
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    assert str(fleet.service.health.state.members[sid].state) == "ERROR_ON_SCREEN"
    await fleet.ok("fleet_send", target=sid, prompt="after the reset")
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    assert str(fleet.service.health.state.members[sid].state) == "WORKING"
    assert (await fleet.ok("fleet_list"))["incidents"] == []


async def test_a_normal_answer_at_the_boundary_is_no_error(tmp_path: Path) -> None:
    """A finished screen resolves as a plain fallback and the member stays healthy."""
    fleet = await _fleet(tmp_path)
    sid = await fleet.spawn_ready("sonnet")
    screen = (SCREENS / "claude" / "finished-linux.txt").read_text()
    ticket = await _turn_ends_on(fleet, sid, screen, AgentStatus.IDLE)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert "[error on screen" not in polled["content"]
    await fleet.ok("fleet_poll")  # the lead collects the reply: nothing is left waiting for it
    fleet.clock.advance(30)
    await fleet.service.health.tick()
    assert str(fleet.service.health.state.members[sid].state) == "IDLE"
