"""The agent-screen vocabulary: complete per kind, and every name in it means a real signature."""

from __future__ import annotations

import pytest

from fleetd.screens import AgentKind, extract_assistant_block, match_fatal, signature_ids
from fleetd.screens.drawing.compose import (
    compose_blocked_screen,
    compose_error_screen,
    compose_finished_screen,
    compose_working_screen,
)
from fleetd.screens.drawing.vocabulary import (
    CLAUDE,
    CODEX,
    CUES,
    ERROR_EXAMPLES,
    SCREENS_NAMES,
    fatal_signature_id,
)

KNOWN = [AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.OPENCODE]


def test_the_three_tuis_have_cues_and_other_kinds_none() -> None:
    """fleetd reads three TUIs; an OTHER screen has no cue to read."""
    assert sorted(CUES) == sorted(KNOWN)
    assert AgentKind.OTHER not in ERROR_EXAMPLES
    assert AgentKind.OTHER not in SCREENS_NAMES


@pytest.mark.parametrize("kind", KNOWN)
def test_every_fatal_signature_has_one_example_message(kind: AgentKind) -> None:
    """The example table covers exactly the ids the matcher can return for the kind."""
    assert set(ERROR_EXAMPLES[kind]) == set(signature_ids(kind))


@pytest.mark.parametrize(
    ("kind", "name", "signature_id"),
    [(kind, name, sid) for kind in KNOWN for name, sid in SCREENS_NAMES[kind].items()],
)
def test_screens_md_names_mean_the_signature_drawn_for_them(
    kind: AgentKind, name: str, signature_id: str
) -> None:
    """A SCREENS.md name resolves to a signature id of its own kind, and its example matches it."""
    assert fatal_signature_id(kind, name) == signature_id
    assert signature_id in signature_ids(kind)
    found = match_fatal(kind, compose_error_screen(kind, signature_id))
    assert found is not None
    assert found.id == signature_id


def test_fatal_signature_id_takes_ids_and_names_of_the_kind_only() -> None:
    """An id passes through; a name maps; another kind's id, an unknown name or none is None."""
    assert fatal_signature_id(AgentKind.CODEX, "codex.stream_lost") == "codex.stream_lost"
    assert fatal_signature_id(AgentKind.CODEX, "stream-lost") == "codex.stream_lost"
    assert fatal_signature_id(AgentKind.CODEX, "claude.api_error_529") is None
    assert fatal_signature_id(AgentKind.CODEX, "overloaded") is None
    assert fatal_signature_id(AgentKind.CODEX, None) is None
    assert fatal_signature_id(AgentKind.OTHER, "usage-limit") is None


@pytest.mark.parametrize("kind", KNOWN)
def test_composed_screens_carry_the_kinds_cues(kind: AgentKind) -> None:
    """Working screens show the working cue and approval prompts the blocked cue, every tick."""
    cues = CUES[kind]
    assert all(cues.working in compose_working_screen(kind, tick) for tick in range(8))
    assert cues.working not in compose_finished_screen(kind, "All links resolve.")
    assert cues.blocked in compose_blocked_screen(kind)
    assert cues.blocked not in compose_working_screen(kind, 3)


def test_claude_draws_both_platform_markers_the_reader_accepts() -> None:
    """The macOS and Linux assistant markers both open an answer the reader recognises."""
    for mark in (CLAUDE.mark_macos, CLAUDE.mark_linux):
        screen = compose_finished_screen(AgentKind.CLAUDE, "Done.").replace(CLAUDE.mark_macos, mark)
        assert f"{mark}Done." in screen
        extraction = extract_assistant_block(AgentKind.CLAUDE, screen, max_chars=100)
        assert (extraction.text, extraction.marker_recognised) == ("Done.", True)


def test_codex_working_line_is_the_cue_herdr_reads() -> None:
    """herdr's Codex fallback rule wants ``• Working (… esc to interrupt)``."""
    line = CODEX.agent + CODEX.working.format(duration="4s")
    assert line == "• Working (4s • esc to interrupt)"
