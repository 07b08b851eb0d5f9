"""Fatal signatures: each matches its own fixtures and nothing else, and never on prose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.screens import AgentKind, FatalSignature, match_fatal, parse_agent_kind, signature_ids
from fleetd.screens.drawing.compose import (
    compose_blocked_screen,
    compose_error_screen,
    compose_finished_screen,
    compose_idle_screen,
    compose_retrying_screen,
    compose_working_screen,
    error_screen_ids,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "screens"
SAMPLES = Path(__file__).parents[3].parent / "shared" / "agents" / "samples"
KNOWN = [AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.OPENCODE]

# Stable codes: they go into incident fingerprints. Changing this table is a breaking change.
IDS: dict[AgentKind, tuple[str, ...]] = {
    AgentKind.CLAUDE: (
        "claude.cli_crash",
        "claude.api_error_529",
        "claude.api_error_500",
        "claude.oauth_expired",
        "claude.oauth_revoked",
        "claude.bad_api_key",
        "claude.credit_low",
        "claude.usage_limit",
        "claude.rate_limit",
        "claude.prompt_too_long",
        "claude.broken_history",
        "claude.network",
        "claude.policy_refusal",
    ),
    AgentKind.CODEX: (
        "codex.crash",
        "codex.usage_limit",
        "codex.plan_excluded",
        "codex.quota_exceeded",
        "codex.retry_exhausted_429",
        "codex.retry_exhausted_401",
        "codex.unexpected_status",
        "codex.refresh_token",
        "codex.stream_lost",
        "codex.context_full",
        "codex.high_demand",
        "codex.blocked_region",
    ),
    AgentKind.OPENCODE: (
        "opencode.crash",
        "opencode.bad_api_key",
        "opencode.credit_low",
        "opencode.context_overflow",
        "opencode.unreachable",
        "opencode.conn_reset",
        "opencode.model_not_found",
        "opencode.provider_http",
    ),
    AgentKind.OTHER: (),
}

# Every fixture file and the signature it must show (None: must match nothing).
EXPECTED: dict[str, str | None] = {
    "claude/blocked-edit.txt": None,
    "claude/context-low.txt": None,
    "claude/error-api-error-500.txt": "claude.api_error_500",
    "claude/error-api-error-529-old.txt": "claude.api_error_529",
    "claude/error-bad-api-key.txt": "claude.bad_api_key",
    "claude/error-broken-history.txt": "claude.broken_history",
    "claude/error-cli-crash-bun.txt": "claude.cli_crash",
    "claude/error-cli-crash-ink.txt": "claude.cli_crash",
    "claude/error-credit-low.txt": "claude.credit_low",
    "claude/error-network-timeout.txt": "claude.network",
    "claude/error-network.txt": "claude.network",
    "claude/error-oauth-expired.txt": "claude.oauth_expired",
    "claude/error-oauth-revoked.txt": "claude.oauth_revoked",
    "claude/error-policy-refusal.txt": "claude.policy_refusal",
    "claude/error-prompt-too-long.txt": "claude.prompt_too_long",
    "claude/error-rate-limit.txt": "claude.rate_limit",
    "claude/error-usage-limit-old.txt": "claude.usage_limit",
    "claude/error-usage-limit.txt": "claude.usage_limit",
    "claude/finished-linux.txt": None,
    "claude/finished-macos.txt": None,
    "claude/interrupted.txt": None,
    "claude/negative-earlier-turn-error.txt": None,
    "claude/negative-quoted-opening.txt": None,
    "claude/negative-recovered-in-turn.txt": None,
    "claude/negative-tool-output.txt": None,
    "claude/no-marker.txt": None,
    "claude/retrying-network.txt": None,
    "claude/retrying.txt": None,
    "claude/working.txt": None,
    "codex/blocked-edits.txt": None,
    "codex/error-blocked-region.txt": "codex.blocked_region",
    "codex/error-context-full-plain.txt": "codex.context_full",
    "codex/error-context-full.txt": "codex.context_full",
    "codex/error-crash-bootstrap.txt": "codex.crash",
    "codex/error-crash.txt": "codex.crash",
    "codex/error-high-demand.txt": "codex.high_demand",
    "codex/error-plan-excluded.txt": "codex.plan_excluded",
    "codex/error-quota-exceeded.txt": "codex.quota_exceeded",
    "codex/error-refresh-token.txt": "codex.refresh_token",
    "codex/error-retry-exhausted-401.txt": "codex.retry_exhausted_401",
    "codex/error-retry-exhausted-429.txt": "codex.retry_exhausted_429",
    "codex/error-stream-lost.txt": "codex.stream_lost",
    "codex/error-unexpected-status-401.txt": "codex.unexpected_status",
    "codex/error-unexpected-status.txt": "codex.unexpected_status",
    "codex/error-usage-limit.txt": "codex.usage_limit",
    "codex/finished-ran-answer.txt": None,
    "codex/finished.txt": None,
    "codex/info-notice.txt": None,
    "codex/interrupted.txt": None,
    "codex/negative-output.txt": None,
    "codex/no-marker.txt": None,
    "codex/reconnecting.txt": None,
    "codex/working.txt": None,
    "opencode/blocked.txt": None,
    "opencode/error-bad-api-key-anthropic.txt": "opencode.bad_api_key",
    "opencode/error-bad-api-key.txt": "opencode.bad_api_key",
    "opencode/error-conn-reset.txt": "opencode.conn_reset",
    "opencode/error-context-overflow.txt": "opencode.context_overflow",
    "opencode/error-crash-fatal.txt": "opencode.crash",
    "opencode/error-crash.txt": "opencode.crash",
    "opencode/error-credit-low.txt": "opencode.credit_low",
    "opencode/error-model-not-found.txt": "opencode.model_not_found",
    "opencode/error-provider-http.txt": "opencode.provider_http",
    "opencode/error-unreachable.txt": "opencode.unreachable",
    "opencode/finished-sidebar.txt": None,
    "opencode/finished.txt": None,
    "opencode/interrupted.txt": None,
    "opencode/negative-block-tool.txt": None,
    "opencode/negative-output.txt": None,
    "opencode/no-marker.txt": None,
    "opencode/retrying.txt": None,
    "opencode/working.txt": None,
    "other/plain-agent.txt": None,
}


def _screen(name: str) -> tuple[AgentKind, str]:
    return parse_agent_kind(name.split("/", maxsplit=1)[0]), (FIXTURES / name).read_text(
        encoding="utf-8"
    )


def test_every_fixture_has_an_expectation() -> None:
    """No fixture screen goes untested."""
    on_disk = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.txt")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED.items()))
def test_fixture_matches_exactly_its_signature(name: str, expected: str | None) -> None:
    """Each fixture shows its own signature (or none), read as its own kind."""
    kind, screen = _screen(name)
    found = match_fatal(kind, screen)
    assert (found.id if found else None) == expected
    if found is not None:
        assert found.kind is kind
        assert found.summary


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_matches_nothing_when_read_as_another_kind(name: str) -> None:
    """A signature belongs to one agent kind; other kinds' rules never fire on its screen."""
    kind, screen = _screen(name)
    for other in AgentKind:
        if other is not kind:
            assert match_fatal(other, screen) is None


