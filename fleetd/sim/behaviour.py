"""The default simulated agent: acts out launches and turns as its scenario profile says.

A turn goes ``react_seconds`` after the prompt to ``working`` with a screen that changes every
``frame_seconds``, then after ``turn_seconds`` back to the prompt (``done`` until someone
focuses it) with a final screen whose last assistant block is the answer. Turn faults
(:class:`~fleetd.sim.scenario.Fault`) bend that script: ``instant`` (shorter than one 250 ms
poll), ``stall`` (working forever, screen frozen), ``blocked`` (an approval prompt halfway),
``exit`` (the process dies, the pane is gone), ``error_screen`` (a fatal signature instead of an
answer while herdr says idle/done) and ``mute`` (the turn ends without :meth:`deliver_reply`).

Subclass and override :meth:`ScriptedBehaviour.deliver_reply` ``(agent, text, answer)`` (or
:meth:`answer_for`) to make members talk back to fleetd — for example POST ``fleet_reply`` with
a token read from ``agent.env`` — while keeping every fault knob. ``deliver_reply`` runs while the
agent is still ``working``, just before the final screen; if it raises, the turn still ends.
"""

from __future__ import annotations

import logging

from fleetd.sim import screens
from fleetd.sim.agent import SimAgent
from fleetd.sim.scenario import Fault
from fleetd.sim.state import AgentState

__all__ = ["ScriptedBehaviour"]

_log = logging.getLogger(__name__)

_PROMPT_HEAD = 200


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class ScriptedBehaviour:
    """:class:`~fleetd.sim.agent.AgentBehaviour` driven by the agent's ``AgentProfile``."""

    async def on_launch(self, agent: SimAgent) -> None:
        profile = agent.profile
        limit = agent.start_timeout_ms / 1000
        if profile.has(Fault.NEVER_READY):
            await agent.sleep(limit)
            agent.mark_launch_failed()
            return
        delay = (
            profile.slow_start_seconds if profile.has(Fault.SLOW_START) else profile.start_seconds
        )
        if delay > limit:
            await agent.sleep(limit)
            agent.mark_launch_failed()
            return
        await agent.sleep(delay)
        agent.mark_ready()

    async def on_prompt(self, agent: SimAgent, text: str) -> None:
        profile, faults = agent.profile, agent.current_faults
        await agent.sleep(profile.react_seconds)
        started = agent.clock.monotonic()
        agent.frame = 0
        agent.set_state(AgentState.WORKING, self._working(agent, text, started))
        if Fault.STALL in faults:
            await agent.hang()
        duration = profile.instant_seconds if Fault.INSTANT in faults else profile.turn_seconds
        if Fault.EXIT in faults:
            await agent.sleep(duration / 2)
            agent.exit()
            return
        if Fault.BLOCKED in faults:
            await self._work(agent, text, duration / 2, started)
            agent.set_state(AgentState.BLOCKED, screens.blocked(agent.kind, text, agent.cwd))
            if not await agent.approval():
                screen = screens.interrupted(agent.kind, text, agent.cwd)
                agent.set_state(AgentState.IDLE, screen)
                return
            agent.set_state(AgentState.WORKING, self._working(agent, text, started))
            await self._work(agent, text, duration / 2, started)
        else:
            await self._work(agent, text, duration, started)
        answer = self.answer_for(agent, text)
        if Fault.MUTE not in faults:
            try:
                await self.deliver_reply(agent, text, answer)
            except Exception:  # noqa: BLE001 - a failed callback must not wedge the turn
                _log.exception("deliver_reply failed for %s", agent.name or agent.pane_id)
        elapsed = agent.clock.monotonic() - started
        if Fault.ERROR_SCREEN in faults:
            signature = profile.error_signature
            final = screens.errored(agent.kind, text, signature, elapsed=elapsed, cwd=agent.cwd)
        else:
            final = screens.done(agent.kind, text, answer, elapsed=elapsed, cwd=agent.cwd)
        agent.set_state(AgentState.IDLE, final)

    def answer_for(self, agent: SimAgent, text: str) -> str:
        """The final assistant text of a turn (``answer`` template of the profile)."""
        head = text.strip().split("\n", 1)[0][:_PROMPT_HEAD]
        fill = _Fill(name=agent.name or agent.kind, turn=str(agent.turns), prompt=head)
        try:
            return agent.profile.answer.format_map(fill)
        except (ValueError, IndexError, AttributeError):
            return agent.profile.answer

    async def deliver_reply(self, agent: SimAgent, text: str, answer: str) -> None:
        """Hook: hand the answer to whoever waits for it. Skipped under ``mute``; no-op here."""
        return

    async def _work(self, agent: SimAgent, text: str, seconds: float, started: float) -> None:
        remaining = seconds
        step = agent.profile.frame_seconds
        while remaining > 0:
            chunk = remaining if step <= 0 else min(step, remaining)
            await agent.sleep(chunk)
            remaining -= chunk
            if remaining > 0:
                agent.frame += 1
                agent.show(self._working(agent, text, started))

    def _working(self, agent: SimAgent, text: str, started: float) -> list[str]:
        elapsed = agent.clock.monotonic() - started
        return screens.working(agent.kind, text, frame=agent.frame, elapsed=elapsed, cwd=agent.cwd)
