"""The last assistant block on a pane, for the completion fallback and the delivery baseline.

When a turn ends without ``fleet_reply`` the bridge gives the lead the member's last assistant
text as read from its pane; when a lost turn boundary is repaired (M4 §8) the same reading is
compared against the baseline captured right after the prompt was sent. Both need to know whether
the text came from a recognised assistant marker: raw screen text never authorises a repair.

Reading rules per kind live in :mod:`.claude`, :mod:`.codex` and :mod:`.opencode`. The answer is
the last block of the current turn once tool blocks and notices are set aside; if that block is
the agent's own message (an API error, a limit notice, an error box) the turn has no answer and
the text is empty. With no marker on screen the text is the tail of the screen above the input
chrome, normalised, and the capture is ``UNRECOGNISED``. Text longer than ``max_chars`` keeps its
tail: the end of an answer is where the conclusion is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from fleetd.screens import claude, codex, opencode
from fleetd.screens.blocks import Block, Role, TurnView
from fleetd.screens.kinds import AgentKind
from fleetd.screens.normalise import clean_lines, normalise, tidy

__all__ = [
    "CaptureResult",
    "Extraction",
    "extract_assistant_block",
    "last_block",
    "read_turn",
    "repair_supported",
]

_READERS: dict[AgentKind, Callable[[list[str]], TurnView]] = {
    AgentKind.CLAUDE: claude.read,
    AgentKind.CODEX: codex.read,
    AgentKind.OPENCODE: opencode.read,
}
# Kinds whose answer block can be told from everything else on screen by text alone. Codex only
# behind a switch: its info notices and its answers share the ``•`` marker and differ only in
# colour, which a text read loses. OpenCode stays off until live pane fixtures exist.
_REPAIRABLE = frozenset({AgentKind.CLAUDE})


class CaptureResult(StrEnum):
    """How a pane capture went (M4 §8.2); extraction yields the first two."""

    PRESENT = "present"
    UNRECOGNISED = "unrecognised"
    READ_FAILED = "read_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    """The assistant text read from one pane capture.

    ``PRESENT`` means a supported assistant marker was recognised (``text`` may still be empty when
    the current turn has no answer yet); ``UNRECOGNISED`` carries raw screen text; ``READ_FAILED``
    (built by the caller with :meth:`read_failed`) carries nothing.
    """

    text: str
    marker_recognised: bool
    clipped: bool
    capture: CaptureResult

    def __post_init__(self) -> None:
        if self.marker_recognised != (self.capture is CaptureResult.PRESENT):
            raise ValueError("marker_recognised must be true exactly when capture is PRESENT")
        if self.capture is CaptureResult.READ_FAILED and (self.text or self.clipped):
            raise ValueError("a failed read carries no text")

    @classmethod
    def read_failed(cls) -> Extraction:
        """The value a caller records when the pane read itself failed."""
        return cls(
            text="", marker_recognised=False, clipped=False, capture=CaptureResult.READ_FAILED
        )


def read_turn(kind: AgentKind, screen_text: str) -> TurnView:
    """Read a screen as ``kind``; OTHER kinds are never recognised."""
    lines = clean_lines(screen_text)
    reader = _READERS.get(kind)
    if reader is None:
        return TurnView(recognised=False, history=tuple(lines), blocks=(), tail=tuple(lines))
    return reader(lines)


def last_block(view: TurnView) -> Block | None:
    """The turn's last block that is neither a tool nor a notice, if any."""
    for block in reversed(view.blocks):
        if block.role not in (Role.TOOL, Role.NOTICE):
            return block
    return None


def _clip(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    return text[-max_chars:], True


def extract_assistant_block(kind: AgentKind, screen_text: str, *, max_chars: int) -> Extraction:
    """The last assistant block on ``screen_text`` for ``kind``, clipped to ``max_chars`` (tail)."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    view = read_turn(kind, screen_text)
    if not view.recognised:
        text, clipped = _clip(normalise("\n".join(view.history)), max_chars)
        return Extraction(
            text=text, marker_recognised=False, clipped=clipped, capture=CaptureResult.UNRECOGNISED
        )
    block = last_block(view)
    answer = tidy(block.lines) if block is not None and block.role is Role.ANSWER else ""
    text, clipped = _clip(answer, max_chars)
    return Extraction(
        text=text, marker_recognised=True, clipped=clipped, capture=CaptureResult.PRESENT
    )


def repair_supported(kind: AgentKind, *, codex: bool = False) -> bool:
    """Whether a lost boundary on this kind may be repaired from pane text (M4 §8.2).

    Claude Code: yes. Codex: only with ``codex`` (the ``health.repair.codex`` switch, off by
    default). OpenCode and every other kind: never.
    """
    return kind in _REPAIRABLE or (codex and kind is AgentKind.CODEX)
