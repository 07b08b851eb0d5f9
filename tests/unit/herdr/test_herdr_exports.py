"""The public names of fleetd.herdr and fleetd.sim are pinned (others integrate against them)."""

from __future__ import annotations

import fleetd.herdr
import fleetd.sim


def test_herdr_public_names() -> None:
    """fleetd.herdr exports exactly its documented API."""
    assert sorted(fleetd.herdr.__all__) == [
        "AgentControl",
        "AgentInfo",
        "AgentStarted",
        "AgentStatus",
        "HerdrAgentControl",
        "HerdrSocketClient",
        "PaneInfo",
        "Pong",
        "ProcessInfo",
        "PromptWait",
        "ReadResult",
        "ReadSource",
        "SessionSnapshot",
        "SplitDirection",
        "TabCreated",
        "WorkspaceCreated",
        "resolve_socket_path",
    ]
    assert all(hasattr(fleetd.herdr, name) for name in fleetd.herdr.__all__)


def test_sim_public_names() -> None:
    """fleetd.sim exports the simulator, its entry points and the behaviour hooks."""
    assert sorted(fleetd.sim.__all__) == [
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
    assert all(hasattr(fleetd.sim, name) for name in fleetd.sim.__all__)
