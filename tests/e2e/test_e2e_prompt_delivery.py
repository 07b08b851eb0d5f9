"""End to end: every answer herdr can give to ``agent.prompt``, and the task typed at most once.

The simulator is a herdr that types the prompt and *then* answers with an error code or a result
fleetd cannot read, or that refuses before typing; fleetd runs as ``fleetd serve`` builds it, with
health disabled (the default).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetd.bridge.sessions import SessionState
from fleetd.screens.markers import COMPLETION_FALLBACK_MARKER
from tests.e2e.e2e_fleet import E2EFleet, start_e2e
from tests.metric_samples import sample


async def _ready(e2e: E2EFleet, lead: Any, name: str) -> str:
    row = await e2e.tool(lead, "fleet_spawn", profile="sonnet", name=name)
    sid: str = row["sessionId"]
    bridge = e2e.service.bridge

    def ready() -> bool:
        session = bridge.reads.session(sid)
        return session is not None and session.state is SessionState.READY

    await e2e.until(ready)
    return sid


async def _settled(e2e: E2EFleet, ticket: str) -> None:
    """Wait until the ticket ends, then let 15 more seconds pass (many poller passes)."""
    bridge = e2e.service.bridge
    await e2e.until(lambda: (t := bridge.reads.ticket(ticket)) is not None and t.terminal)
    await e2e.advance(15.0)


async def _replies(e2e: E2EFleet, lead: Any) -> list[Any]:
    inbox = await e2e.tool(lead, "fleet_poll")
    return [m.get("ticket") for m in inbox["messages"] if m["kind"] == "reply"]


@pytest.mark.parametrize(
    ("name", "failure", "source"),
    [
        ("m-typed", "agent_prompt_failed", "reply"),
        ("m-typed", "internal_error", "reply"),
        ("m-typed", "pane_send_failed", "reply"),
        ("m-typed", "never_heard_of_this", "reply"),
        ("m-typed", "unparseable", "reply"),
        ("m-typed-mute", "agent_prompt_failed", "fallback"),
    ],
)
async def test_a_prompt_typed_then_failed_is_never_typed_again(
    tmp_path: Path, name: str, failure: str, source: str
) -> None:
    """herdr types, then answers with an error or {}: one prompt, one reply, delivery uncertain."""
    agents = {name: {"prompt_failure": failure}}
    async with start_e2e(tmp_path, agents=agents) as e2e, e2e.http() as lead:
        assert e2e.service.config.current.health.enabled is False
        sid = await _ready(e2e, lead, name)
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="run once"))["ticket"]
        status = await e2e.tool(lead, "fleet_status", sessionId=sid)
        assert status["openTurn"]["ticket"] == ticket
        assert status["openTurn"]["delivery"] == "uncertain"
        assert (await e2e.tool(lead, "fleet_poll", ticket=ticket))["delivery"] == "uncertain"
        await _settled(e2e, ticket)
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["source"], polled["delivery"]) == (
            "done",
            source,
            "uncertain",
        )
        if source == "fallback":
            assert polled["content"].startswith(COMPLETION_FALLBACK_MARKER)
        else:
            assert polled["content"] == "Finished run once."
        agent = e2e.simulator.agent(name)
        assert (agent.prompt_requests, agent.turns) == (1, 1)
        assert await _replies(e2e, lead) == [ticket]


@pytest.mark.parametrize(
    "refusal", ["agent_blocked", "agent_not_ready", "empty_agent_prompt", "invalid_request"]
)
async def test_a_refusal_before_typing_is_retried_and_typed_once(
    tmp_path: Path, refusal: str
) -> None:
    """herdr refuses three times before typing, then takes the prompt: delivered once, confirmed."""
    agents = {"m-refused": {"prompt_refusal": refusal, "prompt_fault_count": 3}}
    async with start_e2e(tmp_path, agents=agents) as e2e, e2e.http() as lead:
        sid = await _ready(e2e, lead, "m-refused")
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="after refusals"))["ticket"]
        assert (await e2e.tool(lead, "fleet_status", sessionId=sid))["queued"] == 1
        waiting = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (waiting["status"], waiting["promptRefusals"]) == ("pending", 1)
        await _settled(e2e, ticket)
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["source"], polled["delivery"]) == (
            "done",
            "reply",
            "confirmed",
        )
        agent = e2e.simulator.agent("m-refused")
        assert (agent.prompt_requests, agent.turns) == (4, 1)
        assert await _replies(e2e, lead) == [ticket]


async def test_refusals_past_the_budget_fail_the_ticket_once_with_nothing_typed(
    tmp_path: Path,
) -> None:
    """Four refusals with a budget of three retries: the ticket fails once, after the backoff."""
    agents = {"m-refused": {"prompt_refusal": "agent_blocked", "prompt_fault_count": 4}}
    bridge = {"bridge": {"promptRetries": 3, "promptRetryBaseMs": 1000}}
    async with start_e2e(tmp_path, bridge, agents=agents) as e2e, e2e.http() as lead:
        sid = await _ready(e2e, lead, "m-refused")
        ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="never typed"))["ticket"]
        await _settled(e2e, ticket)
        polled = await e2e.tool(lead, "fleet_poll", ticket=ticket)
        assert (polled["status"], polled["reason"]) == ("failed", "prompt_refused")
        assert (polled["promptRefusals"], "delivery" in polled) == (4, False)
        assert "agent_blocked" in polled["hint"]
        assert "nothing was typed" in polled["hint"]
        waited = datetime.fromisoformat(polled["resolvedAt"]) - datetime.fromisoformat(
            polled["acceptedAt"]
        )
        assert waited >= timedelta(seconds=1 + 2 + 4)
        agent = e2e.simulator.agent("m-refused")
        assert (agent.prompt_requests, agent.turns) == (4, 0)
        assert sample(e2e.service.metrics.tickets_total, outcome="failed", source="none") == 1
        later = (await e2e.tool(lead, "fleet_send", target=sid, prompt="next task"))["ticket"]
        await _settled(e2e, later)
        assert (await e2e.tool(lead, "fleet_poll", ticket=later))["status"] == "done"
        assert (agent.prompt_requests, agent.turns, agent.last_prompt) == (5, 1, "next task")
        assert await _replies(e2e, lead) == [later]
