"""Nudges and the idle-lead heartbeat: only into a lead at its prompt, and always bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.api.tools import Caller, Role
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet, sample_document


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


def _lead_prompts(fleet: TestFleet) -> list[str]:
    return [c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == "lead"]


async def _reply_waiting(fleet: TestFleet) -> str:
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    return sid


async def test_waiting_reply_nudges_an_idle_lead_up_to_the_cap(fleet: TestFleet) -> None:
    """Three nudges at most for one inbox head, spaced apart; then the loop stands down."""
    await _reply_waiting(fleet)
    for _ in range(10):
        await fleet.service.push.push_once()
        fleet.clock.advance(31)
    nudges = [t for t in _lead_prompts(fleet) if "wait in your inbox" in t]
    assert len(nudges) == 3
    assert 'fleet_poll(target="lead")' in nudges[0]
    outcome = fleet.service.push.outcomes["lead"]
    assert outcome.cap_reached_at is not None


@pytest.mark.parametrize("status", [AgentStatus.WORKING, AgentStatus.BLOCKED, AgentStatus.UNKNOWN])
async def test_never_nudges_a_lead_that_is_not_at_its_prompt(
    fleet: TestFleet, status: AgentStatus
) -> None:
    """A working, blocked or unknown lead is never typed into."""
    await _reply_waiting(fleet)
    fleet.control.set_status("lead", status)
    for _ in range(5):
        await fleet.service.push.push_once()
        fleet.clock.advance(31)
    assert _lead_prompts(fleet) == []


async def test_collection_stops_the_nudges(fleet: TestFleet) -> None:
    """Once the lead drains its inbox, no nudge follows; the heartbeat waits its interval."""
    await _reply_waiting(fleet)
    await fleet.service.push.push_once()
    await fleet.ok("fleet_poll")
    fleet.clock.advance(31)
    await fleet.service.push.push_once()
    assert len([t for t in _lead_prompts(fleet) if "wait in your inbox" in t]) == 1


async def test_heartbeat_is_bounded_and_rearmed_only_by_a_capacity_change(
    fleet: TestFleet,
) -> None:
    """An idle fleet gets a capped sequence; idle time alone never re-arms it; a spawn does."""
    await fleet.spawn_ready()
    for _ in range(3):
        await fleet.service.push.push_once()
        fleet.clock.advance(200)
    beats = [t for t in _lead_prompts(fleet) if "Capacity:" in t]
    assert len(beats) == 1
    assert "sonnet live 1/2, free 1, reclaimable 1" in beats[0]
    for _ in range(12):
        await fleet.service.push.push_once()
        fleet.clock.advance(601)
    settled = len([t for t in _lead_prompts(fleet) if "Capacity:" in t])
    # the first sequence runs to its cap of three; the member turning long idle (a capacity fact)
    # re-arms one more sequence of three once that fact has held for an interval
    assert settled == 6
    for _ in range(12):
        await fleet.service.push.push_once()
        fleet.clock.advance(601)
    assert len([t for t in _lead_prompts(fleet) if "Capacity:" in t]) == settled
    await fleet.spawn_ready("codex")
    await fleet.service.push.push_once()  # new facts: they re-arm once they have held an interval
    assert len([t for t in _lead_prompts(fleet) if "Capacity:" in t]) == settled
    fleet.clock.advance(fleet.bridge.settings().bridge.push.heartbeat_interval.total_seconds())
    await fleet.service.push.push_once()
    assert len([t for t in _lead_prompts(fleet) if "Capacity:" in t]) == settled + 1


async def test_no_heartbeat_while_work_is_in_flight(fleet: TestFleet) -> None:
    """A member with a pending ticket means replies will come: no heartbeat."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    for _ in range(3):
        await fleet.service.push.push_once()
        fleet.clock.advance(601)
    assert [t for t in _lead_prompts(fleet) if "Capacity:" in t] == []


async def test_no_members_no_heartbeat(fleet: TestFleet) -> None:
    """A lead with no members is never woken."""
    for _ in range(3):
        await fleet.service.push.push_once()
        fleet.clock.advance(601)
    assert _lead_prompts(fleet) == []


