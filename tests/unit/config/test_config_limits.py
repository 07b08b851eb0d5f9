"""Every number has an upper bound, and no YAML shape makes the reader give up: `fleetd
check-config` exits 2 naming the key (or the file) instead of accepting or crashing."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetd.config import HealthConfig, check_config_main, parse_config
from fleetd.config.keys import KeySpec, iter_keys, upper_bound
from fleetd.config.loader import MAX_NESTING
from fleetd.config.providers import ModelHealthConfig
from fleetd.config.sections import (
    AmqpConfig,
    BridgeConfig,
    HerdrConfig,
    ProfileConfig,
    PushConfig,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "fleetd.example.yaml"
HUGE = 10**300


def _run(path: Path, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = check_config_main([str(path)], environ=environ or {}, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _numeric_keys() -> Iterator[KeySpec]:
    """Every integer key, profile keys included (as ``profiles.p.<key>``)."""
    for spec in [*iter_keys(), *iter_keys(ProfileConfig, "profiles.p.")]:
        if "int" in str(spec.field.annotation):
            yield spec


def _document(dotted: str, value: object) -> dict[str, Any]:
    *sections, leaf = dotted.split(".")
    document: dict[str, Any] = {leaf: value}
    if sections[:2] == ["profiles", "p"]:
        document["kind"] = "codex"
    for section in reversed(sections):
        document = {section: document}
    return document


def test_every_number_is_refused_past_its_bound_naming_the_key(tmp_path: Path) -> None:
    """A value like 10**300 in any integer key (every duration among them) exits 2 naming it."""
    keys = [spec.dotted for spec in _numeric_keys()]
    assert "health.snapshotIntervalSeconds" in keys
    assert "profiles.p.maxLoad" in keys
    accepted = []
    for dotted in keys:
        path = tmp_path / "fleetd.yaml"
        path.write_text(yaml.safe_dump(_document(dotted, HUGE)))
        code, out, err = _run(path)
        if (code, out) != (2, "") or not err.startswith(f"config error: {dotted}: "):
            accepted.append(dotted)
        assert str(HUGE) not in err
    assert accepted == []


def test_durations_stop_at_an_hour_or_a_day() -> None:
    """A cadence is bounded by an hour, a waiting period by a day; at the bound every duration
    the loops use still computes."""
    bounds = {
        spec.dotted: upper_bound(spec.field)
        for spec in iter_keys()
        if spec.dotted.endswith("Seconds")
    }
    assert bounds == {
        "bridge.readinessGraceSeconds": 3600,
        "bridge.ticketRetentionSeconds": 86_400,
        "bridge.push.heartbeatIntervalSeconds": 86_400,
        "health.snapshotIntervalSeconds": 3600,
        "health.notifications.alertmanagerRepostSeconds": 3600,
        "health.workingSuspectAfterSeconds": 86_400,
        "health.paneProbeIntervalSeconds": 3600,
        "health.leadUnresponsiveAfterSeconds": 86_400,
        "health.humanRepeatSeconds": 86_400,
        "health.capacityLongIdleAfterSeconds": 86_400,
        "modelHealth.probeIntervalSeconds": 86_400,
    }
    document: dict[str, Any] = {}
    for spec in _numeric_keys():
        bound = upper_bound(spec.field)
        assert bound is not None, spec.dotted
        node = document
        *sections, leaf = spec.dotted.split(".")
        for name in sections:
            node = node.setdefault(name, {})
        node[leaf] = bound
    document["profiles"]["p"]["kind"] = "codex"
    document["api"]["standbyPort"] -= 1  # it may not be api.port, which is at its bound too
    config = parse_config(document, {}).config
    for model, section in (
        (HealthConfig, config.health),
        (BridgeConfig, config.bridge),
        (PushConfig, config.bridge.push),
        (ModelHealthConfig, config.model_health),
        (AmqpConfig, config.inbox.amqp),
        (HerdrConfig, config.herdr),
    ):
        for name, member in vars(model).items():
            value = getattr(section, name) if isinstance(member, property) else None
            if isinstance(value, timedelta):
                assert value.total_seconds() > 0, name


def _example_keys(lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line index, dotted key) of each key line in the example, profile names as ``p``."""
    path: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        match = re.match(r"^(\s*)(- )?([A-Za-z]+):", line)
        if match is None:
            continue
        indent = len(match.group(1)) + len(match.group(2) or "")
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match.group(3)))
        names = [name for _, name in path]
        if names[0] == "profiles" and len(names) > 1:
            names[1] = "p"
        yield number, ".".join(names)


def test_the_example_states_each_upper_bound() -> None:
    """The comment above each bounded key in fleetd.example.yaml names its upper bound."""
    lines = EXAMPLE.read_text().splitlines()
    bounds = {spec.dotted: upper_bound(spec.field) for spec in _numeric_keys()}
    seen, undocumented = set(), []
    for number, dotted in _example_keys(lines):
        if dotted not in bounds:
            continue
        seen.add(dotted)
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            above -= 1
        comment = " ".join(lines[above + 1 : number]).replace(",", "")
        if not re.search(rf"\b{bounds[dotted]}\b", comment):
            undocumented.append(dotted)
    assert seen == set(bounds)
    assert undocumented == []


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("health:\n  enabled: " + "[" * 5000 + "]" * 5000 + "\n", id="flow-lists"),
        pytest.param("api: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", id="flow-maps"),
        pytest.param(
            "".join(" " * i + f"k{i}:\n" for i in range(1200)) + " " * 1200 + "v: 1\n",
            id="block-maps",
        ),
        pytest.param("a: &a [*a]\n", id="recursive-alias"),
    ],
)
def test_yaml_nested_thousands_deep_exits_2(tmp_path: Path, text: str) -> None:
    """Deep nesting is a config error naming the file, not a RecursionError."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(text)
    code, out, err = _run(path)
    assert (code, out) == (2, "")
    assert err.startswith(f"config error: {path}: ")
    assert f"nested deeper than {MAX_NESTING} levels" in err


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    """The limit is on depth, not content: a document at the limit reaches validation."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("bogus: " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "\n")
    assert _run(path)[2] == "config error: bogus: unknown key\n"


def test_aliases_that_expand_past_the_value_limit_exit_2(tmp_path: Path) -> None:
    """A few nested aliases standing for millions of values are refused before any copy."""
    lines = ["a0: &a0 [1, 1]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 24)]
    path = tmp_path / "fleetd.yaml"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = _run(path)
    assert code == 2
    assert err.startswith(f"config error: {path}: more than ")
