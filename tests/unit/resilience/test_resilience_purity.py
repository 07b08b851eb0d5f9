"""The resilience package is pure: no I/O, clock, logging or randomness, and a pinned surface."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetd.resilience
from tests.blocked_imports import run_blocked

PACKAGE = Path(fleetd.resilience.__file__).parent
ALLOWED = {
    "__future__",
    "collections.abc",
    "dataclasses",
    "datetime",
    "enum",
    "re",  # the Retry-After reader: pattern matching only
    "types",
    "typing",
    "fleetd.errors",
}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "monotonic", "time", "sleep", "random", "open"}
EXPORTS = {
    "PROBE_FLOOR",
    "TRAITS",
    "Availability",
    "Bench",
    "BenchPolicy",
    "Breaker",
    "BreakerEvent",
    "BreakerPolicy",
    "BreakerState",
    "Catalog",
    "CatalogEntry",
    "CatalogFetch",
    "Endpoint",
    "EndpointHealth",
    "ErrorClass",
    "FailoverBudget",
    "GiveUp",
    "GiveUpReason",
    "HealthPolicy",
    "ModelVerdict",
    "Outcome",
    "Permit",
    "Pick",
    "Pool",
    "ProbeSchedule",
    "RETRY_AFTER_LIMIT",
    "RetryAfter",
    "Settled",
    "Standing",
    "Sweep",
    "Traits",
    "VerdictReason",
    "classify_status",
    "context_window_for",
    "judge",
    "next_attempt",
    "parse_catalog",
    "parse_retry_after",
    "retry_after_delay",
    "settle",
    "standing",
    "stated_context_window",
}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, (path.name, "relative import")
            names.append(node.module or "")
    return names


def test_every_import_is_on_the_pure_allowlist() -> None:
    """Standard value modules, the error tree and the package itself; nothing else of fleetd."""
    for path in sorted(PACKAGE.glob("*.py")):
        for name in _imports(path):
            own = name == "fleetd.resilience" or name.startswith("fleetd.resilience.")
            assert name in ALLOWED or own, (path.name, name)


def test_no_clock_sleep_random_or_file_calls() -> None:
    """No fleetd/resilience module calls the clock, sleep, random or file I/O."""
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert name not in FORBIDDEN_CALLS, (path.name, name)


def test_the_surface_is_pinned() -> None:
    """fleetd.resilience exports exactly the pinned names, each defined."""
    assert set(fleetd.resilience.__all__) == EXPORTS
    assert len(fleetd.resilience.__all__) == len(EXPORTS)
    for name in EXPORTS:
        assert hasattr(fleetd.resilience, name)


def test_it_imports_and_runs_a_sweep_with_io_modules_blocked() -> None:
    """Sockets, asyncio, logging, random, config and every adapter package are unavailable."""
    blocked = [
        "asyncio",
        "socket",
        "ssl",
        "logging",
        "random",
        "threading",
        "subprocess",
        "httpx",
        "aio_pika",
        "fleetd.herdr",
        "fleetd.inbox",
        "fleetd.api",
        "fleetd.runtime",
        "fleetd.bridge",
        "fleetd.config",
        "fleetd.compose",
        "fleetd.clock",
        "fleetd.health",
        "fleetd.sim",
        "pydantic",
        "yaml",
    ]
    snippet = """
from datetime import UTC, datetime
from fleetd.resilience import (
    FailoverBudget, Outcome, Pool, ProbeSchedule, Settled, Sweep, judge, next_attempt,
    parse_catalog, parse_retry_after, retry_after_delay, settle,
)
now = datetime(2026, 1, 1, tzinfo=UTC)
pool = Pool.of("primary", "fallback")
pool, sweep, pick = next_attempt(pool, Sweep.start(FailoverBudget(), now), now)
pool, sweep, settled = settle(pool, sweep, pick, Outcome(), now)
assert settled is Settled.SUCCEEDED
assert ProbeSchedule().claim("p", now)[1]
assert judge("m", None).availability == "unknown"
assert parse_catalog({"data": [{"id": "m"}]}) is not None
when = parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT")
assert retry_after_delay(when, now, cap=when - now).total_seconds() == 30
print("ok")
"""
    assert run_blocked(blocked, snippet) == "ok"
