"""Assistant-block extraction over our fixture screens, composed screens and arbitrary text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.screens import (
    AgentKind,
    CaptureResult,
    Extraction,
    extract_assistant_block,
    parse_agent_kind,
    repair_supported,
)
from fleetd.screens.drawing.compose import (
    compose_blocked_screen,
    compose_finished_screen,
    compose_idle_screen,
    compose_working_screen,
)
from fleetd.screens.normalise import tidy

FIXTURES = Path(__file__).parents[2] / "fixtures" / "screens"
SAMPLES = Path(__file__).parents[3].parent / "shared" / "agents" / "samples"
BIG = 10_000
KNOWN = [AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.OPENCODE]


def _screen(name: str) -> tuple[AgentKind, str]:
    return parse_agent_kind(name.split("/", maxsplit=1)[0]), (FIXTURES / name).read_text(
        encoding="utf-8"
    )


# (fixture, exact extracted text, marker recognised)
CASES: list[tuple[str, str, bool]] = [
    (
        "claude/finished-macos.txt",
        "Retention now comes from the RETENTION_DAYS environment variable and\n"
        "defaults to 30 days.\n\n"
        "I added test_retention_from_env, which sets the variable to 7 and checks\n"
        "that a session 8 days old is pruned. All 4 job tests pass.",
        True,
    ),
    (
        "claude/finished-linux.txt",
        "Here is the config block you asked for:\n\n"
        "    [retention]\n    days = 14\n\n"
        "Put it under the existing [jobs] table.",
        True,
    ),
    (
        "claude/working.txt",
        "Most of the time goes to an N+1 lookup of owners. I'll batch it.",
        True,
    ),
    ("claude/blocked-edit.txt", "I'll rename it in the module and its one caller.", True),
    ("claude/retrying.txt", "I'll look at the existing migrations first.", True),
    ("claude/interrupted.txt", "", True),
    ("claude/error-api-error-500.txt", "", True),
    ("claude/error-usage-limit.txt", "", True),
    (
        "claude/context-low.txt",
        "Done: every public function in src/scheduler.py now has hints, and mypy\n"
        "--strict passes on the module.",
        True,
    ),
    ("claude/negative-earlier-turn-error.txt", "Tagged v2.4.0-rc1 on the current main.", True),
    (
        "claude/no-marker.txt",
        "╭───────────────────────────────────────────────────╮\n"
        "│ ✻ Welcome to Claude Code!                         │\n"
        "│                                                   │\n"
        "│   /help for help, /status for your current setup  │\n"
        "│                                                   │\n"
        "│   cwd: /home/dev/app                              │\n"
        "╰───────────────────────────────────────────────────╯\n\n"
        "❯ Summarise the open TODOs in src/.",
        False,
    ),
    (
        "codex/finished.txt",
        'The admin server now answers GET /healthz with {"ok": true}. The route sits\n'
        "next to /metrics in src/admin/routes.py, and tests/admin/test_routes.py\n"
        "covers it.",
        True,
    ),
    (
        "codex/finished-ran-answer.txt",
        "Ran the linter over the whole tree again; nothing is left to fix.\n\n"
        "The only finding was an unused import in src/cli.py, now removed.",
        True,
    ),
    ("codex/working.txt", "I'll read both clients before changing anything.", True),
    ("codex/blocked-edits.txt", "I'll update pyproject.toml and the CI matrix.", True),
    (
        "codex/info-notice.txt",
        "The flag is now --output; --out is gone, as the ticket asked.",
        True,
    ),
    ("codex/interrupted.txt", "", True),
    ("codex/reconnecting.txt", "", True),
    ("codex/error-crash.txt", "I'll start with the loader module.", True),
    (
        "codex/no-marker.txt",
        "╭──────────────────────────────────────────────╮\n"
        "│ >_ OpenAI Codex (v0.150.0)                   │\n"
        "│                                              │\n"
        "│ model:     gpt-5.5 high   /model to change   │\n"
        "│ directory: ~/src/app                         │\n"
        "╰──────────────────────────────────────────────╯\n\n"
        "› List the modules that import the legacy config loader.",
        False,
    ),
    (
        "opencode/finished.txt",
        "Each tenant can now set cron_schedule in its settings JSON:\n\n"
        "- missing or empty keeps the global 02:15 UTC default;\n"
        "- an invalid expression is rejected when the settings are saved.\n\n"
        "The six tenant tests pass.",
        True,
    ),
    ("opencode/finished-sidebar.txt", "Two tenants were created this week: acme and globex.", True),
    ("opencode/working.txt", "Two of twenty runs failed; both timed out waiting for the", True),
    ("opencode/interrupted.txt", "Release 2.4 adds per-tenant schedules and", True),
    ("opencode/blocked.txt", "", True),
    ("opencode/error-conn-reset.txt", "", True),
    ("opencode/negative-block-tool.txt", "", True),
    (
        "opencode/no-marker.txt",
        "                                  ▄\n"
        "                 █▀▀█ █▀▀█ █▀▀█ █▀▀▄ █▀▀▀ █▀▀█ █▀▀█ █▀▀█\n"
        "                 █░░█ █░░█ █▀▀▀ █░░█ █░░░ █░░█ █░░█ █▀▀▀\n"
        "                 ▀▀▀▀ █▀▀▀ ▀▀▀▀ ▀  ▀ ▀▀▀▀ ▀▀▀▀ ▀▀▀▀ ▀▀▀▀\n\n"
        "  ┃\n  ┃  Explain the tenant model.\n  ┃",
        False,
    ),
    (
        "other/plain-agent.txt",
        "pi v0.31 — session 4\n\n> Check the release script.\n\n"
        "I checked scripts/release.sh; it tags, builds and pushes in that order.\n"
        "API Error: 529 Overloaded. This line is quoted from an old log, not an outage.\n"
        "⏺ The same goes for this quoted Claude line.\n\n>",
        False,
    ),
]


@pytest.mark.parametrize(("name", "text", "recognised"), CASES, ids=[c[0] for c in CASES])
def test_fixture_extraction_is_exact(name: str, text: str, recognised: bool) -> None:
    """Each fixture yields exactly its last assistant block, or the raw fallback."""
    kind, screen = _screen(name)
    extraction = extract_assistant_block(kind, screen, max_chars=BIG)
    assert extraction.text == text
    assert extraction.marker_recognised is recognised
    assert extraction.capture is (
        CaptureResult.PRESENT if recognised else CaptureResult.UNRECOGNISED
    )
    assert extraction.clipped is False


def test_previous_turn_answer_never_leaks_into_the_current_turn() -> None:
    """With no answer yet below the last user line, the text is empty, not the old answer."""
    kind, screen = _screen("claude/interrupted.txt")
    assert "changelog" in screen
    assert extract_assistant_block(kind, screen, max_chars=BIG).text == ""


@pytest.mark.parametrize(
    ("name", "limit"),
    [("claude/finished-macos.txt", 40), ("codex/finished.txt", 25), ("opencode/finished.txt", 1)],
)
def test_long_text_keeps_its_tail_and_sets_clipped(name: str, limit: int) -> None:
    """Text over max_chars keeps the last max_chars characters and says it was clipped."""
    kind, screen = _screen(name)
    full = extract_assistant_block(kind, screen, max_chars=BIG).text
    clipped = extract_assistant_block(kind, screen, max_chars=limit)
    assert clipped.text == full[-limit:]
    assert len(clipped.text) == limit
    assert clipped.clipped is True
    assert clipped.marker_recognised is True
    exact = extract_assistant_block(kind, screen, max_chars=len(full))
    assert (exact.text, exact.clipped) == (full, False)


def test_raw_fallback_is_clipped_to_its_tail_too() -> None:
    """The unrecognised fallback also keeps the tail and flags the clip."""
    kind, screen = _screen("claude/no-marker.txt")
    full = extract_assistant_block(kind, screen, max_chars=BIG).text
    extraction = extract_assistant_block(kind, screen, max_chars=20)
    assert extraction.text == full[-20:] == " open TODOs in src/."
    assert (extraction.clipped, extraction.capture) == (True, CaptureResult.UNRECOGNISED)


@pytest.mark.parametrize("limit", [0, -5])
def test_max_chars_must_be_positive(limit: int) -> None:
    """A non-positive limit is a caller bug."""
    with pytest.raises(ValueError, match="max_chars"):
        extract_assistant_block(AgentKind.CLAUDE, "", max_chars=limit)


def test_extraction_values_are_validated() -> None:
    """Capture and marker flags must agree; a failed read carries nothing."""
    failed = Extraction.read_failed()
    assert (failed.text, failed.marker_recognised, failed.capture) == (
        "",
        False,
        CaptureResult.READ_FAILED,
    )
    with pytest.raises(ValueError, match="PRESENT"):
        Extraction(text="x", marker_recognised=False, clipped=False, capture=CaptureResult.PRESENT)
    with pytest.raises(ValueError, match="PRESENT"):
        Extraction(
            text="x", marker_recognised=True, clipped=False, capture=CaptureResult.UNRECOGNISED
        )
    with pytest.raises(ValueError, match="no text"):
        Extraction(
            text="x", marker_recognised=False, clipped=False, capture=CaptureResult.READ_FAILED
        )


def test_capture_result_values_are_stable() -> None:
    """Capture results are stored with the baseline, so their values are pinned."""
    assert [c.value for c in CaptureResult] == ["present", "unrecognised", "read_failed"]


@pytest.mark.parametrize(
    ("kind", "codex", "supported"),
    [
        (AgentKind.CLAUDE, False, True),
        (AgentKind.CLAUDE, True, True),
        (AgentKind.CODEX, False, False),
        (AgentKind.CODEX, True, True),
        (AgentKind.OPENCODE, False, False),
        (AgentKind.OPENCODE, True, False),
        (AgentKind.OTHER, False, False),
        (AgentKind.OTHER, True, False),
    ],
)
def test_repair_supported_for_claude_codex_only_behind_its_switch_never_opencode(
    kind: AgentKind, codex: bool, supported: bool
) -> None:
    """Claude Code is repairable; Codex only with health.repair.codex; OpenCode and others never."""
    assert repair_supported(kind, codex=codex) is supported


@pytest.mark.parametrize("kind", KNOWN)
@pytest.mark.parametrize(
    "answer",
    [
        "Done.",
        "All links resolve.\n\nTwo redirects were updated:\n- docs/a.md\n- docs/b.md",
        "Code:\n\n    def f():\n        return 1\n\nThat is all.",
        "Ran the checker; added nothing; edited nothing.",
        "",
    ],
)
def test_composed_finished_screen_round_trips(kind: AgentKind, answer: str) -> None:
    """Extraction reads back exactly the answer that compose drew."""
    extraction = extract_assistant_block(kind, compose_finished_screen(kind, answer), max_chars=BIG)
    assert (extraction.text, extraction.marker_recognised) == (answer, True)


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.,:;!?()'\"-", min_size=1)
_LINES = st.lists(
    st.lists(_WORDS, min_size=0, max_size=6).map(" ".join), min_size=1, max_size=8
).map("\n".join)


@pytest.mark.parametrize("kind", KNOWN)
@given(answer=_LINES)
def test_round_trip_holds_for_generated_answers(kind: AgentKind, answer: str) -> None:
    """For any tidy answer made of plain words, compose then extract is the identity."""
    expected = tidy(answer.split("\n"))
    extraction = extract_assistant_block(
        kind, compose_finished_screen(kind, expected), max_chars=BIG
    )
    assert extraction.text == expected


@pytest.mark.parametrize("kind", KNOWN)
def test_composed_working_and_blocked_screens_are_recognised(kind: AgentKind) -> None:
    """Working and blocked screens still show the turn's text so far, from a recognised marker."""
    for screen in (compose_working_screen(kind, 5), compose_blocked_screen(kind)):
        assert extract_assistant_block(kind, screen, max_chars=BIG).marker_recognised


