"""herdr's input rules: names, kinds, start timeouts, keys."""

from __future__ import annotations

import pytest

from fleetd.herdr.rules import (
    canonical_kind,
    is_valid_agent_name,
    is_valid_key,
    is_valid_start_timeout,
)


@pytest.mark.parametrize(
    ("name", "ok"),
    [("lead", True), ("m-1_x", True), ("a" * 32, True), ("a" * 33, False), ("1a", False),
     ("Lead", False), ("", False), ("a b", False)],
)  # fmt: skip
def test_agent_names(name: str, ok: bool) -> None:
    """Names match `[a-z][a-z0-9_-]{0,31}`."""
    assert is_valid_agent_name(name) is ok


@pytest.mark.parametrize(
    ("kind", "label"),
    [("claude", "claude"), ("claude-code", "claude"), ("Open-Code", "opencode"),
     ("codex", "codex"), ("vim", None)],
)  # fmt: skip
def test_kinds_and_aliases(kind: str, label: str | None) -> None:
    """Kind aliases resolve to herdr's labels; unknown kinds resolve to None."""
    assert canonical_kind(kind) == label


@pytest.mark.parametrize(
    ("ms", "ok"), [(3000, False), (3001, True), (300000, True), (300001, False)]
)
def test_start_timeout_window(ms: int, ok: bool) -> None:
    """agent.start timeout must be above 3000 ms and at most 300000 ms."""
    assert is_valid_start_timeout(ms) is ok


@pytest.mark.parametrize(
    ("key", "ok"),
    [("Enter", True), ("esc", True), ("ctrl+c", True), ("C-c", True), ("shift+tab", True),
     ("ctrl+shift+p", True), ("f12", True), ("y", True), ("1", True), ("pageup", False),
     ("hyper+x", False), ("ctrl+ctrl+c", False), ("delete", False), ("ctrl+", False)],
)  # fmt: skip
def test_key_grammar(key: str, ok: bool) -> None:
    """Keys follow herdr's grammar; PageUp/Delete and unknown modifiers are refused."""
    assert is_valid_key(key) is ok
