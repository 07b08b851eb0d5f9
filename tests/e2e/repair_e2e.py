"""Lost-boundary repair through the simulator: a member whose second turn ends unseen, a pane-read
hold to pin races down, and the criterion-20 check over every recorded herdr request."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from fleetd.bridge.sessions import Session, SessionState
from fleetd.errors import HerdrError
from tests.e2e.e2e_fleet import E2EFleet
from tests.metric_samples import sample

# The status poller looks only once a minute, so it never sees a member's short turn: the bridge
# keeps the session BUSY while herdr says done — the missed boundary of trace 1 (M4 §2.1).
SLOW_POLL = {"statusPollIntervalMs": 60000}
HEALTH = {"enabled": True, "snapshotIntervalSeconds": 15}
OVERRIDES: dict[str, Any] = {"herdr": SLOW_POLL, "health": HEALTH}
# Turn 1 ends with fleet_reply (its answer stays on screen: the baseline of turn 2); from turn 2
# the member no longer calls fleet_reply.
AGENTS: dict[str, Any] = {
    "*lost*": {"faults": ["mute"], "fault_from_turn": 2},
    "*same*": {"faults": ["mute"], "fault_from_turn": 2, "answer": "The same answer."},
    "*broke*": {
        "faults": ["error_screen", "mute"],
        "fault_from_turn": 2,
        "error_signature": "overloaded",
    },
}
TYPING = frozenset(
    {"agent.prompt", "agent.send_keys", "pane.send_text", "pane.send_keys", "pane.send_input"}
)


@dataclass
class LostE2E:
    """One member in the simulator whose second turn's boundary the bridge missed."""

    e2e: E2EFleet
    lead: httpx.AsyncClient
    name: str
    session_id: str
    first: str
    ticket: str

    @property
    def session(self) -> Session:
        session = self.e2e.service.bridge.reads.session(self.session_id)
        assert session is not None
        return session

    @property
    def token(self) -> str:
        turn = self.e2e.service.bridge.reads.open_turn(self.session_id)
        assert turn is not None
        return turn.token.token_id

    async def member_reply(self, content: str) -> dict[str, Any]:
        token = self.e2e.simulator.agent(self.name).env["FLEETD_TOKEN"]
        async with self.e2e.http(token) as member:
            return await self.e2e.tool(member, "fleet_reply", content=content)

    def repairs(self, result: str) -> float | None:
        return sample(self.e2e.service.metrics.repairs_total, result=result)

    async def poll(self, ticket: str) -> dict[str, Any]:
        return await self.e2e.tool(self.lead, "fleet_poll", ticket=ticket)

    async def health_records(self) -> list[dict[str, Any]]:
        inbox = await self.e2e.tool(self.lead, "fleet_poll")
        return [m for m in inbox["messages"] if m["kind"] == "health"]


async def lose_second_turn(e2e: E2EFleet, lead: httpx.AsyncClient, name: str) -> LostE2E:
    """Spawn ``name``; turn 1 ends by fleet_reply, turn 2 ends on screen but unseen."""
    bridge = e2e.service.bridge
    sid = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name=name))["sessionId"]
    await e2e.until(lambda: _state(e2e, sid) is SessionState.READY)
    first = (await e2e.tool(lead, "fleet_send", target=sid, prompt="one"))["ticket"]
    await e2e.until(lambda: _terminal(e2e, first))
    ticket = (await e2e.tool(lead, "fleet_send", target=sid, prompt="two"))["ticket"]
    agent = e2e.simulator.agent(name)
    await e2e.until(lambda: agent.turns == 2 and agent.status.value == "done")
    assert _state(e2e, sid) is SessionState.BUSY
    turn = bridge.reads.open_turn(sid)
    assert turn is not None
    assert turn.baseline is not None
    return LostE2E(e2e=e2e, lead=lead, name=name, session_id=sid, first=first, ticket=ticket)


def _state(e2e: E2EFleet, sid: str) -> SessionState | None:
    session = e2e.service.bridge.reads.session(sid)
    return session.state if session is not None else None


def _terminal(e2e: E2EFleet, ticket: str) -> bool:
    found = e2e.service.bridge.reads.ticket(ticket)
    return found is not None and found.terminal


def member_state(e2e: E2EFleet, sid: str) -> str | None:
    evidence = e2e.service.health.state.members.get(sid)
    return None if evidence is None else str(evidence.state)


@dataclass
class ReadHold:
    """Wraps the service's herdr ``read``: ``arm()`` holds the next pane read until ``release``;
    ``failing`` makes every read fail as an unreadable pane."""

    failing: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    _armed: bool = False

    def arm(self) -> None:
        self._armed = True

    def release(self) -> None:
        self.released.set()

    def install(self, e2e: E2EFleet) -> ReadHold:
        control = e2e.service.control
        original: Callable[..., Awaitable[Any]] = control.read

        async def read(*args: Any, **kwargs: Any) -> Any:
            if self.failing:
                raise HerdrError("pane_read_failed", "the simulated read failed")
            if self._armed:
                self._armed = False
                self.entered.set()
                await self.released.wait()
            return await original(*args, **kwargs)

        control.read = read  # type: ignore[method-assign]
        return self


def assert_nothing_replayed(e2e: E2EFleet) -> None:
    """Criterion 20 over every herdr request the simulator received: each task prompt was typed
    once and to one member; nothing but an Enter re-submit was ever typed besides prompts. (The
    leads' inbox nudges are fleetd's own words to a lead, not a delegated task.)"""
    leads = {lead.agent for lead in e2e.service.config.current.leads}
    typed = [
        r
        for r in e2e.herdr_requests
        if r["method"] in TYPING and r["params"].get("target") not in leads
    ]
    prompts = [r["params"] for r in typed if r["method"] == "agent.prompt"]
    counts = Counter((p["target"], p["text"]) for p in prompts)
    assert all(n == 1 for n in counts.values()), f"a prompt was typed twice: {counts}"
    texts = Counter(p["text"] for p in prompts)
    assert all(n == 1 for n in texts.values()), "a prompt went to a second target"
    for request in typed:
        if request["method"] == "agent.send_keys":
            assert request["params"]["keys"] == ["enter"]
        else:
            assert request["method"] == "agent.prompt", request
