"""The health core is pure: no I/O, clock, logging or randomness, and no adapter imports."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetd.health
from tests.blocked_imports import run_blocked

PACKAGE = Path(fleetd.health.__file__).parent
ALLOWED = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "datetime",
    "enum",
    "hashlib",
    "heapq",
    "itertools",
    "operator",
    "types",
    "typing",
}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "monotonic", "time", "sleep", "random", "open"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


def test_every_import_is_on_the_pure_allowlist() -> None:
    """Only standard value modules and health itself (its compiled floors included) are imported."""
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert name in ALLOWED or _is_health(name), (path.name, name)


def _is_health(name: str) -> bool:
    return name == "fleetd.health" or name.startswith("fleetd.health.")


def test_no_clock_sleep_random_or_file_calls() -> None:
    """No call reads the clock, sleeps, draws a random number or opens a file."""
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert name not in FORBIDDEN_CALLS, (path.name, name)


def test_health_imports_and_decides_with_io_modules_blocked() -> None:
    """Health imports and runs a tick with sockets, asyncio, logging, config, adapters blocked."""
    blocked = [
        "asyncio",
        "socket",
        "logging",
        "random",
        "threading",
        "subprocess",
        "fleetd.herdr",
        "fleetd.inbox",
        "fleetd.journal",
        "fleetd.notify",
        "fleetd.api",
        "fleetd.runtime",
        "fleetd.bridge",
        "fleetd.config",
        "fleetd.compose",
        "fleetd.screens",
        "fleetd.sim",
        "pydantic",
        "yaml",
    ]
    snippet = """
from datetime import UTC, datetime
from fleetd.health import FleetSnapshot, HealthState, LiveView, decide
snapshot = FleetSnapshot(live=LiveView(list_ok=True))
decision = decide(snapshot, HealthState(), datetime(2026, 1, 1, tzinfo=UTC))
assert decision.effects == ()
print("ok")
"""
    assert run_blocked(blocked, snippet) == "ok"
