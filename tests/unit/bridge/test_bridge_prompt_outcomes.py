"""The bridge on fakes: what each ``agent.prompt`` outcome does to the ticket and the queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fleetd.errors import ControlLinkError, HerdrError, TargetNotFoundError
from fleetd.herdr import calls
from fleetd.herdr.model import AgentInfo
from fleetd.testing import TestFleet, build_test_fleet, sample_document


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["bridge"] = {**document["bridge"], "promptRetries": 2, "promptRetryBaseMs": 1000}
    built = build_test_fleet(tmp_path, document=document)
    await built.service.own_lead_keys()
    return built


async def test_a_lost_answer_is_shown_as_uncertain_delivery(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """herdr typed the prompt, the answer was lost: poll and status say delivery uncertain."""
    sid = await fleet.spawn_ready()
    prompt = fleet.control.prompt

    async def typed_then_lost(target: str, text: str) -> AgentInfo:
        await prompt(target, text)
        raise ControlLinkError("connection_lost", "closed before answering")

    monkeypatch.setattr(fleet.control, "prompt", typed_then_lost)
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="once"))["ticket"]
    status = await fleet.ok("fleet_status", sessionId=sid)
    assert (status["openTurn"]["ticket"], status["openTurn"]["delivery"]) == (ticket, "uncertain")
    assert (await fleet.ok("fleet_poll", ticket=ticket))["delivery"] == "uncertain"


async def test_a_failed_status_read_before_the_prompt_opens_no_turn(fleet: TestFleet) -> None:
    """The status read fails, so nothing is typed: the send stays queued, then goes once."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("get_agent", ControlLinkError("request_timeout", "slow"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="later"))["ticket"]
    status = await fleet.ok("fleet_status", sessionId=sid)
    assert (status["queued"], "openTurn" in status) == (1, False)
    assert fleet.control.calls_to("prompt") == []
    fleet.control.fail("get_agent", None)
    await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["later"]
    assert (await fleet.ok("fleet_poll", ticket=ticket))["delivery"] == "confirmed"


async def test_a_refusal_waits_out_its_backoff(fleet: TestFleet) -> None:
    """After a refusal the next attempt waits for the delay, then the prompt goes once."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    fleet.control.fail("prompt", None)
    await fleet.poll(0.5)
    assert len(fleet.control.calls_to("prompt")) == 1  # 1 s has not passed
    await fleet.poll(0.5)
    assert len(fleet.control.calls_to("prompt")) == 2
    assert (await fleet.ok("fleet_poll", ticket=ticket))["delivery"] == "confirmed"


async def test_not_found_while_the_link_is_in_doubt_is_bounded(fleet: TestFleet) -> None:
    """*_not_found with a failing ping keeps the session, but the ticket fails past the budget."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", TargetNotFoundError("agent_not_found", "gone?"))
    fleet.control.fail("ping", ControlLinkError("connect_failed", "down"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    for _ in range(40):
        await fleet.poll()
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "prompt_refused")
    assert "agent_not_found" in polled["hint"]
    assert len(fleet.control.calls_to("prompt")) == 3
    assert (await fleet.ok("fleet_status", sessionId=sid))["state"] == "ready"


async def test_a_task_refused_past_the_budget_is_told_to_its_lead_once(fleet: TestFleet) -> None:
    """herdr refuses the prompt every time (the member is blocked): the ticket fails with nothing
    typed, and the lead that sent it without waiting finds one notice in its inbox — a health
    record naming the ticket and the refusal, never a reply — with what it may do."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    for _ in range(40):
        await fleet.poll()
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "failed"
    [notice] = (await fleet.ok("fleet_poll"))["messages"]
    assert (notice["kind"], notice["state"], notice["ticket"]) == (
        "health",
        "DELIVERY_REFUSED",
        ticket,
    )
    assert notice["evidence"] == {"code": "agent_blocked", "refusals": 3}
    assert "nothing was typed" in notice["content"]
    assert f'fleet_poll(ticket="{ticket}")' in notice["suggestedToolCalls"]
    for _ in range(5):
        await fleet.poll()
    assert (await fleet.ok("fleet_poll"))["messages"] == []


async def test_a_waiting_send_hears_the_refusal_in_its_answer_not_twice(
    fleet: TestFleet,
) -> None:
    """A fleet_send that waits for the result gets the failure in its answer; the lead's inbox
    gets no second copy."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    waiting = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="x", wait=60))
    for _ in range(5):  # the send is accepted, typed at once and refused, then waits
        await asyncio.sleep(0)
    for _ in range(40):
        await fleet.poll()
    answer = await waiting
    assert (answer["status"], answer["reason"]) == ("failed", "prompt_refused")
    assert (await fleet.ok("fleet_poll"))["messages"] == []


@pytest.mark.parametrize("answer", ["nested", "crash"])
async def test_a_prompt_typed_then_answered_unreadably_is_typed_once(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """herdr typed the prompt, then its answer could not be read (nested past the parser, read
    by the real protocol code) or the call failed in a way no table names: the delivery is
    uncertain and the prompt is never typed again, however many passes follow."""
    sid = await fleet.spawn_ready()
    prompt = fleet.control.prompt
    nested = b'{"id":"r1","result":' + b"[" * 200_000

    async def typed_then_unreadable(target: str, text: str) -> AgentInfo:
        await prompt(target, text)
        if answer == "nested":
            return calls.agent_prompt(target, text).parse_response(nested, "r1")
        raise RuntimeError("an answer no table names")

    monkeypatch.setattr(fleet.control, "prompt", typed_then_unreadable)
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="run the migration"))["ticket"]
    for _ in range(6):
        await fleet.poll()
    typed = [c.args["text"] for c in fleet.control.calls_to("prompt")]
    assert typed == ["run the migration"]
    assert (await fleet.ok("fleet_poll", ticket=ticket))["delivery"] == "uncertain"
