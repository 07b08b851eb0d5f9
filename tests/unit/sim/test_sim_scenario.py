"""Scenario files: validation with key paths, profile precedence, bundled scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetd.errors import ConfigError
from fleetd.herdr.model import AgentStatus
from fleetd.sim import bundled_scenario, load_scenario, parse_scenario
from fleetd.sim.scenario import AgentProfile, Fault


def test_profile_precedence_defaults_kind_pattern_override() -> None:
    """defaults < kinds[kind] < matching agent patterns (file order) < inline overrides."""
    scenario = parse_scenario(
        {
            "defaults": {"turn_seconds": 1.0, "start_seconds": 2.0, "react_seconds": 0.5},
            "kinds": {"codex": {"turn_seconds": 2.0, "start_seconds": 3.0}},
            "agents": {"m-*": {"turn_seconds": 3.0}, "m-slow*": {"turn_seconds": 9.0}},
        }
    )
    profile = scenario.profile_for(name="m-slow-1", kind="codex", overrides={"react_seconds": 0})
    assert profile.turn_seconds == 9.0
    assert profile.start_seconds == 3.0
    assert profile.react_seconds == 0.0
    assert scenario.profile_for(name=None, kind="claude") == AgentProfile(
        turn_seconds=1.0, start_seconds=2.0, react_seconds=0.5
    )


def test_turn_faults_start_at_fault_from_turn() -> None:
    """Turn faults apply from `fault_from_turn` on; launch faults are not turn faults."""
    profile = AgentProfile(faults=frozenset({Fault.STALL, Fault.NEVER_READY}), fault_from_turn=2)
    assert profile.turn_faults(1) == frozenset()
    assert profile.turn_faults(2) == {Fault.STALL}


def test_prompt_knobs_hit_the_first_n_requests_or_every_one() -> None:
    """`prompt_fault_count` limits the prompt knobs to the first N requests; null means all."""
    scenario = parse_scenario(
        {
            "agents": {
                "m-*": {"prompt_failure": "unparseable"},
                "m-two": {"prompt_refusal": "agent_blocked", "prompt_fault_count": 2},
            }
        }
    )
    every = scenario.profile_for(name="m-one", kind="claude")
    assert every.prompt_failure == "unparseable"
    assert all(every.prompt_faulted(n) for n in (1, 2, 100))
    two = scenario.profile_for(name="m-two", kind="claude")
    assert two.prompt_refusal == "agent_blocked"
    assert [two.prompt_faulted(n) for n in (1, 2, 3)] == [True, True, False]


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"bogus": 1}, "bogus"),
        ({"version": 2}, "version"),
        ({"server": {"latency": 1}}, "server.latency"),
        ({"server": {"latency_seconds": -1}}, "server.latency_seconds"),
        ({"server": {"unresponsive": "yes"}}, "server.unresponsive"),
        ({"defaults": {"turn_secs": 1}}, "defaults.turn_secs"),
        ({"defaults": {"turn_seconds": "fast"}}, "defaults.turn_seconds"),
        ({"defaults": {"faults": ["explode"]}}, "defaults.faults"),
        ({"defaults": {"faults": "stall"}}, "defaults.faults"),
        ({"defaults": {"fault_from_turn": 0}}, "defaults.fault_from_turn"),
        ({"kinds": {"codex": {"nope": 1}}}, "kinds.codex.nope"),
        ({"agents": {"m*": {"answer": 3}}}, "agents.m*.answer"),
        ({"existing": {"name": "x"}}, "existing"),
        ({"existing": [{"name": "Bad"}]}, "existing[0].name"),
        ({"existing": [{"name": "a", "kind": "vim"}]}, "existing[0].kind"),
        ({"existing": [{"name": "a", "status": "busy"}]}, "existing[0].status"),
        ({"existing": [{"name": "a", "speed": 1}]}, "existing[0].speed"),
        ({"existing": [{"name": "a"}, {"name": "a"}]}, "existing"),
        ({"defaults": {"prompt_refusal": "Agent Blocked"}}, "defaults.prompt_refusal"),
        ({"defaults": {"prompt_failure": 7}}, "defaults.prompt_failure"),
        ({"defaults": {"prompt_fault_count": 0}}, "defaults.prompt_fault_count"),
        ({"defaults": {"prompt_fault_count": True}}, "defaults.prompt_fault_count"),
    ],
)
def test_bad_scenarios_name_the_key(data: dict[str, Any], key: str) -> None:
    """Every validation error is a ConfigError naming the offending key path."""
    with pytest.raises(ConfigError) as info:
        parse_scenario(data)
    assert info.value.key == key


def test_existing_panes_parse_agents_and_shells() -> None:
    """`existing` entries are agents (name+kind, status, env, overrides) or bare shells."""
    scenario = parse_scenario(
        {
            "existing": [
                {"name": "lead", "kind": "claude-code", "status": "done", "env": {"A": 1},
                 "turn_seconds": 5},
                {"shell": True, "cwd": "/tmp", "label": "spare"},
            ]
        }
    )  # fmt: skip
    lead, shell = scenario.existing
    assert lead.kind == "claude"
    assert lead.status is AgentStatus.DONE
    assert lead.env == {"A": "1"}
    assert lead.overrides == {"turn_seconds": 5}
    assert shell.kind is None
    assert shell.label == "spare"


@pytest.mark.parametrize("name", ["demo", "faults"])
def test_bundled_scenarios_load(name: str) -> None:
    """The shipped scenarios are valid and start with a lead named `lead`."""
    scenario = load_scenario(bundled_scenario(name))
    assert scenario.existing[0].name == "lead"


def test_faults_scenario_maps_names_to_faults() -> None:
    """In the faults scenario an agent's name selects its fault."""
    scenario = load_scenario(bundled_scenario("faults"))
    assert scenario.profile_for(name="m-stall-1", kind="codex").faults == {Fault.STALL}
    assert scenario.profile_for(name="m-never-ready", kind="claude").faults == {Fault.NEVER_READY}
    assert scenario.profile_for(name="m-usage", kind="claude").error_signature == "usage-limit"
    assert scenario.profile_for(name="m-healthy", kind="claude").faults == frozenset()


def test_unknown_bundled_scenario_and_unreadable_files(tmp_path: Path) -> None:
    """Missing bundled names, missing files and invalid YAML are ConfigErrors."""
    with pytest.raises(ConfigError):
        bundled_scenario("nope")
    with pytest.raises(ConfigError):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_scenario(bad)