@pytest.mark.parametrize("kind", list(AgentKind))
def test_signature_ids_are_stable(kind: AgentKind) -> None:
    """The id table is pinned; every id is namespaced by its kind."""
    assert signature_ids(kind) == IDS[kind]
    assert all(sid.startswith(f"{kind.value}.") for sid in IDS[kind])


@pytest.mark.parametrize("kind", list(AgentKind))
def test_every_signature_has_a_fixture_and_a_composed_screen(kind: AgentKind) -> None:
    """No signature ships without a fixture, and the simulator can draw each one."""
    assert set(error_screen_ids(kind)) == set(IDS[kind])
    assert set(IDS[kind]) <= {sid for sid in EXPECTED.values() if sid}


@pytest.mark.parametrize(
    ("kind", "signature_id"),
    [(kind, sid) for kind in KNOWN for sid in IDS[kind]],
)
def test_composed_error_screen_matches_its_own_id_only(kind: AgentKind, signature_id: str) -> None:
    """compose_error_screen(kind, id) is read back as exactly that id, by that kind only."""
    screen = compose_error_screen(kind, signature_id)
    found = match_fatal(kind, screen)
    assert found is not None
    assert found.id == signature_id
    assert [k for k in AgentKind if k is not kind and match_fatal(k, screen)] == []


def test_transient_flags_follow_the_research_notes() -> None:
    """Overload, network and rate-limit style signatures are transient; auth and limits are not."""
    transient = {
        sid
        for kind in KNOWN
        for sid in IDS[kind]
        if (found := match_fatal(kind, compose_error_screen(kind, sid))) and found.transient
    }
    assert transient == {
        "claude.api_error_529",
        "claude.api_error_500",
        "claude.rate_limit",
        "claude.network",
        "codex.retry_exhausted_429",
        "codex.stream_lost",
        "codex.high_demand",
        "opencode.conn_reset",
    }


@pytest.mark.parametrize("kind", list(AgentKind))
def test_retrying_working_blocked_and_idle_screens_are_not_fatal(kind: AgentKind) -> None:
    """Retry lines while attempts remain, spinners, approvals and fresh sessions are not errors."""
    screens = [compose_retrying_screen(kind, attempt) for attempt in range(1, 11)]
    screens += [compose_working_screen(kind, 9), compose_blocked_screen(kind)]
    screens += [compose_idle_screen(kind), compose_finished_screen(kind, "All done.")]
    assert [match_fatal(kind, screen) for screen in screens] == [None] * len(screens)


@pytest.mark.parametrize("kind", list(AgentKind))
@pytest.mark.parametrize(
    "answer",
    [
        "Exception",
        "Traceback (most recent call last):\n  File x.py, line 1\nException: boom",
        "Error: 429 timeout",
        "API Error: 529 is what the worker logs; it is not an outage here.",
        "You've hit your usage limit. That was yesterday; today it is fine.",
        "Connection reset by server",
    ],
)
def test_assistant_prose_never_matches(kind: AgentKind, answer: str) -> None:
    """Bare error words, even a signature phrase, in the assistant's own answer never match."""
    assert match_fatal(kind, compose_finished_screen(kind, answer)) is None


