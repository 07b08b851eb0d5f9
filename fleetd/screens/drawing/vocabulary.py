"""The words and glyphs each agent TUI draws: one vocabulary for everything that draws a screen.

Two things draw agent screens, and both take every marker, status cue and error message from
here: :mod:`fleetd.screens.drawing.compose` (fixed shapes the screen-reading tests read back) and
the
herdr simulator's :mod:`fleetd.sim.screens` (animated screens its agents show). The readers
(:mod:`.claude`, :mod:`.codex`, :mod:`.opencode`, :mod:`.signatures`) do not use this module: they
are pinned by the recorded fixtures under ``tests/fixtures/screens``, so a word changed here that
a reader no longer understands fails the drawing tests instead of quietly agreeing with itself.

Literals follow ``shared/agents/SCREENS.md`` (§1 Claude Code, §2 Codex, §3 OpenCode); prefixes are
written as drawn, indentation included. Per kind:

* the **markers**: the user's prompt line, the assistant's answer, tool calls and results, errors;
* the **status cues** herdr's manifests read a state from (:data:`CUES`): ``working`` is on every
  working screen of the kind, ``blocked`` on every approval prompt;
* the **fatal signatures**: :data:`ERROR_EXAMPLES` (one message per signature id, worded as the
  agent prints it) and :data:`SCREENS_NAMES` (the short names SCREENS.md and simulator scenarios
  use, e.g. ``usage-limit``, mapped to the signature ids fleetd reports).

``OTHER`` kinds have no vocabulary: fleetd recognises nothing on their screens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetd.screens.drawing.examples import ERROR_EXAMPLES, SCREENS_NAMES
from fleetd.screens.kinds import AgentKind

__all__ = [
    "CLAUDE",
    "CODEX",
    "CUES",
    "ERROR_EXAMPLES",
    "OPENCODE",
    "SCREENS_NAMES",
    "SPINNER_GLYPHS",
    "SPINNER_VERBS",
    "ClaudeWords",
    "CodexWords",
    "Cues",
    "OpenCodeWords",
    "fatal_signature_id",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cues:
    """What every screen of one kind in a given state shows (a phrase, matched as a substring)."""

    working: str
    blocked: str


_CLAUDE_CUES = Cues(working="esc to interrupt", blocked="Do you want to proceed?")
_CODEX_CUES = Cues(working="Working (", blocked="Press enter to confirm or esc to cancel")
_OPENCODE_CUES = Cues(working="esc interrupt", blocked="△ Permission required")


SPINNER_GLYPHS = ("·", "✢", "*", "✶", "✻", "✽")
"""Claude Code's working spinner glyphs (the reader's ``SPINNER`` accepts each)."""

SPINNER_VERBS = ("Percolating", "Pondering", "Brewing", "Crunching", "Noodling", "Simmering")
"""Verbs Claude Code's spinner shows (each ends in ``…`` on screen)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeWords:
    """Claude Code 2.x (SCREENS.md §1)."""

    mark_macos: str = "⏺ "
    mark_linux: str = "● "
    continuation: str = "  "
    user: str = "❯ "
    result: str = "  ⎿  "
    result_continuation: str = "     "
    rule: str = "─"
    prompt_box: str = "❯ "
    summary: str = "✻ {verb} for {duration}"
    welcome: str = "✻ Welcome to Claude Code!"
    help: str = "  /help for help"
    interrupted: str = "Interrupted by user"
    shortcuts: str = "  ? for shortcuts"
    accept_edits: str = "  ⏵⏵ accept edits on (shift+tab to cycle)"
    bypass: str = "  ⏵⏵ bypass permissions on (shift+tab to cycle)"
    interrupt: str = f" · {_CLAUDE_CUES.working}"
    spinner: str = "{glyph} {verb}… ({duration} · ↓ {tokens} tokens)"
    retrying: str = "     · Retrying in {seconds} seconds… (attempt {attempt}/10)"
    approval_tool: str = " Bash command"
    approval_question: str = f" {_CLAUDE_CUES.blocked}"
    approval_options: tuple[str, str, str] = (
        " ❯ 1. Yes",
        "   2. Yes, and don't ask again for {scope}",
        "   3. No, and tell Claude what to do differently (esc)",
    )
    approval_footer: str = " Esc to cancel · Tab to amend · ctrl+e to explain"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexWords:
    """The Codex CLI (SCREENS.md §2)."""

    user: str = "› "
    agent: str = "• "
    agent_blink: str = "◦ "
    continuation: str = "  "
    output: str = "  └ "
    error: str = "■ "
    separator: str = "─ Worked for {duration} "
    composer: str = "› Ask Codex to do anything"
    model: str = "  gpt-5.5 high · {cwd}"
    banner: str = ">_ OpenAI Codex (v0.150.0)"
    working: str = _CODEX_CUES.working + "{duration} • esc to interrupt)"
    reconnecting: str = "Reconnecting... {attempt}/5 ({duration} • esc to interrupt)"
    interrupted: str = "■ Conversation interrupted - tell the model what to do differently."
    approval_question: str = "  Would you like to run the following command?"
    approval_options: tuple[str, str, str] = (
        "› 1. Yes, proceed (y)",
        "  2. Yes, and don't ask again for {scope} (p)",
        "  3. No, and tell Codex what to do differently (esc)",
    )
    approval_footer: str = f"  {_CODEX_CUES.blocked}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenCodeWords:
    """OpenCode 1.18 (SCREENS.md §3)."""

    bar: str = "  ┃"
    box: str = "  ┃  "
    indent: str = "     "
    tool: str = "     → "
    footer: str = "     ▣  {agent} · {model}"
    agent: str = "Build"
    model: str = "Claude Sonnet 4.5"
    provider: str = "Anthropic"
    version: str = "OpenCode 1.18.29"
    box_bottom: str = "  ╹"
    box_fill: str = "▀"
    progress: tuple[str, str] = ("■", "⬝")
    commands: str = "ctrl+p commands"
    interrupt: str = _OPENCODE_CUES.working
    interrupted: str = " · interrupted"
    retrying: str = "[retrying in {wait} attempt #{attempt}]"
    permission: str = _OPENCODE_CUES.blocked
    permission_buttons: str = "Allow once   Allow always   Reject"
    permission_hints: str = "⇆ select  enter confirm"

    @property
    def input_label(self) -> str:
        """The input box's agent and model line (``  ┃  Build · <model> <Provider>``)."""
        return f"{self.box}{self.agent} · {self.model} {self.provider}"

    def footer_line(self, duration: str | None = None) -> str:
        """The ``▣`` footer closing a message; a finished one carries its duration."""
        line = self.footer.format(agent=self.agent, model=self.model)
        return line if duration is None else f"{line} · {duration}"


CLAUDE = ClaudeWords()
CODEX = CodexWords()
OPENCODE = OpenCodeWords()

CUES: Mapping[AgentKind, Cues] = {
    AgentKind.CLAUDE: _CLAUDE_CUES,
    AgentKind.CODEX: _CODEX_CUES,
    AgentKind.OPENCODE: _OPENCODE_CUES,
}
"""The status cues of each kind fleetd reads; ``OTHER`` has none."""


def fatal_signature_id(kind: AgentKind, name: str | None) -> str | None:
    """The signature id ``name`` stands for on a ``kind`` screen, or ``None`` if it names none.

    ``name`` is a signature id (``claude.usage_limit``) or a SCREENS.md name (``usage-limit``).
    """
    examples = ERROR_EXAMPLES.get(kind, {})
    if name in examples:
        return name
    return SCREENS_NAMES.get(kind, {}).get(name or "")
