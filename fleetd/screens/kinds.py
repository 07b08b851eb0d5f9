"""Which agent TUI a pane runs, as far as screen reading is concerned.

herdr labels every detected agent with a kind (``claude``, ``codex``, ``opencode``, ``pi``, ...) and
accepts a few aliases on input (``claude-code``, ``open-code``, ``opencode2``). Screen reading only
knows the layouts of three TUIs; every other kind is :attr:`AgentKind.OTHER`, for which fleetd reads
raw text and never recognises an assistant marker or a fatal signature.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AgentKind", "parse_agent_kind"]


class AgentKind(StrEnum):
    """The agent TUIs whose screens fleetd can read."""

    CLAUDE = "claude"
    CODEX = "codex"
    OPENCODE = "opencode"
    OTHER = "other"


_ALIASES: dict[str, AgentKind] = {
    "claude": AgentKind.CLAUDE,
    "claude-code": AgentKind.CLAUDE,
    "claude_code": AgentKind.CLAUDE,
    "claudecode": AgentKind.CLAUDE,
    "codex": AgentKind.CODEX,
    "codex-cli": AgentKind.CODEX,
    "codex_cli": AgentKind.CODEX,
    "openai-codex": AgentKind.CODEX,
    "opencode": AgentKind.OPENCODE,
    "open-code": AgentKind.OPENCODE,
    "open_code": AgentKind.OPENCODE,
    "opencode2": AgentKind.OPENCODE,
}


def parse_agent_kind(label: str | None) -> AgentKind:
    """Map herdr's kind label (or an alias, any case, surrounding blanks ignored) to a kind.

    ``None``, an empty label and every kind fleetd has no screen rules for give ``OTHER``.
    """
    if label is None:
        return AgentKind.OTHER
    return _ALIASES.get(label.strip().lower(), AgentKind.OTHER)
