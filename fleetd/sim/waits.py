"""Blocking waits that hold their connection: ``agent.wait`` and ``agent.prompt`` with ``wait``.

As herdr's ``src/api/wait.rs``: every 100 ms the wait checks the client is still there, reads
the event log since it started (so a status that came and went between checks still matches
``agent.wait``), and fails with ``agent_not_running`` when the pane closes or exits, or
``timeout`` when ``timeout_ms`` passes. ``agent.prompt`` with ``wait`` first needs *some* state
change within 5 s of the prompt (else ``agent_prompt_stalled``, or ``timeout`` when the caller's
own timeout is that short), then waits for a current status in ``until``. A hang-up ends the
wait without an answer (``None``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from fleetd.clock import Clock
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.sim.agent import SimAgent
from fleetd.sim.agent_methods import AgentMethods, answer_after_typing
from fleetd.sim.requests import Params
from fleetd.sim.state import JsonObject
from fleetd.sim.world import World

__all__ = ["Waits"]

POLL_SECONDS = 0.1
PROMPT_EFFECT_MS = 5_000
DEFAULT_UNTIL = (AgentStatus.IDLE, AgentStatus.DONE, AgentStatus.BLOCKED)

Check = Callable[[], JsonObject | None]


class Waits:
    def __init__(self, world: World, agents: AgentMethods, clock: Clock) -> None:
        self.world = world
        self.agents = agents
        self.clock = clock

    async def agent_wait(self, p: Params, hangup: asyncio.Future[bytes]) -> JsonObject | None:
        agent = self.world.resolve_agent(p.text("target"))
        until = set(p.statuses("until") or DEFAULT_UNTIL)
        timeout_ms = p.opt_int("timeout_ms")
        if agent.status in until:
            return self._info(agent, "agent_info")
        cursor = self.world.seq

        def check() -> JsonObject | None:
            nonlocal cursor
            matched: AgentStatus | None = None
            for seq, envelope in self.world.events_after(cursor):
                cursor = seq
                data = envelope["data"]
                if data.get("pane_id") != agent.pane_id:
                    continue
                if envelope["event"] == "pane_agent_status_changed":
                    status = AgentStatus(data["agent_status"])
                    matched = status if status in until else matched
                if envelope["event"] in ("pane_closed", "pane_exited"):
                    raise HerdrError("agent_not_running", "the agent's pane is gone")
            if not agent.alive:
                raise HerdrError("agent_not_running", "the agent's pane is gone")
            if agent.status in until:
                return self._info(agent, "agent_info")
            if matched is not None:
                return self._info(agent, "agent_info", status=matched)
            return None

        return await self._poll(check, timeout_ms, "timed out waiting for agent status", hangup)

    async def prompt_and_wait(self, p: Params, hangup: asyncio.Future[bytes]) -> JsonObject | None:
        agent = self.world.resolve_agent(p.text("target"))
        text = p.text("text")
        wait = Params(p.obj("wait") or {})
        until = set(wait.statuses("until") or DEFAULT_UNTIL)
        timeout_ms = wait.opt_int("timeout_ms")
        failure = self.agents.type_prompt(agent, text)
        if failure is not None:
            return answer_after_typing(failure, {})
        baseline = agent.state_change_seq
        started = self.clock.monotonic()
        if agent.status is not AgentStatus.WORKING:
            effect_ms = (
                PROMPT_EFFECT_MS if timeout_ms is None else min(timeout_ms, PROMPT_EFFECT_MS)
            )
            stalled = timeout_ms is None or timeout_ms > PROMPT_EFFECT_MS

            def moved() -> JsonObject | None:
                self._alive(agent)
                return {} if agent.state_change_seq > baseline else None

            outcome = await self._poll(
                moved,
                effect_ms,
                "the prompt caused no state change" if stalled else "timed out",
                hangup,
                code="agent_prompt_stalled" if stalled else "timeout",
            )
            if outcome is None:
                return None
        remaining = None
        if timeout_ms is not None:
            spent = int((self.clock.monotonic() - started) * 1000)
            remaining = max(0, timeout_ms - spent)

        def settled() -> JsonObject | None:
            self._alive(agent)
            return self._info(agent, "agent_prompted") if agent.status in until else None

        return await self._poll(settled, remaining, "timed out waiting for agent status", hangup)

    def _alive(self, agent: SimAgent) -> None:
        if not agent.alive:
            raise HerdrError("agent_not_running", "the agent's pane is gone")

    def _info(self, agent: SimAgent, kind: str, status: AgentStatus | None = None) -> JsonObject:
        wire = self.world.agent_wire(agent)
        if status is not None:
            wire["agent_status"] = str(status)
        return {"type": kind, "agent": wire}

    async def _poll(
        self,
        check: Check,
        timeout_ms: int | None,
        message: str,
        hangup: asyncio.Future[bytes],
        *,
        code: str = "timeout",
    ) -> JsonObject | None:
        deadline = None if timeout_ms is None else self.clock.monotonic() + timeout_ms / 1000
        while True:
            if hangup.done():
                return None
            result = check()
            if result is not None:
                return result
            if deadline is not None and self.clock.monotonic() >= deadline:
                raise HerdrError(code, message)
            tick = asyncio.ensure_future(self.clock.sleep(POLL_SECONDS))
            try:
                either: set[asyncio.Future[Any]] = {tick, hangup}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            finally:
                tick.cancel()
                await asyncio.gather(tick, return_exceptions=True)
