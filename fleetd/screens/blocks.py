"""The neutral shape every agent layout is read into.

Each kind module (:mod:`.claude`, :mod:`.codex`, :mod:`.opencode`) knows how its TUI draws a turn;
it returns a :class:`TurnView` so that extraction and signature matching share one reading and
never re-parse the screen their own way. A block's ``role`` says what the agent drew:

- ``ANSWER``: assistant text, the only role extraction returns;
- ``TOOL``: a tool call, its output or an exec cell: never an answer, never a fatal signature;
- ``MESSAGE``: the agent's own status line for the turn (API errors, limit notices, Codex ``■``
  cells, OpenCode error boxes): never an answer, the only place a turn-level signature may match;
- ``NOTICE``: informational cells (warnings, approvals, user and reasoning boxes) that neither
  answer nor end the turn, and that both readers skip.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Block", "Role", "TurnView", "dedent", "squash"]

_SPACE = re.compile(r"\s+")
_SQUASH_TRANSLATE = str.maketrans({"’": "'", "∙": "·", "•": "·", "⋅": "·"})


class Role(StrEnum):
    """What a block on the screen is."""

    ANSWER = "answer"
    TOOL = "tool"
    MESSAGE = "message"
    NOTICE = "notice"


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One block of the current turn, its marker and continuation indent removed."""

    role: Role
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnView:
    """A screen read as one agent kind.

    ``recognised`` is true when the kind's assistant marker was seen anywhere above the input
    chrome. ``history`` is the screen above the input chrome (raw-text fallback reads it),
    ``blocks`` the current turn in screen order, and ``tail`` the lines below the agent's last
    chrome line, where a terminal shows crash output once the TUI is gone.
    """

    recognised: bool
    history: tuple[str, ...]
    blocks: tuple[Block, ...]
    tail: tuple[str, ...]


def dedent(line: str, width: int) -> str:
    """Remove up to ``width`` leading spaces (a continuation indent), keeping deeper indents."""
    stripped = line[:width].lstrip(" ")
    return stripped + line[width:]


def squash(text: str) -> str:
    """Text with all whitespace removed and look-alike glyphs unified, for wrap-proof matching.

    Agents hard-wrap long messages at the pane width, sometimes inside a token, so signatures are
    compared on squashed text: ``"api_\\n    error"`` and ``"api_error"`` squash alike.
    """
    return _SPACE.sub("", text.translate(_SQUASH_TRANSLATE))
