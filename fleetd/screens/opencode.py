"""How OpenCode draws a turn, read back into blocks.

Layout (``shared/agents/SCREENS.md`` §3): a full-screen TUI. Each assistant message ends with a
``▣  Agent · Model`` footer that gains `` · 7.1s`` once the message finished. User messages,
reasoning and errors are boxes with a ``┃`` bar; assistant text has no marker and is indented five
columns; tools are one-line entries (``→ Read``, ``← Edit``, ``✱ Glob``, ``$ cmd``, ``⚙ tool``)
whose details, if any, follow without a blank line, or bar boxes titled ``# …`` or ``← …``
(block tools such as a shell run with its output). The input box (``┃`` lines closed by ``╹▀▀``)
and the status bar sit at the bottom; a sidebar may fill the columns right of ~120.

The current turn is what lies between the previous footer and the last one. Its first box is the
user's message; boxes opening with a tool title are tools, ``Thinking:`` boxes are reasoning. Any
other box directly above a footer with no duration is the error box: the turn ended in an error,
not an answer (its text looks like a user box, hence the position rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleetd.screens.blocks import Block, Role, TurnView, dedent

__all__ = ["read"]

_FOOTER = re.compile(r"^\s*▣(?:\s|$)")
_DURATION = re.compile(r"·\s*(?:\d+h\s*)?(?:\d+m\s*)?\d+(?:\.\d+)?(?:ms|s|m|h)\b")
_BAR = re.compile(r"^\s*┃")
_BOX_BOTTOM = re.compile(r"^\s*╹")
_TOOL = re.compile(r"^\s*[→←✱$⚙~#%◈◇](?:\s|$)")
_TOOL_BOX = re.compile(r"^(?:[#←$!]\s)")
_REASONING = re.compile(r"^_?Thinking:")
_STATUS = re.compile(r"ctrl\+p commands|esc (?:again to )?interrupt|OpenCode \d|\[retrying in")
_WIDE = 120
_GUTTER = 3
_SEARCH_LIMIT = 400  # panes are never that wide; bounds the gutter search


@dataclass(slots=True)
class _Part:
    kind: str  # "box" | "tool" | "text"
    lines: list[str] = field(default_factory=list)
    closed: bool = False


def crop_sidebar(lines: list[str]) -> list[str]:
    """Drop the right-hand sidebar OpenCode draws on panes wider than 120 columns."""
    width = max((len(line) for line in lines), default=0)
    if width <= _WIDE:
        return lines
    for column in range(100, min(width, _SEARCH_LIMIT)):
        if all(not line[column - _GUTTER : column].strip() for line in lines) and any(
            line[column:].strip() for line in lines
        ):
            return [line[:column].rstrip() for line in lines]
    return lines


def _parts(segment: list[str]) -> list[_Part]:
    parts: list[_Part] = []
    for line in segment:
        last = parts[-1] if parts else None
        if _BAR.match(line):
            if last is None or last.kind != "box" or last.closed:
                parts.append(_Part(kind="box"))
            parts[-1].lines.append(dedent(line.lstrip(" ")[1:], 2))
        elif _TOOL.match(line):
            parts.append(_Part(kind="tool", lines=[line.strip()]))
        elif not line:
            if last is not None and last.kind == "text":
                last.lines.append("")
            elif last is not None:
                last.closed = True
        elif last is not None and last.kind == "tool" and not last.closed:
            last.lines.append(line.strip())
        elif last is not None and last.kind == "text":
            last.lines.append(dedent(line, 5))
        else:
            parts.append(_Part(kind="text", lines=[dedent(line, 5)]))
    return parts


def _box_role(part: _Part, *, last: bool, first: bool) -> Role:
    opening = next((line for line in part.lines if line.strip()), "")
    if _TOOL_BOX.match(opening):
        return Role.TOOL
    if _REASONING.match(opening) or first or not last:
        return Role.NOTICE
    return Role.MESSAGE


def _blocks(segment: list[str], footer: str) -> list[Block]:
    parts = _parts(segment)
    boxes = [i for i, part in enumerate(parts) if part.kind == "box"]
    finished = bool(_DURATION.search(footer))
    blocks: list[Block] = []
    for index, part in enumerate(parts):
        if part.kind == "tool":
            role = Role.TOOL
        elif part.kind == "text":
            role = Role.ANSWER
        else:
            role = _box_role(part, last=index == len(parts) - 1, first=index == boxes[0])
            if role is Role.MESSAGE and finished:
                role = Role.NOTICE
        blocks.append(Block(role=role, lines=tuple(part.lines)))
    return blocks


def _input_start(lines: list[str]) -> int:
    bottoms = [i for i, line in enumerate(lines) if _BOX_BOTTOM.match(line)]
    if not bottoms:
        return len(lines)
    start = bottoms[-1]
    while start > 0 and _BAR.match(lines[start - 1]):
        start -= 1
    return start


def read(lines: list[str]) -> TurnView:
    """Read cleaned OpenCode screen lines."""
    lines = crop_sidebar(lines)
    history = lines[: _input_start(lines)]
    chrome = [
        i
        for i, line in enumerate(lines)
        if _FOOTER.match(line)
        or _BAR.match(line)
        or _BOX_BOTTOM.match(line)
        or _STATUS.search(line)
    ]
    tail = lines[chrome[-1] + 1 :] if chrome else lines
    footers = [i for i, line in enumerate(history) if _FOOTER.match(line)]
    if not footers:
        return TurnView(recognised=False, history=tuple(history), blocks=(), tail=tuple(tail))
    start = footers[-2] + 1 if len(footers) > 1 else 0
    segment = history[start : footers[-1]]
    return TurnView(
        recognised=True,
        history=tuple(history),
        blocks=tuple(_blocks(segment, history[footers[-1]])),
        tail=tuple(tail),
    )