@pytest.mark.parametrize("kind", KNOWN)
def test_fresh_session_is_unrecognised(kind: AgentKind) -> None:
    """A session with no assistant output yet gives the raw fallback, which cannot repair."""
    extraction = extract_assistant_block(kind, compose_idle_screen(kind), max_chars=BIG)
    assert extraction.capture is CaptureResult.UNRECOGNISED


@pytest.mark.parametrize("kind", list(AgentKind))
@given(text=st.text(), limit=st.integers(min_value=1, max_value=400))
def test_extraction_never_raises_or_exceeds_the_limit(
    kind: AgentKind, text: str, limit: int
) -> None:
    """Any text yields a consistent extraction no longer than max_chars."""
    extraction = extract_assistant_block(kind, text, max_chars=limit)
    assert len(extraction.text) <= limit
    assert extraction.marker_recognised is (extraction.capture is CaptureResult.PRESENT)


_SCREENISH = st.lists(
    st.sampled_from(
        [
            "",
            "  ",
            "⏺ text",
            "● Read(x)",
            "  ⎿  out",
            "     more",
            "❯ ask",
            "─" * 20,
            "› ask",
            "• Ran x",
            "  └ y",
            "■ You've hit your usage limit.",
            "  ┃",
            "  ┃  box",
            "     ▣  B · m",
            "     ▣  B · m · 2s",
            "     → Read x",
            "     text",
            "  ╹▀▀▀",
            "✶ Going… (3s)",
            "x" * 130,
        ]
    ),
    max_size=40,
).map("\n".join)


