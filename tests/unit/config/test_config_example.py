"""The shipped fleetd.example.yaml loads cleanly and documents every key."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from fleetd.config import FleetdConfig, InboxBackend, NotificationMode, load_config
from fleetd.config.fields import ConfigModel
from fleetd.config.keys import section_of
from fleetd.health.floors import MAX_PANE_READS_PER_TICK, TWO_SNAPSHOTS
from fleetd.health.settings import TEARDOWN_GRACE
from fleetd.inbox.memory import KEY_MAX as INBOX_KEY_MAX
from fleetd.inbox.outbox import HELD_MAX
from fleetd.notify.core.retry import BACKOFF_BASE, BACKOFF_FACTOR, MAX_DELAY, backoff_ceiling
from fleetd.notify.worker import LEASE_MARGIN
from fleetd.runtime.pane_excerpts import EXCERPT_MAX_AGE
from fleetd.screens.excerpt import PANE_EXCERPT_CHARS

EXAMPLE = Path(__file__).resolve().parents[3] / "fleetd.example.yaml"
EXAMPLE_ENV = {"FLEETD_LEAD_TOKEN": "lead-token-1", "FLEETD_OPERATOR_TOKEN": "op-token-1"}


def _model_keys(model: type[ConfigModel], prefix: str = "") -> Iterator[str]:
    """Every dotted key of the model, descending into sections, lead items and profile values."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        yield key
        child = section_of(field.annotation)
        if child is None:
            continue
        if key in ("leads", "providers"):
            yield from _model_keys(child, f"{key}[].")
        elif key == "profiles":
            yield from _model_keys(child, "profiles.*.")
        else:
            yield from _model_keys(child, f"{key}.")


def _document_keys(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _document_keys(item, prefix.rstrip(".") + "[].")
    elif isinstance(node, Mapping):
        for key, value in node.items():
            name = "*" if prefix == "profiles." else str(key)
            yield f"{prefix}{name}"
            yield from _document_keys(value, f"{prefix}{name}.")


def test_example_loads_without_warnings() -> None:
    """The example is valid as shipped and triggers no floor or coverage warning."""
    loaded = load_config(EXAMPLE, EXAMPLE_ENV)
    assert loaded.warnings == ()
    config = loaded.config
    assert config.inbox.backend is InboxBackend.MEMORY
    assert config.health.notifications.mode is NotificationMode.DISABLED
    assert len(config.leads) >= 1
    assert {p.kind.value for p in config.profiles.values()} >= {"claude", "codex"}


def test_example_values_are_the_defaults() -> None:
    """Apart from the sample lead, profiles and variable names, the example shows the defaults."""
    config = load_config(EXAMPLE, EXAMPLE_ENV).config
    defaults = load_config(None, {}).config
    assert config.health == defaults.health.model_copy(
        update={"notifications": config.health.notifications}
    )
    assert config.health.notifications.request_timeout_ms == 10_000
    assert config.bridge == defaults.bridge
    assert config.api == defaults.api
    assert config.herdr == defaults.herdr
    assert config.inbox == defaults.inbox
    assert config.worktrees.root == EXAMPLE.parent / "worktrees"


def test_example_names_every_key() -> None:
    """Every key of the model, at every depth, appears in the example file."""
    document = yaml.safe_load(EXAMPLE.read_text())
    missing = set(_model_keys(FleetdConfig)) - set(_document_keys(document))
    assert not missing, f"fleetd.example.yaml lacks {sorted(missing)}"


def test_example_comments_every_key() -> None:
    """Each key holding a value has a comment on the line above it."""
    lines = EXAMPLE.read_text().splitlines()
    key_line = re.compile(r"^\s*(- )?[A-Za-z]+:")
    for number, line in enumerate(lines):
        if not key_line.match(line):
            continue
        previous = lines[number - 1].strip() if number else ""
        opens_a_section = line.rstrip().endswith(":")
        assert previous.startswith("#") or opens_a_section, f"line {number + 1}: {line!r}"


def _brakes_text() -> str:
    """The example's "compiled brakes" block as one line of words (comment marks dropped)."""
    text = EXAMPLE.read_text()
    start = text.index("# Compiled brakes (not configurable)")
    lines = [line.lstrip("#").strip() for line in text[start:].splitlines()]
    return " ".join(line for line in lines if line)


def test_example_lists_every_compiled_brake_with_the_code_s_values() -> None:
    """Each limit no key can change is written in the example, with the value the code uses."""
    brakes = _brakes_text()
    ceilings = ", ".join(f"{int(backoff_ceiling(n).total_seconds())} s" for n in range(1, 6))
    minutes = int(MAX_DELAY.total_seconds() // 60)
    lease_margin = int(LEASE_MARGIN.total_seconds())
    expected = [
        f"each need {TWO_SNAPSHOTS} consecutive successful fleet snapshots",
        f"one fleet tick reads at most {MAX_PANE_READS_PER_TICK} panes",
        f"tasks still pending {int(TEARDOWN_GRACE.total_seconds())} s after a member ended",
        f"at most the last {PANE_EXCERPT_CHARS} characters",
        f"read at most {int(EXCERPT_MAX_AGE.total_seconds() // 60)} min before the record",
        f"full jitter, base {int(BACKOFF_BASE.total_seconds())} s, factor {BACKOFF_FACTOR}",
        f"(ceilings {ceilings})",
        f"at most {minutes} min between two attempts of one event",
        f"Retry-After: honoured up to {minutes} min; a longer wait is capped at {minutes} min",
        "One outstanding attempt per event",
        f"one request limit per receiver, one more, and {lease_margin} s",
        f"at most {INBOX_KEY_MAX} entries wait per lead",
        f"unreachable inbox: at most {HELD_MAX}, the oldest health report first",
    ]
    missing = [phrase for phrase in expected if phrase not in brakes]
    assert not missing, f"fleetd.example.yaml's compiled brakes lack {missing}"
