"""The human leg's core (``fleetd/notify/core``) is pure: standard value modules only, no clock,
I/O or randomness. Every module in that folder is checked, so one added there is too."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetd.notify.core
from tests.blocked_imports import run_blocked

PACKAGE = Path(fleetd.notify.core.__file__).parent
PURE = tuple(sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"))
FLEETD_ALLOWED = {
    "policy": {"fleetd.health.incidents", "fleetd.health.states", "fleetd.model.events"},
    "retry": {"fleetd.resilience.retry_after"},
    "failover": {"fleetd.notify.core.retry", "fleetd.resilience"},
    "signing": {"fleetd.config.secrets"},
}
"""The pure fleetd modules a pure module may build on."""
ALLOWED = {
    "__future__",
    "base64",
    "binascii",
    "collections.abc",
    "dataclasses",
    "datetime",
    "enum",
    "hashlib",
    "hmac",
    "math",
    "re",
    "typing",
}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "monotonic", "time", "sleep", "random", "open"}


def _trees() -> list[tuple[str, ast.Module]]:
    return [(name, ast.parse((PACKAGE / f"{name}.py").read_text())) for name in PURE]


def test_pure_modules_import_only_standard_value_modules() -> None:
    """retry imports only the pure Retry-After reader; signing only the config's pure secret
    value; failover only the pure retry table and the pure resilience package; policy only
    health's incident values and the event types."""
    assert PURE == ("failover", "policy", "retry", "signing")
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, (name, "relative import")
                imported = [node.module or ""]
            else:
                continue
            for module in imported:
                assert module in ALLOWED | FLEETD_ALLOWED.get(name, set()), (name, module)


def test_pure_modules_read_no_clock_and_draw_no_random_number() -> None:
    """No call reads the clock, sleeps, draws a random number or opens a file."""
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert called not in FORBIDDEN_CALLS, (name, called)


def test_pure_modules_work_with_io_modules_blocked() -> None:
    """They import and decide with sockets, asyncio, logging, random, pydantic and httpx blocked."""
    blocked = ["asyncio", "socket", "logging", "random", "secrets", "threading", "subprocess"]
    blocked += ["httpx", "pydantic", "yaml", "fleetd.runtime", "fleetd.health"]
    blocked += ["fleetd.config.model", "fleetd.config.loader", "fleetd.config.ref"]
    snippet = """
from datetime import UTC, datetime
from fleetd.model.events import idempotency_key
from fleetd.notify.core.retry import PostResult, next_step
from fleetd.notify.core.signing import WebhookSecret, signature_headers, verify
from fleetd.notify.core.failover import Dialed, SweepResult, after_sweep
now = datetime(2026, 1, 1, tzinfo=UTC)
decision = next_step(PostResult(status=503), failures=2, draw=0.5, now=now)
swept = SweepResult(dialed=(Dialed(0, PostResult(status=503)),))
assert after_sweep(swept, failures=2, draw=0.5, now=now) == decision
key = idempotency_key("inc_1", "open", 1)
secret = WebhookSecret(bytes(32))
headers = signature_headers(secret, msg_id=key, now=now, body=b"{}")
assert verify(secret, headers, b"{}", now=now) == "verified"
print(decision.delay.total_seconds())
"""
    assert run_blocked(blocked, snippet) == "7.5"
