"""herdr's ``agent.*`` one-shot methods, and the agent an ``agent.start`` puts in a pane.

herdr rules kept here: ``agent.prompt`` refuses an empty text (``empty_agent_prompt``), a
launching agent (``agent_not_ready``) and a blocked one (``agent_blocked``) before typing, and the
scenario's prompt knobs refuse before typing or fail after it (:meth:`AgentMethods.type_prompt`,
which ``agent.prompt_and_wait`` shares); ``agent.start`` needs an idle shell pane and answers at
once with ``launch_pending``; ``agent.read`` of more ``recent`` lines than the screen holds is
refused while the agent is not idle (``agent_not_idle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetd.clock import Clock
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus, ReadSource
from fleetd.herdr.rules import canonical_kind, is_valid_agent_name, is_valid_start_timeout
from fleetd.sim import screens
from fleetd.sim.agent import AgentBehaviour, SimAgent
from fleetd.sim.pane_methods import VISIBLE_ROWS, checked_keys, read_pane
from fleetd.sim.requests import Handler, Params
from fleetd.sim.scenario import Scenario
from fleetd.sim.state import AgentState, JsonObject, Pane
from fleetd.sim.world import World

__all__ = ["UNPARSEABLE", "AgentMethods", "answer_after_typing"]

#: The ``prompt_failure`` value that answers a typed prompt with an empty result, ``{}``.
UNPARSEABLE = "unparseable"


def answer_after_typing(failure: str | None, result: JsonObject) -> JsonObject:
    """``result``, or the scenario's failure for a prompt that was already typed."""
    if failure == UNPARSEABLE:
        return {}
    if failure is not None:
        raise HerdrError(failure, "simulated failure after the prompt was typed")
    return result


class AgentMethods:
    """``agent.list`` … ``agent.prompt``, and spawning an agent into a pane."""

    def __init__(
        self, *, world: World, scenario: Scenario, clock: Clock, behaviour: AgentBehaviour
    ) -> None:
        self.world = world
        self.scenario = scenario
        self.clock = clock
        self.behaviour = behaviour

    def table(self) -> dict[str, Handler]:
        """The methods by herdr name."""
        return {
            "agent.list": self.agent_list,
            "agent.get": self.agent_get,
            "agent.focus": self.agent_focus,
            "agent.read": self.agent_read,
            "agent.send_keys": self.agent_send_keys,
            "agent.start": self.agent_start,
            "agent.prompt": self.agent_prompt,
        }

    def spawn_agent(
        self,
        pane: Pane[SimAgent],
        *,
        name: str | None,
        kind: str,
        args: list[str] | None = None,
        timeout_ms: int | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> SimAgent:
        profile = self.scenario.profile_for(name=name, kind=kind, overrides=overrides)
        agent = SimAgent(
            host=self.world,
            pane=pane,
            name=name,
            kind=kind,
            profile=profile,
            behaviour=self.behaviour,
            clock=self.clock,
            args=args or (),
            start_timeout_ms=timeout_ms,
        )
        pane.agent = agent
        self.world.emit(
            "pane_agent_detected",
            {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id, "agent": kind},
        )
        return agent

    def _agent_info(self, agent: SimAgent, kind: str = "agent_info") -> JsonObject:
        return {"type": kind, "agent": self.world.agent_wire(agent)}

    def agent_list(self, p: Params) -> JsonObject:
        agents = [self.world.agent_wire(a) for a in self.world.listed_agents()]
        return {"type": "agent_list", "agents": agents}

    def agent_get(self, p: Params) -> JsonObject:
        return self._agent_info(self.world.resolve_agent(p.text("target")))

    def agent_focus(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        self.world.focus_pane(agent.pane)
        return self._agent_info(agent)

    def agent_read(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        source, lines = p.source(), p.opt_int("lines")
        scrolls = source in (ReadSource.RECENT, ReadSource.RECENT_UNWRAPPED)
        long_read = scrolls and lines is not None and lines > VISIBLE_ROWS
        if long_read and agent.state is not AgentState.IDLE:
            raise HerdrError("agent_not_idle", "agent must be idle to read history")
        fmt = p.opt_text("format") or "text"
        return {"type": "pane_read", "read": read_pane(agent.pane, source, lines, fmt)}

    def agent_send_keys(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        keys = checked_keys(p.strings("keys", required=True))
        if not agent.interactive_ready and not agent.launch_pending:
            raise HerdrError("agent_not_ready", "the agent is no longer the pane's occupant")
        agent.press(keys)
        return {"type": "ok"}

    def agent_start(self, p: Params) -> JsonObject:
        name, kind, pane_id = p.text("name"), p.text("kind"), p.text("pane_id")
        args, timeout_ms = p.strings("args"), p.opt_int("timeout_ms")
        if not is_valid_agent_name(name):
            raise HerdrError("invalid_agent_name", "names match [a-z][a-z0-9_-]{0,31}")
        label = canonical_kind(kind)
        if label is None:
            raise HerdrError("unsupported_agent_kind", f"unknown agent kind {kind}")
        if timeout_ms is not None and not is_valid_start_timeout(timeout_ms):
            raise HerdrError("invalid_agent_timeout", "timeout_ms must be >3000 and <=300000")
        if any("\n" in a for a in args):
            raise HerdrError("invalid_agent_argument", "arguments cannot contain newlines")
        pane = self.world.pane(pane_id, "agent_pane_not_found")
        if pane.agent is not None:
            raise HerdrError("agent_pane_busy", "the pane already runs an agent")
        if any(a.name == name for a in self.world.agents()):
            raise HerdrError("agent_name_taken", f"an agent named {name} already exists")
        argv = [label, *args]
        pane.screen = screens.launching(label, argv, pane.cwd)
        agent = self.spawn_agent(pane, name=name, kind=label, args=args, timeout_ms=timeout_ms)
        agent.launch()
        return {"type": "agent_started", "agent": self.world.agent_wire(agent), "argv": argv}

    def check_promptable(self, agent: SimAgent, text: str) -> None:
        if not text:
            raise HerdrError("empty_agent_prompt", "prompt text is empty")
        if agent.launch_pending or not agent.interactive_ready:
            raise HerdrError("agent_not_ready", "the agent is not ready for input")
        if agent.status is AgentStatus.BLOCKED:
            raise HerdrError("agent_blocked", "the agent is waiting for an approval")

    def type_prompt(self, agent: SimAgent, text: str) -> str | None:
        """herdr's checks, then the prompt and Enter typed; the failure to answer after, if any.

        A scenario ``prompt_refusal`` is raised before anything is typed, as herdr's own refusals.
        """
        self.check_promptable(agent, text)
        agent.prompt_requests += 1
        faulted = agent.profile.prompt_faulted(agent.prompt_requests)
        if faulted and agent.profile.prompt_refusal is not None:
            raise HerdrError(agent.profile.prompt_refusal, "simulated refusal, nothing typed")
        agent.type(text)
        agent.press(["enter"])
        return agent.profile.prompt_failure if faulted else None

    def agent_prompt(self, p: Params) -> JsonObject:
        agent = self.world.resolve_agent(p.text("target"))
        failure = self.type_prompt(agent, p.text("text"))
        return answer_after_typing(failure, self._agent_info(agent, "agent_prompted"))
