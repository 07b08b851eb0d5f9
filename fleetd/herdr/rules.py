"""herdr's input rules that fleetd, its fake and its simulator must agree on.

Agent names (``[a-z][a-z0-9_-]{0,31}``), agent kind labels and their input aliases
(``src/detect/mod.rs``), the ``agent.start`` timeout window (more than 3000 ms, at most 300000 ms)
and the key grammar of ``send_keys`` (``src/config/keybinds.rs``). Keeping them in one pure module
lets the bridge check a name before asking herdr, and keeps the fake and the simulator refusing
exactly what herdr refuses.
"""

from __future__ import annotations

import re

__all__ = [
    "AGENT_KINDS",
    "DEFAULT_START_TIMEOUT_MS",
    "canonical_kind",
    "is_valid_agent_name",
    "is_valid_key",
    "is_valid_start_timeout",
]

_AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")

AGENT_KINDS = frozenset(
    {
        "pi",
        "claude",
        "codex",
        "gemini",
        "cursor",
        "devin",
        "agy",
        "cline",
        "omp",
        "mastracode",
        "opencode",
        "copilot",
        "kimi",
        "kiro",
        "droid",
        "amp",
        "grok",
        "hermes",
        "kilo",
        "qodercli",
        "maki",
    }
)
"""Agent kind labels herdr detects (the ``agent`` field)."""

_KIND_ALIASES = {
    "claude-code": "claude",
    "claude_code": "claude",
    "open-code": "opencode",
    "opencode2": "opencode",
    "cursor-agent": "cursor",
}

DEFAULT_START_TIMEOUT_MS = 30_000
_MIN_START_TIMEOUT_MS = 3_000
_MAX_START_TIMEOUT_MS = 300_000

_NAMED_KEYS = frozenset(
    {
        "enter",
        "return",
        "esc",
        "escape",
        "tab",
        "backspace",
        "bs",
        "space",
        "up",
        "down",
        "left",
        "right",
        *(f"f{n}" for n in range(1, 13)),
        "minus",
        "plus",
        "comma",
        "period",
        "slash",
        "backslash",
        "semicolon",
        "quote",
        "backtick",
        "equal",
        "lbracket",
        "rbracket",
    }
)
_MODIFIERS = ("ctrl", "alt", "shift")


def is_valid_agent_name(name: str) -> bool:
    """True when herdr accepts ``name`` for ``agent.start`` / ``agent.rename``."""
    return _AGENT_NAME.fullmatch(name) is not None


def canonical_kind(kind: str) -> str | None:
    """The kind label for ``kind`` (aliases resolved), or ``None`` when herdr does not know it."""
    lowered = kind.strip().lower()
    lowered = _KIND_ALIASES.get(lowered, lowered)
    return lowered if lowered in AGENT_KINDS else None


def is_valid_start_timeout(timeout_ms: int) -> bool:
    """``agent.start``'s ``timeout_ms`` must be above 3000 and at most 300000."""
    return _MIN_START_TIMEOUT_MS < timeout_ms <= _MAX_START_TIMEOUT_MS


def is_valid_key(key: str) -> bool:
    """True for a key herdr's grammar accepts (case-insensitive; ``C-c`` means ``ctrl+c``)."""
    if len(key) == 1:
        return key.isprintable()
    lowered = key.lower()
    if lowered.startswith("c-") and len(lowered) == 3:
        lowered = "ctrl+" + lowered[2]
    if lowered in _NAMED_KEYS:
        return True
    parts = lowered.split("+")
    if len(parts) < 2:
        return False
    *mods, base = parts
    if not mods or any(m not in _MODIFIERS for m in mods) or len(set(mods)) != len(mods):
        return False
    return base in _NAMED_KEYS or (len(base) == 1 and base.isprintable() and base != " ")
