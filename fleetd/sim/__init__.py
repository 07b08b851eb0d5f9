"""A herdr-protocol simulator: a fake herdr server on a real Unix socket.

It lets ``make demo`` and the integration tests run fleetd against herdr's JSON socket API
without herdr or real agents: workspaces, tabs and panes with herdr-shaped ids, simulated
Claude Code / Codex / OpenCode agents whose screens look like the real TUIs, herdr's status
model (``done`` until focused, then ``idle``), blocking waits, subscriptions, and fault knobs
per agent and per server, all driven from a scenario file (:mod:`fleetd.sim.scenario`) and an
injected clock.

Entry points: :class:`HerdrSimulator` (importable, ``await start()`` / ``await stop()``),
:func:`run_sim` and :func:`main` (the ``fleetd sim`` command). Importing starts nothing.
"""

from __future__ import annotations

from fleetd.sim.agent import AgentBehaviour, SimAgent
from fleetd.sim.behaviour import ScriptedBehaviour
from fleetd.sim.run import bundled_scenario, main, run_sim
from fleetd.sim.scenario import AgentProfile, Fault, Scenario, load_scenario, parse_scenario
from fleetd.sim.server import HerdrSimulator

__all__ = [
    "AgentBehaviour",
    "AgentProfile",
    "Fault",
    "HerdrSimulator",
    "Scenario",
    "ScriptedBehaviour",
    "SimAgent",
    "bundled_scenario",
    "load_scenario",
    "main",
    "parse_scenario",
    "run_sim",
]
