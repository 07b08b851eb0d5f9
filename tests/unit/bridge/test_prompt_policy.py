"""The prompt-outcome table and the refusal backoff: pure, total, and never "retry" by default."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fleetd.bridge.prompt_policy as policy
from fleetd.bridge.prompt_policy import (
    PromptOutcome,
    RetryBudget,
    classify_prompt_error,
    retry_delay,
)
from fleetd.config import parse_config
from fleetd.errors import ConfigError

REFUSED = PromptOutcome.REFUSED
UNCERTAIN = PromptOutcome.UNCERTAIN


@pytest.mark.parametrize(
    ("code", "link", "outcome"),
    [
        ("agent_blocked", False, REFUSED),
        ("agent_not_ready", False, REFUSED),
        ("empty_agent_prompt", False, REFUSED),
        ("invalid_request", False, REFUSED),
        ("request_too_large", False, REFUSED),
        ("invalid_params", False, REFUSED),
        ("agent_not_found", False, PromptOutcome.TARGET_LOST),
        ("pane_not_found", False, PromptOutcome.TARGET_LOST),
        ("agent_prompt_failed", False, UNCERTAIN),
        ("internal_error", False, UNCERTAIN),
        ("pane_send_failed", False, UNCERTAIN),
        ("invalid_response", False, UNCERTAIN),
        ("timeout", False, UNCERTAIN),
        ("unknown_error", False, UNCERTAIN),
        ("connect_failed", True, PromptOutcome.NOT_SENT),
        ("connect_timeout", True, PromptOutcome.NOT_SENT),
        ("request_timeout", True, UNCERTAIN),
        ("connection_lost", True, UNCERTAIN),
        ("server_unavailable", True, UNCERTAIN),
        ("invalid_response", True, UNCERTAIN),
        ("agent_blocked", True, UNCERTAIN),
    ],
)
def test_every_prompt_answer_has_one_outcome(code: str, link: bool, outcome: PromptOutcome) -> None:
    """Only herdr's refusals before the PTY write are retryable; the rest are uncertain."""
    assert classify_prompt_error(code, link=link) is outcome


@given(st.from_regex(r"[a-z][a-z_]{0,30}", fullmatch=True), st.booleans())
def test_a_code_nobody_listed_is_never_retried(code: str, link: bool) -> None:
    """Any code outside the refusal list is uncertain, target loss or not sent: never REFUSED."""
    outcome = classify_prompt_error(code, link=link)
    assert (outcome is REFUSED) == (not link and code in policy.REFUSED_CODES)


def test_backoff_doubles_to_the_cap_and_ends_with_the_budget() -> None:
    """Delays double from the base, stop at the cap, and end after `retries` refusals."""
    budget = RetryBudget(retries=8, base=timedelta(milliseconds=250))
    delays = [retry_delay(n, budget) for n in range(1, 10)]
    assert delays == [timedelta(seconds=s) for s in (0.25, 0.5, 1, 2, 4, 8, 16, 30)] + [None]
    assert retry_delay(0, budget) == timedelta(0)
    assert retry_delay(1, RetryBudget(retries=0, base=timedelta(seconds=1))) is None


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=100))
def test_backoff_is_bounded(refusals: int, retries: int) -> None:
    """No delay exceeds the cap, and nothing is retried past the budget."""
    budget = RetryBudget(retries=retries, base=timedelta(milliseconds=50))
    delay = retry_delay(refusals, budget)
    assert (delay is None) == (refusals > retries)
    assert delay is None or delay <= budget.cap


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retries": -1, "base": timedelta(seconds=1)},
        {"retries": 1, "base": timedelta(0)},
        {"retries": 1, "base": timedelta(seconds=60), "cap": timedelta(seconds=30)},
    ],
)
def test_a_meaningless_budget_is_refused(kwargs: dict[str, object]) -> None:
    """A negative budget, a zero base or a cap under the base is a construction error."""
    with pytest.raises(ValueError, match="retries"):
        RetryBudget(**kwargs)  # type: ignore[arg-type]


def test_the_policy_imports_nothing_that_does_io() -> None:
    """The module imports only pure standard modules (no asyncio, logging, time, socket)."""
    tree = ast.parse(Path(policy.__file__).read_text(encoding="utf-8"))
    names = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert names <= {"__future__", "dataclasses", "datetime", "enum"}


@pytest.mark.parametrize(
    ("bridge", "key"),
    [
        ({"promptRetries": -1}, "bridge.promptRetries"),
        ({"promptRetries": 101}, "bridge.promptRetries"),
        ({"promptRetryBaseMs": 49}, "bridge.promptRetryBaseMs"),
        ({"promptRetryBaseMs": 30_001}, "bridge.promptRetryBaseMs"),
    ],
)
def test_the_budget_keys_are_bounded_so_every_valid_config_makes_a_budget(
    bridge: dict[str, int], key: str
) -> None:
    """Out-of-range retry keys are config errors naming the key; the extremes make a budget."""
    with pytest.raises(ConfigError) as info:
        parse_config({"bridge": bridge}, {})
    assert info.value.key == key
    for retries, base_ms in ((0, 50), (100, 30_000)):
        config = parse_config(
            {"bridge": {"promptRetries": retries, "promptRetryBaseMs": base_ms}}, {}
        ).config.bridge
        RetryBudget(retries=config.prompt_retries, base=config.prompt_retry_base)
