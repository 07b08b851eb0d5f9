"""Lead-visible markers on pane-derived results, and the package's public surface."""

from __future__ import annotations

import pytest

import fleetd.screens
from fleetd.screens import (
    CLIPPED_TAIL_MARKER,
    COMPLETION_FALLBACK_MARKER,
    NO_TEXT_NOTE,
    RAW_TEXT_MARKER,
    READ_FAILED_NOTE,
    REPAIRED_COMPLETION_MARKER,
    AgentKind,
    CaptureResult,
    Extraction,
    FallbackReason,
    extract_assistant_block,
    render_fallback,
)
from fleetd.screens.drawing.compose import compose_finished_screen, compose_idle_screen

REASONS = {
    FallbackReason.COMPLETION_FALLBACK: COMPLETION_FALLBACK_MARKER,
    FallbackReason.REPAIRED_COMPLETION: REPAIRED_COMPLETION_MARKER,
}


def _present(text: str, *, clipped: bool = False) -> Extraction:
    return Extraction(
        text=text, marker_recognised=True, clipped=clipped, capture=CaptureResult.PRESENT
    )


def test_repaired_completion_marker_is_the_spec_text() -> None:
    """M4 §8.4 fixes the repaired-completion wording the lead sees."""
    assert REPAIRED_COMPLETION_MARKER == (
        "[repaired completion - fleetd detected a lost turn boundary. The member did not call"
        " fleet_reply; pane-derived text follows and may be partial]"
    )


def test_markers_are_distinct_bracketed_lines() -> None:
    """Every marker is one bracketed line, and no two are alike."""
    markers = [
        COMPLETION_FALLBACK_MARKER,
        REPAIRED_COMPLETION_MARKER,
        RAW_TEXT_MARKER,
        CLIPPED_TAIL_MARKER,
    ]
    assert len(set(markers)) == len(markers)
    for marker in markers:
        assert marker.startswith("[")
        assert marker.endswith("]")
        assert "\n" not in marker


@pytest.mark.parametrize(("reason", "marker"), list(REASONS.items()))
def test_recognised_text_follows_its_reason_marker(reason: FallbackReason, marker: str) -> None:
    """A recognised, unclipped block is shown verbatim under the reason marker."""
    assert render_fallback(_present("All done.\n\nSee the PR."), reason) == (
        f"{marker}\n\nAll done.\n\nSee the PR."
    )


@pytest.mark.parametrize(("reason", "marker"), list(REASONS.items()))
def test_clipped_text_keeps_the_clipped_tail_marker(reason: FallbackReason, marker: str) -> None:
    """Clipped text carries the clipped-tail marker right above the text."""
    rendered = render_fallback(_present("the tail", clipped=True), reason)
    assert rendered == f"{marker}\n{CLIPPED_TAIL_MARKER}\n\nthe tail"


def test_raw_fallback_says_no_marker_was_recognised() -> None:
    """Raw screen text is labelled as such, with the clip marker when clipped."""
    screen = compose_idle_screen(AgentKind.CLAUDE) + "\n" + "x" * 50
    extraction = extract_assistant_block(AgentKind.CLAUDE, screen, max_chars=20)
    rendered = render_fallback(extraction, FallbackReason.COMPLETION_FALLBACK)
    assert rendered.split("\n\n", 1)[0].split("\n") == [
        COMPLETION_FALLBACK_MARKER,
        RAW_TEXT_MARKER,
        CLIPPED_TAIL_MARKER,
    ]
    assert rendered.endswith(extraction.text)


def test_empty_answer_and_failed_read_are_spelled_out() -> None:
    """No answer text and a failed read each get a plain note instead of silence."""
    empty = extract_assistant_block(
        AgentKind.CODEX, compose_finished_screen(AgentKind.CODEX, ""), max_chars=100
    )
    assert render_fallback(empty, FallbackReason.COMPLETION_FALLBACK) == (
        f"{COMPLETION_FALLBACK_MARKER}\n\n{NO_TEXT_NOTE}"
    )
    assert render_fallback(Extraction.read_failed(), FallbackReason.REPAIRED_COMPLETION) == (
        f"{REPAIRED_COMPLETION_MARKER}\n\n{READ_FAILED_NOTE}"
    )


def test_fallback_reason_values_are_stable() -> None:
    """Reasons reach metrics and records, so their values are pinned."""
    assert [r.value for r in FallbackReason] == ["completion_fallback", "repaired_completion"]


def test_public_surface_is_pinned() -> None:
    """The package exports exactly this API; other modules import only from it."""
    assert sorted(fleetd.screens.__all__) == sorted(
        [
            "CLIPPED_TAIL_MARKER",
            "COMPLETION_FALLBACK_MARKER",
            "NO_TEXT_NOTE",
            "RAW_TEXT_MARKER",
            "READ_FAILED_NOTE",
            "REPAIRED_COMPLETION_MARKER",
            "UNCHANGED_MARKER",
            "AgentKind",
            "CaptureResult",
            "Extraction",
            "FallbackReason",
            "FatalSignature",
            "digest",
            "extract_assistant_block",
            "match_fatal",
            "normalise",
            "parse_agent_kind",
            "render_fallback",
            "repair_supported",
            "signature_ids",
        ]
    )
    for name in fleetd.screens.__all__:
        assert getattr(fleetd.screens, name) is not None


def test_a_fatal_signature_is_named_on_the_second_line_in_our_words() -> None:
    """The error marker follows the reason marker and carries the id and summary, no pane text."""
    screen = (
        "❯ do it\n\n  ⎿  You've hit your limit · resets 3:30am (UTC)\n\n"
        + "─" * 60
        + "\n❯ \n"
        + "─" * 60
        + "\n"
    )
    fatal = fleetd.screens.match_fatal(AgentKind.CLAUDE, screen)
    assert fatal is not None
    content = render_fallback(_present(""), FallbackReason.COMPLETION_FALLBACK, fatal=fatal)
    first, second = content.splitlines()[:2]
    assert first == COMPLETION_FALLBACK_MARKER
    assert second.startswith(f"[error on screen {fatal.id} - {fatal.summary}.")
    assert "hit your limit" not in content
    assert content.endswith(NO_TEXT_NOTE)
