"""How Claude Code draws a turn, read back into blocks.

Layout (``shared/agents/SCREENS.md`` §1): history on top; the input box is the last two column-0
horizontal rules with the ``❯`` prompt between them, status lines below (old 1.x: a ``╭─╮`` box).
A permission dialog replaces the box and sits below a single rule. User messages in history are
column-0 ``❯ `` (1.x ``> ``) lines; the current turn is everything below the last one.

Assistant output is a column-0 ``⏺`` (macOS) or ``●`` (Linux) line with 2-space continuation.
A ``⏺`` block is a tool call when its header looks like ``Name(...)``, carries an MCP or
``ctrl+o to expand`` hint, or has ``⎿`` result lines right under it (no blank line between);
that first result group is tool output. ``⎿`` groups with no header, after a blank line, or
after a tool's own result are the agent's messages for the turn: API errors, limit notices,
"Interrupted by user". A ``⏺`` block that opens with ``API Error`` or a known system notice is
also a message, not an answer. Result lines right under the working spinner (tips, ``Retrying in
…`` status) are notices: the turn is still running.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleetd.screens.blocks import Block, Role, TurnView, dedent, squash

__all__ = ["SPINNER", "read"]

_RULE = re.compile(r"^(?:─+|─{3,}.*)$")
_BOX_TOP = re.compile(r"^╭─")
_USER = re.compile(r"^(?:❯|>)(?: |$)")
_MARK = re.compile(r"^[⏺●](?: |$)")
_RESULT = re.compile(r"^ {1,4}⎿(?: |$)")
# The working spinner: a glyph, a verb ending in "…", maybe "(47s · ↓ 2.1k tokens)" after it.
SPINNER = re.compile(r"^ ?[*·✢✶✻✽] \S[^…\n]{0,60}…")
_TOOL_HEADER = re.compile(r"^[A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*)*\(|\(MCP\)|ctrl\+[or] to expand")
# Openings of the synthetic messages Claude Code prints in place of an answer (squashed).
_SYSTEM_OPENINGS = (
    "APIError",
    "Promptistoolong",
    "InvalidAPIkey",
    "MissingAPIkey",
    "OAuthtoken",
    "Creditbalancetoolow",
    "You'vehityour",
    "Limitreached",
    "5-hourlimitreached",
    "Claudeusagelimitreached",
    "ClaudeAIusagelimitreached",
)


@dataclass(slots=True)
class _Draft:
    header: list[str] | None
    groups: list[list[str]] = field(default_factory=list)
    spinner: bool = False  # result lines under a spinner: tips and retry status


def _split_chrome(lines: list[str]) -> int:
    """Index of the first input-chrome line (``len(lines)`` when there is none)."""
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    if len(rules) >= 2 and any(_USER.match(line) for line in lines[rules[-2] + 1 : rules[-1]]):
        return rules[-2]
    if rules:
        return rules[-1]
    tops = [i for i, line in enumerate(lines) if _BOX_TOP.match(line)]
    return tops[-1] if tops else len(lines)


def _drafts(turn: list[str]) -> list[_Draft]:
    drafts: list[_Draft] = []
    current: _Draft | None = None
    after_blank = False
    for line in turn:
        if _MARK.match(line):
            current = _Draft(header=[line[2:]])
            drafts.append(current)
        elif SPINNER.match(line):
            current = _Draft(header=None, spinner=True)
            drafts.append(current)
        elif _RESULT.match(line):
            if current is None or after_blank:
                current = _Draft(header=None)
                drafts.append(current)
            current.groups.append([line.lstrip(" ")[1:].lstrip(" ")])
        elif line and not line[0].isspace():
            current = None
        elif current is not None:
            if current.groups:
                current.groups[-1].append(dedent(line, 5))
            elif current.header is not None:
                current.header.append(dedent(line, 2))
        after_blank = not line
    return drafts


def _header_role(header: list[str]) -> Role:
    first = header[0]
    if _TOOL_HEADER.search(first) or any("to expand)" in line for line in header[1:2]):
        return Role.TOOL
    if squash("\n".join(header)).startswith(_SYSTEM_OPENINGS):
        return Role.MESSAGE
    return Role.ANSWER


def _blocks(turn: list[str]) -> list[Block]:
    blocks: list[Block] = []
    for draft in _drafts(turn):
        groups = [tuple(group) for group in draft.groups]
        if draft.header is None:
            role = Role.NOTICE if draft.spinner else Role.MESSAGE
            blocks += [Block(role=role, lines=group) for group in groups]
        elif groups:
            blocks.append(Block(role=Role.TOOL, lines=(*draft.header, *groups[0])))
            blocks += [Block(role=Role.MESSAGE, lines=group) for group in groups[1:]]
        else:
            blocks.append(Block(role=_header_role(draft.header), lines=tuple(draft.header)))
    return blocks


def read(lines: list[str]) -> TurnView:
    """Read cleaned Claude Code screen lines."""
    cut = _split_chrome(lines)
    history = lines[:cut]
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    tail = lines[rules[-1] + 1 :] if rules else lines
    users = [i for i, line in enumerate(history) if _USER.match(line)]
    turn = history[users[-1] + 1 :] if users else history
    return TurnView(
        recognised=any(_MARK.match(line) for line in history),
        history=tuple(history),
        blocks=tuple(_blocks(turn)),
        tail=tuple(tail),
    )
