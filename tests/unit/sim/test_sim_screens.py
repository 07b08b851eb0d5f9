"""Simulated screens look like the real TUIs: fleetd's own screen reader understands them.

They speak the vocabulary the composed test screens speak
(:mod:`fleetd.screens.drawing.vocabulary`): the
same status cues, and every fatal signature of the kind, by id or by its SCREENS.md name.
"""

from __future__ import annotations

import pytest

from fleetd.screens import AgentKind, digest, extract_assistant_block, match_fatal, signature_ids
from fleetd.screens.drawing.vocabulary import CUES, SCREENS_NAMES
from fleetd.sim import screens

KINDS = ["claude", "codex", "opencode"]
ANSWER = "Fixed the flaky poller test; it now waits on the event and passed 50 runs in a row."


def _text(lines: list[str]) -> str:
    return "\n".join(lines)


@pytest.mark.parametrize("kind", KINDS)
def test_done_screen_yields_the_answer_as_last_assistant_block(kind: str) -> None:
    """extract_assistant_block recovers the answer (with its marker) from a finished turn."""
    screen = _text(screens.done(kind, "Fix the poller test", ANSWER, elapsed=75))
    extraction = extract_assistant_block(AgentKind(kind), screen, max_chars=4000)
    assert extraction.marker_recognised
    assert " ".join(extraction.text.split()) == ANSWER
    assert match_fatal(AgentKind(kind), screen) is None


@pytest.mark.parametrize(
    ("kind", "signature", "expected"),
    [
        ("claude", None, "claude.api_error_529"),
        ("claude", "usage-limit", "claude.usage_limit"),
        ("claude", "oauth-expired", "claude.oauth_expired"),
        ("claude", "credit", "claude.credit_low"),
        ("codex", None, "codex.usage_limit"),
        ("codex", "stream-lost", "codex.stream_lost"),
        ("codex", "context-full", "codex.context_full"),
        ("opencode", None, "opencode.credit_low"),
        ("opencode", "bad-key", "opencode.bad_api_key"),
        ("opencode", "context", "opencode.context_overflow"),
    ],
)
def test_error_screen_carries_the_chosen_fatal_signature(
    kind: str, signature: str | None, expected: str
) -> None:
    """The names scenarios use (and none) draw the signature fleetd's matcher identifies."""
    screen = _text(screens.errored(kind, "Fix it", signature, elapsed=12))
    found = match_fatal(AgentKind(kind), screen)
    assert found is not None
    assert found.id == expected


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (kind, name)
        for kind in (AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.OPENCODE)
        for name in (*signature_ids(kind), *SCREENS_NAMES[kind])
    ],
)
def test_the_simulator_draws_every_fatal_signature_of_the_vocabulary(
    kind: AgentKind, name: str
) -> None:
    """Each signature id and SCREENS.md name draws a screen read as that signature, by that kind
    only (a crash leaves the TUI and shows its output)."""
    expected = SCREENS_NAMES[kind].get(name, name)
    screen = _text(screens.errored(kind.value, "Fix it\nin two lines", name, elapsed=12))
    found = match_fatal(kind, screen)
    assert found is not None
    assert found.id == expected
    assert [k for k in AgentKind if k is not kind and match_fatal(k, screen)] == []


def test_another_kinds_signature_draws_the_default() -> None:
    """A name the kind does not have draws the kind's default signature, never a foreign one."""
    screen = _text(screens.errored("codex", "Fix it", "claude.api_error_529", elapsed=1))
    found = match_fatal(AgentKind.CODEX, screen)
    assert found is not None
    assert found.id == screens.DEFAULT_SIGNATURE[AgentKind.CODEX]


@pytest.mark.parametrize("kind", KINDS)
def test_working_screen_changes_with_progress_but_not_with_the_timer(kind: str) -> None:
    """New frames change the progress digest; a frozen frame with a ticking timer does not."""
    early = _text(screens.working(kind, "x", frame=1, elapsed=3))
    later = _text(screens.working(kind, "x", frame=2, elapsed=4))
    ticking = _text(screens.working(kind, "x", frame=2, elapsed=9))
    assert early != later
    assert digest(early) != digest(later)
    assert digest(later) == digest(ticking)


@pytest.mark.parametrize("kind", KINDS)
def test_working_screen_shows_the_kinds_working_cue(kind: str) -> None:
    """Working screens carry what herdr's manifests read as working, in every frame."""
    cue = CUES[AgentKind(kind)].working
    for frame in range(8):
        assert cue in _text(screens.working(kind, "x", frame=frame, elapsed=frame * 3))
    assert cue not in _text(screens.done(kind, "x", ANSWER, elapsed=9))


@pytest.mark.parametrize("kind", KINDS)
def test_blocked_screen_is_an_approval_prompt_not_an_error(kind: str) -> None:
    """Blocked screens show the approval UI herdr reads as blocked, and no fatal signature."""
    screen = _text(screens.blocked(kind, "x"))
    assert CUES[AgentKind(kind)].blocked in screen
    assert match_fatal(AgentKind(kind), screen) is None


@pytest.mark.parametrize("kind", [*KINDS, "pi"])
def test_every_state_draws_for_every_kind(kind: str) -> None:
    """idle, interrupted and unknown kinds draw without failing and without fatal signatures."""
    for lines in (screens.idle(kind), screens.interrupted(kind, "x")):
        assert lines
        assert (
            match_fatal(AgentKind.OTHER if kind == "pi" else AgentKind(kind), _text(lines)) is None
        )


def test_shell_and_launch_screens() -> None:
    """A shell shows its prompt; a launch shows the typed command line."""
    assert screens.shell("/w", [])[-1] == "sim@herdr:/w$ "
    assert screens.launching("codex", ["codex", "--full-auto"], None)[0].endswith(
        "codex --full-auto"
    )
