"""Normalisation and progress digests: ticking noise is flattened, new output is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fleetd.screens import AgentKind
from fleetd.screens.drawing.compose import (
    compose_finished_screen,
    compose_retrying_screen,
    compose_working_screen,
)
from fleetd.screens.normalise import clean_lines, digest, normalise, tidy

KINDS = list(AgentKind)
FIXTURES = Path(__file__).parents[2] / "fixtures" / "screens"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[1;32mdone\x1b[0m   \n", "done"),
        ("\x1b]0;✳ title\x07text", "text"),
        ("a\r\nb\rc", "a\nb\nc"),
        ("\n\n\na\n\n\n\nb\n\n", "a\n\nb"),
        ("tab\there", "tab     here"),
        ("nbsp\u00a0x", "nbsp x"),
        ("bell\x07 and \x00nul", "bell and nul"),
    ],
)
def test_normalise_cleans_terminal_text(raw: str, expected: str) -> None:
    """Escapes, carriage returns, controls, trailing blanks and blank runs are cleaned."""
    assert normalise(raw) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("✶ Percolating… (47s · ↓ 2.1k tokens)", ""),
        ("✻ Thinking… (10s · ↑ 456 tokens · esc to interrupt)", ""),
        ("· Noodling…", ""),
        ("• Working (4s • esc to interrupt)", ""),
        ("◦ Working (1m 4s • esc to interrupt)", ""),
        ("• Reconnecting... 3/5 (48s • esc to interrupt)", "Reconnecting..."),
        ("  ⎿  · Retrying in 4 seconds… (attempt 4/10)", "  ⎿  · Retrying in # (attempt #)"),
        ("Unable to connect to API · Retrying in 11s · attempt 8/10", None),
        (
            "   Too Many Requests [retrying in 59m 12s attempt #15]",
            "   Too Many Requests [retrying]",
        ),
        ("   ⬝⬝⬝⬝⬝■■■  esc interrupt", "   ■■■■  esc interrupt"),
        ("   ~/x  12.9K (6%) · $0.05  ctrl+p commands", "   ~/x  # (#%) · $#  ctrl+p commands"),
        ("  ? for shortcuts   87% context left", "  ? for shortcuts   #% context left"),
        ("⠹ Running tests", "⠿ Running tests"),
    ],
)
def test_normalise_flattens_ticking_noise(line: str, expected: str | None) -> None:
    """Spinner, timer, token, retry and progress-bar noise is dropped or flattened."""
    flattened = normalise(line)
    if expected is None:
        assert "11" not in flattened
        assert "8/10" not in flattened
    else:
        assert flattened == expected


def test_finished_turn_summary_and_prose_survive() -> None:
    """A finished-turn summary and ordinary text are not mistaken for a spinner."""
    text = "✻ Brewed for 1m 12s\n\n⏺ Costs $0.05 at 12.9K (6%) of context."
    assert normalise(text) == text


def test_tip_under_spinner_is_dropped_but_not_elsewhere() -> None:
    """The rotating tip under a spinner is noise; the same shape elsewhere is kept."""
    assert normalise("✢ Brewing…\n  ⎿  Tip: use /memory") == ""
    assert normalise("⏺ Read(x)\n  ⎿  Tip: a file") == "⏺ Read(x)\n  ⎿  Tip: a file"


@pytest.mark.parametrize("kind", KINDS)
def test_working_screen_digest_is_stable_across_ticks(kind: AgentKind) -> None:
    """A spinner and elapsed counter ticking alone does not change the digest."""
    digests = {digest(compose_working_screen(kind, tick)) for tick in range(0, 200, 7)}
    assert len(digests) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_retrying_screen_digest_is_stable_across_attempts(kind: AgentKind) -> None:
    """Retry countdowns and attempt counters are not progress."""
    digests = {digest(compose_retrying_screen(kind, attempt)) for attempt in range(1, 10)}
    assert len(digests) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_new_output_changes_digest(kind: AgentKind) -> None:
    """A new output line changes the digest even while the spinner ticks."""
    before = compose_working_screen(kind, 3)
    lines = before.split("\n")
    lines.insert(4, "  new line of real output")
    assert digest("\n".join(lines)) != digest(before)
    assert digest(compose_finished_screen(kind, "one")) != digest(
        compose_finished_screen(kind, "two")
    )


def test_digest_is_sha256_hex_of_normalised_text() -> None:
    """The digest is a 64-character hex string and ignores pure whitespace changes."""
    value = digest("a  \n\n\nb")
    assert len(value) == 64
    assert int(value, 16) >= 0
    assert value == digest("a\n\nb\n")


def test_tidy_keeps_noise_that_normalise_drops() -> None:
    """tidy only cleans whitespace, so answer text that looks like a spinner survives."""
    lines = clean_lines("* Loading… (3s)\n\n\nend  ")
    assert tidy(lines) == "* Loading… (3s)\n\nend"


_NOISY = st.sampled_from(
    [
        *"ab 1\n\t\r\x1b[]()s·✶…⎿•◦⬝■%$K.:/#",
        *("Retrying in ", "attempt ", " (3s · x)", "✶ Go… ", "  ⎿  Tip:", "• Working ("),
        *("Reconnecting... ", "ctrl+p commands", "[retrying in 3s]", "⠋", " 12.5K (3%)", "$0.1"),
    ]
)


@example("\x9b\x00@")  # a control character inside an 8-bit CSI: removing it makes a new one
@example("\x9b\t@")  # a tab inside one: expanding it to spaces would make a new one
@given(st.text() | st.lists(_NOISY, max_size=40).map("".join))
def test_normalise_is_idempotent_and_total(text: str) -> None:
    """Normalising twice changes nothing, for any text."""
    once = normalise(text)
    assert normalise(once) == once
    assert "\x1b" not in once


# (fixture, its ticking line, the same line a while later)
TICKS = [
    (
        "claude/working.txt",
        "✽ Finagling… (2m 13s · ↑ 4.8k tokens · esc to interrupt)\n  ⎿  Tip: Press shift+tab",
        "· Finagling… (9m 52s · ↑ 11.0k tokens · esc to interrupt)\n  ⎿  Tip: Use /memory",
    ),
    (
        "codex/working.txt",
        "◦ Working (1m 12s • esc to interrupt)",
        "• Working (14m 3s • esc to interrupt)",
    ),
    ("opencode/working.txt", "⬝⬝■■■⬝⬝⬝  esc interrupt", "■⬝⬝⬝⬝⬝■■  esc interrupt"),
    ("opencode/working.txt", "31.9K (12%) · $0.22", "33.0K (13%) · $0.25"),
    ("codex/reconnecting.txt", "4/5 (1m 2s", "5/5 (1m 31s"),
    ("claude/retrying.txt", "19 seconds… (attempt 6/10)", "7 seconds… (attempt 7/10)"),
]


@pytest.mark.parametrize(("name", "before", "after"), TICKS)
def test_fixture_digest_ignores_ticking_lines(name: str, before: str, after: str) -> None:
    """A real working screen keeps its digest while only its ticking lines change."""
    screen = (FIXTURES / name).read_text(encoding="utf-8")
    assert before in screen
    assert digest(screen.replace(before, after)) == digest(screen)


@pytest.mark.parametrize("name", sorted({name for name, _, _ in TICKS}))
def test_fixture_digest_changes_with_a_new_output_line(name: str) -> None:
    """The same screen with one more line of real output has a different digest."""
    screen = (FIXTURES / name).read_text(encoding="utf-8")
    lines = screen.split("\n")
    lines.insert(3, "  wrote 3 files")
    assert digest("\n".join(lines)) != digest(screen)