@pytest.mark.parametrize("kind", list(AgentKind))
@given(text=_SCREENISH, limit=st.integers(min_value=1, max_value=200))
def test_extraction_is_total_on_screen_like_text(kind: AgentKind, text: str, limit: int) -> None:
    """Screens assembled from agent glyphs in any order never break extraction."""
    extraction = extract_assistant_block(kind, text, max_chars=limit)
    assert len(extraction.text) <= limit


# SCREENS.md §5: what each shared sample must yield (None: not checked, the turn is running).
SAMPLE_ANSWERS: dict[str, str | None] = {
    "claude-idle-after-answer.txt": "Done. fetch_manifest now retries",
    "claude-negative-exception-in-output.txt": "The test raises a RuntimeError",
    "claude-api-error-529.txt": "",
    "claude-usage-limit.txt": "",
    "codex-idle-after-answer.txt": "Added --dry-run to scripts/release.sh.",
    "codex-usage-limit.txt": "",
    "opencode-idle.txt": "Two commits touched the inbox module:",
    "opencode-error-credit.txt": "",
}


def _samples_or_skip() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared samples missing at {SAMPLES}")
        pytest.skip(f"shared agent samples not found at {SAMPLES}")
    return SAMPLES


@pytest.mark.parametrize(("name", "opening"), sorted(SAMPLE_ANSWERS.items()))
def test_shared_samples_yield_the_documented_answer(name: str, opening: str) -> None:
    """The research samples give the answer SCREENS.md §5 names (empty for error screens)."""
    path = _samples_or_skip() / name
    kind = parse_agent_kind(name.split("-", maxsplit=1)[0])
    extraction = extract_assistant_block(kind, path.read_text(encoding="utf-8"), max_chars=BIG)
    assert extraction.marker_recognised
    if opening:
        assert extraction.text.startswith(opening)
    else:
        assert extraction.text == ""
