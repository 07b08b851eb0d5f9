"""Composed screens: every kind draws every shape, and the error table is complete."""

from __future__ import annotations

import pytest

from fleetd.screens import AgentKind, parse_agent_kind
from fleetd.screens.drawing.compose import (
    compose_blocked_screen,
    compose_error_screen,
    compose_finished_screen,
    compose_idle_screen,
    compose_retrying_screen,
    compose_working_screen,
    error_screen_ids,
)


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("claude", AgentKind.CLAUDE),
        ("claude-code", AgentKind.CLAUDE),
        (" Claude_Code ", AgentKind.CLAUDE),
        ("codex", AgentKind.CODEX),
        ("CODEX", AgentKind.CODEX),
        ("opencode", AgentKind.OPENCODE),
        ("open-code", AgentKind.OPENCODE),
        ("opencode2", AgentKind.OPENCODE),
        ("pi", AgentKind.OTHER),
        ("gemini", AgentKind.OTHER),
        ("", AgentKind.OTHER),
        (None, AgentKind.OTHER),
    ],
)
def test_parse_agent_kind_maps_labels_and_aliases(label: str | None, kind: AgentKind) -> None:
    """herdr kind labels and their aliases map to our kinds; anything else is OTHER."""
    assert parse_agent_kind(label) is kind


def test_agent_kind_values_are_stable() -> None:
    """The enum values reach JSON and SQL, so they are pinned."""
    assert [k.value for k in AgentKind] == ["claude", "codex", "opencode", "other"]


@pytest.mark.parametrize("kind", list(AgentKind))
def test_every_kind_draws_every_shape(kind: AgentKind) -> None:
    """Each compose function returns screen text for each kind, including OTHER."""
    screens = [
        compose_finished_screen(kind, "All links resolve."),
        compose_idle_screen(kind),
        compose_working_screen(kind, 7),
        compose_retrying_screen(kind, 2),
        compose_blocked_screen(kind),
    ]
    assert all(isinstance(s, str) and s for s in screens)


@pytest.mark.parametrize("kind", [AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.OPENCODE])
def test_error_ids_are_namespaced_by_kind(kind: AgentKind) -> None:
    """Every drawable error id starts with its kind, and each draws a screen."""
    ids = error_screen_ids(kind)
    assert ids
    for signature_id in ids:
        assert signature_id.startswith(f"{kind.value}.")
        assert compose_error_screen(kind, signature_id)


def test_unknown_error_id_raises_key_error() -> None:
    """Asking for a signature the kind does not have is a caller bug."""
    with pytest.raises(KeyError):
        compose_error_screen(AgentKind.CODEX, "claude.api_error_529")
    assert error_screen_ids(AgentKind.OTHER) == ()
