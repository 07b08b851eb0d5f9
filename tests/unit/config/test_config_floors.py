"""Compiled floors: a lower value is raised to the floor with one warning; nothing lowers one."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.config import FLOORS, HealthConfig, load_config, parse_config
from fleetd.config.env import env_name
from fleetd.config.keys import get_value, iter_keys, upper_bound

SPECS = {spec.dotted: spec for spec in iter_keys()}


def _document(key: str, value: object) -> dict[str, Any]:
    *sections, leaf = key.split(".")
    document: dict[str, Any] = {leaf: value}
    for section in reversed(sections):
        document = {section: document}
    return document


def test_every_floor_names_a_real_key() -> None:
    """Each floor belongs to an integer key of the model."""
    for key in FLOORS:
        assert key in SPECS, key


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_below_floor_clamps_with_one_warning(key: str) -> None:
    """A value under the floor runs at the floor and produces exactly one warning naming the key."""
    floor = FLOORS[key]
    loaded = parse_config(_document(key, floor - 1), {})
    assert get_value(loaded.config, SPECS[key].names) == floor
    assert loaded.warnings == (f"{key}={floor - 1} is below its floor {floor}; using {floor}",)


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_at_or_above_floor_is_kept_silently(key: str) -> None:
    """A value at or above its floor is used as given, without a warning."""
    floor = FLOORS[key]
    for value in (floor, floor + 7):
        loaded = parse_config(_document(key, value), {})
        assert get_value(loaded.config, SPECS[key].names) == value
        assert loaded.warnings == ()


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_env_override_below_floor_clamps(key: str) -> None:
    """A floor also holds against an environment override, with the same warning."""
    floor = FLOORS[key]
    loaded = parse_config(None, {env_name(key): str(floor - 1)})
    assert get_value(loaded.config, SPECS[key].names) == floor
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith(f"{key}=")


def test_direct_construction_cannot_go_below_a_floor() -> None:
    """The clamp lives in the type: building a section in Python clamps too."""
    assert HealthConfig(snapshot_interval_seconds=1).snapshot_interval_seconds == 15
    assert HealthConfig(pane_probe_interval_seconds=0).pane_probe_interval_seconds == 60


def test_load_config_logs_each_warning(caplog: pytest.LogCaptureFixture, tmp_path: Any) -> None:
    """The loader edge logs each warning once on the fleetd.config logger."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("health:\n  snapshotIntervalSeconds: 5\n  humanRepeatSeconds: 60\n")
    with caplog.at_level(logging.WARNING, logger="fleetd.config"):
        loaded = load_config(path, {})
    assert [r.getMessage() for r in caplog.records] == list(loaded.warnings)
    assert len(loaded.warnings) == 2


floor_values = st.fixed_dictionaries(
    {},
    optional={
        key: st.integers(min_value=-(10**9), max_value=upper_bound(SPECS[key].field))
        for key in FLOORS
    },
)


@given(file_values=floor_values, env_values=floor_values)
def test_no_input_lowers_a_floor(file_values: dict[str, int], env_values: dict[str, int]) -> None:
    """Whatever the file and environment say, every floored key is at least its floor, a value at
    or above the floor is kept, and each clamp gives exactly one warning."""
    document: dict[str, Any] = {}
    for key, value in file_values.items():
        node = document
        *sections, leaf = key.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        node[leaf] = value
    environ = {env_name(key): str(value) for key, value in env_values.items()}
    loaded = parse_config(document, environ)
    given_values = {**file_values, **env_values}
    for key, floor in FLOORS.items():
        actual = get_value(loaded.config, SPECS[key].names)
        assert isinstance(actual, int)
        assert actual >= floor
        if key in given_values and given_values[key] >= floor:
            assert actual == given_values[key]
    clamped = sorted(k for k, v in given_values.items() if v < FLOORS[k])
    assert sorted(w.partition("=")[0] for w in loaded.warnings) == clamped