async def test_heartbeat_counts_every_lead_s_members_as_placement_does(fleet: TestFleet) -> None:
    """A slot another lead's member holds is not shown free: placement would refuse it."""
    lead_b = Caller(role=Role.LEAD, name="lead-b")
    other = (await fleet.ok("fleet_spawn", lead_b, profile="sonnet"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(other))
    await fleet.spawn_ready()
    await fleet.service.push.push_once()
    [beat] = [t for t in _lead_prompts(fleet) if "Capacity:" in t]
    assert "sonnet live 2/2, free 0, reclaimable 2" in beat
    refused = await fleet.call("fleet_spawn", profile="sonnet")
    assert refused.error is not None
    assert refused.error.code == "capacity_exceeded"


@pytest.mark.parametrize(
    ("code", "typed_at_most"),
    [("agent_prompt_failed", 1), ("internal_error", 1), ("unheard_of", 1), ("agent_blocked", 3)],
)
async def test_a_nudge_herdr_may_have_typed_counts_as_sent(
    fleet: TestFleet, code: str, typed_at_most: int
) -> None:
    """A nudge whose answer may have come after typing is never typed again on the next pass;
    a refusal before typing is tried again."""
    await _reply_waiting(fleet)
    fleet.control.fail("prompt", HerdrError(code, "answered after the text was written"))
    for _ in range(3):
        await fleet.service.push.push_once()
        fleet.clock.advance(5)
    assert len(_lead_prompts(fleet)) == typed_at_most
    assert fleet.service.push.outcomes["lead"].last_error == code


async def test_capacity_churn_elsewhere_never_floods_a_lead_with_heartbeats(
    fleet: TestFleet,
) -> None:
    """Another lead's member turning busy and done every few seconds changes the fingerprint each
    pass; the idle lead still gets at most one heartbeat per interval."""
    await fleet.spawn_ready()
    lead_b = Caller(role=Role.LEAD, name="lead-b")
    other = (await fleet.ok("fleet_spawn", lead_b, profile="codex"))["sessionId"]
    await fleet.service.registry.contact(fleet.member(other))
    interval = fleet.bridge.settings().bridge.push.heartbeat_interval.total_seconds()
    passes = 16
    for turn in range(passes):  # one pass every 4 s, a changed capacity fact each time
        await fleet.ok("fleet_send", lead_b, target=other, prompt=f"task {turn}")
        fleet.set_status(other, AgentStatus.WORKING)
        await fleet.poll()
        await fleet.service.push.push_once()  # busy: codex has nothing reclaimable
        fleet.clock.advance(2)
        await fleet.ok("fleet_reply", fleet.member(other), content="done")
        fleet.set_status(other, AgentStatus.IDLE)
        await fleet.poll()
        await fleet.ok("fleet_poll", lead_b)
        await fleet.service.push.push_once()  # done: one reclaimable again
        fleet.clock.advance(2)
    beats = [t for t in _lead_prompts(fleet) if "Capacity:" in t]
    assert 1 <= len(beats) <= 1 + (passes * 4) // interval


async def test_churn_elsewhere_that_never_settles_re_arms_nothing(tmp_path: Path) -> None:
    """Another lead spawns and stops a member every 15 s for four minutes: those capacity facts
    never hold for an interval, so the idle lead gets heartbeatMax beats, not one a minute for as
    long as the churn lasts."""
    document = sample_document(tmp_path)
    document["bridge"] = {"push": {"heartbeatIntervalSeconds": 60, "heartbeatMax": 2}}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    await fleet.spawn_ready()
    lead_b = Caller(role=Role.LEAD, name="lead-b")
    for _ in range(16):
        other = (await fleet.ok("fleet_spawn", lead_b, profile="codex"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(other))
        await fleet.service.push.push_once()
        fleet.clock.advance(7.5)
        await fleet.ok("fleet_stop", lead_b, sessionId=other)
        await fleet.service.push.push_once()
        fleet.clock.advance(7.5)
    assert len([t for t in _lead_prompts(fleet) if "Capacity:" in t]) == 2
