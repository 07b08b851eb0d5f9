"""How the Codex CLI draws a turn, read back into blocks.

Layout (``shared/agents/SCREENS.md`` §2): an inline viewport, so history sits in the terminal
above the composer. The current prompt is the last ``›`` line with no block-marker line after it
(the composer, or the selection line of an approval dialog); the history is what lies above it
(and above an approval dialog's heading), and the current turn is what follows the last user
``› `` line in that history.

Cells start at column 0 with ``•`` (agent text, exec and tool cells, info notices), ``■`` (errors,
whose wrapped lines restart at column 0; a column-0 line after a blank line is no longer part of
a cell), ``⚠`` (warnings) and ``✓``/``✗`` (approval notes); a
``─ Worked for …`` separator closes a turn. An exec or tool cell is told from an answer by its
first word: a progress form (``Running``, ``Working``, ...) always is one; a past form (``Ran``,
``Edited``, ``Added``, ...) is one only with cell structure (a ``└`` output line, a ``(+n -m)``
diff stat, or the word alone), because answers start with those words too ("Added --dry-run …").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fleetd.screens.blocks import Block, Role, TurnView, dedent

__all__ = ["read"]

_PROMPT = re.compile(r"^›(?: |$)")
_CELL = re.compile(r"^(?:[•◦■⚠✓✔✗✘🖐](?: |$)|ERROR: )")
_SEPARATOR = re.compile(r"^─ ")
_AGENT = re.compile(r"^[•◦](?: |$)")
_AGENT_MARKERS = frozenset({"•", "◦"})
_ERROR_MARKERS = frozenset({"■", "✘", "🖐", "ERROR:"})
_PROGRESS_WORDS = frozenset(
    {"Running", "Exploring", "Calling", "Searching", "Waiting", "Working", "Reconnecting"}
)
_PAST_WORDS = frozenset(
    {"Ran", "Explored", "Edited", "Added", "Deleted", "Updated", "Called", "Searched", "Waited"}
)
_DIFF_STAT = re.compile(r"\(\+\d+ -\d+\)\s*$")
_INFO = re.compile(r"^You have \d+ usage limit resets? available")
# Approval and trust dialogs drawn in the bottom pane, below the last history cell.
_DIALOG = re.compile(
    r"^\s{0,2}(?:Would you like to (?:run the following command|make the following edits"
    r"|grant these permissions)\?|Do you trust the contents of this directory\?)"
)


@dataclass(slots=True)
class _Draft:
    marker: str
    lines: list[str] = field(default_factory=list)


def _current_prompt(lines: list[str]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        if _CELL.match(lines[index]):
            return None
        if _PROMPT.match(lines[index]):
            return index
    return None


def _agent_role(lines: list[str]) -> Role:
    header = lines[0]
    word = header.split(" ", 1)[0].rstrip(".,:")
    if word in _PROGRESS_WORDS:
        return Role.TOOL
    if word in _PAST_WORDS and (
        header.strip() == word
        or _DIFF_STAT.search(header)
        or any(line.lstrip().startswith("└") for line in lines[1:])
    ):
        return Role.TOOL
    if _INFO.match(header):
        return Role.NOTICE
    return Role.ANSWER


def _blocks(turn: list[str]) -> list[Block]:
    drafts: list[_Draft] = []
    current: _Draft | None = None
    after_blank = False
    for line in turn:
        if _CELL.match(line):
            marker = "ERROR:" if line.startswith("ERROR:") else line[0]
            current = _Draft(marker=marker, lines=[line[len(marker) :].removeprefix(" ")])
            drafts.append(current)
        elif _SEPARATOR.match(line) or (after_blank and line and not line[0].isspace()):
            current = None
        elif current is not None:
            current.lines.append(dedent(line, 2))
        after_blank = not line
    blocks: list[Block] = []
    for draft in drafts:
        if draft.marker in _AGENT_MARKERS:
            role = _agent_role(draft.lines)
        elif draft.marker in _ERROR_MARKERS:
            role = Role.MESSAGE
        else:
            role = Role.NOTICE
        blocks.append(Block(role=role, lines=tuple(draft.lines)))
    return blocks


def read(lines: list[str]) -> TurnView:
    """Read cleaned Codex screen lines."""
    prompt = _current_prompt(lines)
    history = lines if prompt is None else lines[:prompt]
    dialogs = [i for i, line in enumerate(history) if _DIALOG.match(line)]
    if dialogs:
        history = history[: dialogs[-1]]
    prompts = [i for i, line in enumerate(lines) if _PROMPT.match(line)]
    tail = lines[prompts[-1] + 1 :] if prompts else lines
    users = [i for i, line in enumerate(history) if _PROMPT.match(line)]
    turn = history[users[-1] + 1 :] if users else history
    return TurnView(
        recognised=any(_AGENT.match(line) or line.startswith("■") for line in history),
        history=tuple(history),
        blocks=tuple(_blocks(turn)),
        tail=tuple(tail),
    )