@pytest.mark.parametrize(
    ("retrying", "final"),
    [
        (
            "API Error: 529 Overloaded. Retrying in 4 seconds… (attempt 4/10)",
            "API Error: 529 Overloaded.",
        ),
        (
            "API Error: Unable to connect to API (ECONNREFUSED) · Retrying in 11s · attempt 8/10",
            "API Error: Unable to connect to API (ECONNREFUSED)",
        ),
        ("API Error: Rate limit reached · retrying in 30s", "API Error: Rate limit reached"),
    ],
)
def test_retry_status_never_matches_even_with_a_signature_phrase(retrying: str, final: str) -> None:
    """A message that is still retrying is working; the same phrase without the retry is fatal."""

    def screen(message: str) -> str:
        return "\n".join(["⏺ Earlier answer.", "", "❯ go", "", f"  ⎿  {message}", "", "─" * 40])

    assert match_fatal(AgentKind.CLAUDE, screen(retrying)) is None
    assert match_fatal(AgentKind.CLAUDE, screen(final)) is not None


def test_opencode_box_above_a_finished_footer_is_not_an_error_box() -> None:
    """Only a footer without a duration closes a turn in error; a finished one never does."""
    screen = compose_error_screen(AgentKind.OPENCODE, "opencode.conn_reset")
    assert match_fatal(AgentKind.OPENCODE, screen) is not None
    finished = screen.replace(
        "▣  Build · Claude Sonnet 4.5\n", "▣  Build · Claude Sonnet 4.5 · 3.2s\n"
    )
    assert finished != screen
    assert match_fatal(AgentKind.OPENCODE, finished) is None


def test_signature_value_is_frozen() -> None:
    """FatalSignature is an immutable value."""
    found = match_fatal(AgentKind.CODEX, compose_error_screen(AgentKind.CODEX, "codex.usage_limit"))
    assert isinstance(found, FatalSignature)
    with pytest.raises(AttributeError):
        found.id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("kind", list(AgentKind))
@given(text=st.text())
def test_match_fatal_never_raises(kind: AgentKind, text: str) -> None:
    """Arbitrary text gives a signature or None, never an exception."""
    found = match_fatal(kind, text)
    assert found is None or found.kind is kind


_FRAGMENTS = st.sampled_from(
    [
        "",
        "❯ ask",
        "⏺ API Error: 529 Overloaded.",
        "  ⎿  Credit balance too low · Add funds",
        "⏺ Bash(x)",
        "  ⎿  You've hit your limit · resets 1am",
        "     more",
        "─" * 30,
        "› ask",
        "■ Quota exceeded. Check your plan and billing details.",
        "• Ran x",
        "  └ y",
        "  ┃",
        "  ┃  Connection reset by server",
        "     ▣  Build · m",
        "     ▣  Build · m · 3s",
        "The application panicked (crashed).",
        "=== FATAL ERROR OCCURRED ===",
        "  ERROR  boom",
        " /$bunfs/root/src/entrypoints/cli.js:1:2",
        "✶ Going… (3s)",
    ]
)


@pytest.mark.parametrize("kind", list(AgentKind))
@given(lines=st.lists(_FRAGMENTS, max_size=30))
def test_match_fatal_is_total_on_screen_like_text(kind: AgentKind, lines: list[str]) -> None:
    """Screens assembled from signature fragments in any order never break matching."""
    found = match_fatal(kind, "\n".join(lines))
    assert found is None or found.id in IDS[kind]


# SCREENS.md §5: the signature each shared sample must show.
SAMPLE_SIGNATURES: dict[str, str | None] = {
    "claude-api-error-529.txt": "claude.api_error_529",
    "claude-idle-after-answer.txt": None,
    "claude-negative-exception-in-output.txt": None,
    "claude-permission-blocked.txt": None,
    "claude-usage-limit.txt": "claude.usage_limit",
    "claude-working.txt": None,
    "codex-approval-blocked.txt": None,
    "codex-idle-after-answer.txt": None,
    "codex-reconnecting-working.txt": None,
    "codex-usage-limit.txt": "codex.usage_limit",
    "opencode-error-credit.txt": "opencode.credit_low",
    "opencode-idle.txt": None,
    "opencode-permission-blocked.txt": None,
    "opencode-working.txt": None,
}


@pytest.mark.parametrize(("name", "expected"), sorted(SAMPLE_SIGNATURES.items()))
def test_shared_samples_show_the_documented_signature(name: str, expected: str | None) -> None:
    """The research samples match exactly what SCREENS.md §5 expects."""
    if not SAMPLES.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared samples missing at {SAMPLES}")
        pytest.skip(f"shared agent samples not found at {SAMPLES}")
    kind = parse_agent_kind(name.split("-", maxsplit=1)[0])
    found = match_fatal(kind, (SAMPLES / name).read_text(encoding="utf-8"))
    assert (found.id if found else None) == expected
