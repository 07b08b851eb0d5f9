"""Compose plausible agent screens from a few facts.

The herdr simulator draws these for its simulated agents, and the screen tests use them to check
that reading inverts drawing: ``extract_assistant_block(kind, compose_finished_screen(kind, t))``
gives ``t`` back (for tidy text), every ``compose_error_screen(kind, id)`` matches exactly the
signature ``id``, and ``compose_working_screen(kind, tick)`` has the same progress digest for every
tick. The shapes follow ``shared/agents/SCREENS.md``; the words are ours. For ``OTHER`` kinds there
is no agent chrome: the screen is plain text and nothing on it is ever recognised.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from fleetd.screens.examples import ERROR_EXAMPLES
from fleetd.screens.kinds import AgentKind

__all__ = [
    "DEFAULT_PROMPT",
    "compose_blocked_screen",
    "compose_error_screen",
    "compose_finished_screen",
    "compose_idle_screen",
    "compose_retrying_screen",
    "compose_working_screen",
    "error_screen_ids",
]

DEFAULT_PROMPT = "Tidy the release notes and check the links."
_WIDTH = 80
_RULE = "─" * _WIDTH
_OC_MODEL = "Build · Claude Sonnet 4.5"
_OC_INPUT = ("  ┃", "  ┃", f"  ┃  {_OC_MODEL} Anthropic", "  ╹" + "▀" * (_WIDTH - 3))
_OC_STATUS = "   ~/src/app:main         9.1K (5%) · $0.02  ctrl+p commands    • OpenCode 1.18.29"
_SPINNER_GLYPHS = ("·", "✢", "*", "✶", "✻", "✽")
_SPINNER_VERBS = ("Pondering", "Percolating", "Noodling", "Simmering")
_FIRST_STEP = "I'll read the notes first, then check each link."


def error_screen_ids(kind: AgentKind) -> tuple[str, ...]:
    """The signature ids :func:`compose_error_screen` can draw for ``kind`` (none for OTHER)."""
    return tuple(ERROR_EXAMPLES.get(kind, {}))


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, break_on_hyphens=False) or [""]


def _indent(lines: Iterable[str], first: str, rest: str) -> list[str]:
    out: list[str] = []
    for index, line in enumerate(lines):
        prefix = first if index == 0 else rest
        out.append(prefix + line if line else "")
    return out


def _claude(body: list[str], *, status: str = "  ? for shortcuts") -> str:
    return "\n".join(["", *body, "", _RULE, "❯ ", _RULE, status])


def _codex(body: list[str]) -> str:
    footer = ["", "", "› Ask Codex to do anything", "", "  gpt-5.5 high · ~/src/app"]
    return "\n".join(["", *body, *footer])


def _opencode(body: list[str], *, status: str = _OC_STATUS) -> str:
    return "\n".join(["", *body, "", "", *_OC_INPUT, status])


def _oc_user(prompt: str) -> list[str]:
    return ["  ┃", *_indent(_wrap(prompt, _WIDTH - 8), "  ┃  ", "  ┃  "), "  ┃", ""]


def compose_finished_screen(
    kind: AgentKind, answer_text: str, *, prompt: str = DEFAULT_PROMPT
) -> str:
    """A screen whose last turn ran one tool, then answered ``answer_text`` (lines kept as is).

    An empty ``answer_text`` draws a turn that ended without any answer text.
    """
    answer = answer_text.split("\n")
    if kind is AgentKind.CLAUDE:
        body = [f"❯ {prompt}", "", "⏺ Read(docs/release-notes.md)"]
        body.append("  ⎿  Read 42 lines (ctrl+o to expand)")
        if answer_text:
            body += ["", *_indent(answer, "⏺ ", "  ")]
        return _claude([*body, "", "✻ Worked for 18s"])
    if kind is AgentKind.CODEX:
        body = [f"› {prompt}", "", "", "• Ran git diff --stat"]
        body.append("  └ docs/release-notes.md | 4 ++--")
        if answer_text:
            body += ["", *_indent(answer, "• ", "  ")]
        return _codex([*body, "", "─ Worked for 18s " + "─" * (_WIDTH - 17)])
    if kind is AgentKind.OPENCODE:
        body = [*_oc_user(prompt), "     → Read docs/release-notes.md", ""]
        if answer_text:
            body += [*_indent(answer, "     ", "     "), ""]
        return _opencode([*body, f"     ▣  {_OC_MODEL} · 18.4s"])
    return answer_text


def compose_idle_screen(kind: AgentKind) -> str:
    """A fresh session waiting for its first prompt: chrome only, no turn yet."""
    if kind is AgentKind.CLAUDE:
        return _claude(["✻ Welcome to Claude Code!", "", "  /help for help"])
    if kind is AgentKind.CODEX:
        return _codex([">_ OpenAI Codex (v0.150.0)", "", "  model: gpt-5.5 high"])
    if kind is AgentKind.OPENCODE:
        return _opencode(["", "                 opencode", ""])
    return "$ "


def compose_working_screen(kind: AgentKind, tick: int, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn in progress; only the spinner, timer and token counters depend on ``tick``."""
    glyph = _SPINNER_GLYPHS[tick % len(_SPINNER_GLYPHS)]
    if kind is AgentKind.CLAUDE:
        verb = _SPINNER_VERBS[tick % len(_SPINNER_VERBS)]
        body = [f"❯ {prompt}", "", f"⏺ {_FIRST_STEP}", ""]
        body += ["⏺ Bash(scripts/check-links.sh docs/release-notes.md)", "  ⎿  Running…", ""]
        body.append(f"{glyph} {verb}… ({tick}s · ↓ {tick * 37 / 10:.1f}k tokens)")
        return _claude(body, status="  ⏵⏵ accept edits on (shift+tab to cycle) · esc to interrupt")
    if kind is AgentKind.CODEX:
        dot = "•" if tick % 2 == 0 else "◦"
        body = [f"› {prompt}", "", "", f"• {_FIRST_STEP}", ""]
        body.append(f"{dot} Working ({tick}s • esc to interrupt)")
        return _codex(body)
    if kind is AgentKind.OPENCODE:
        bar = "".join("■" if (i - tick) % 8 < 3 else "⬝" for i in range(8))
        tokens = f"{9 + tick % 7}.{tick % 10}K ({5 + tick % 3}%) · ${tick % 9 / 100:.2f}"
        status = f"   {bar}  esc interrupt          {tokens}  ctrl+p commands"
        body = [*_oc_user(prompt), "     → Read docs/release-notes.md", ""]
        body += ["     I'll check each link in the notes.", "", f"     ▣  {_OC_MODEL}"]
        return _opencode(body, status=status)
    return f"working… ({tick}s)"


def compose_retrying_screen(kind: AgentKind, attempt: int, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn whose provider call is being retried (attempt ``attempt``): working, not fatal."""
    if kind is AgentKind.CLAUDE:
        body = [f"❯ {prompt}", "", f"⏺ {_FIRST_STEP}", ""]
        body.append(f"✻ Spelunking… ({attempt * 7}s · esc to interrupt)")
        body.append(
            '  ⎿  API Error (529 {"type":"error","error":{"type":"overloaded_error",'
            '"message":"Overloaded"}})'
        )
        body.append(f"     · Retrying in {attempt * 2} seconds… (attempt {attempt}/10)")
        return _claude(body, status="  ? for shortcuts · esc to interrupt")
    if kind is AgentKind.CODEX:
        body = [f"› {prompt}", "", "", f"• {_FIRST_STEP}", ""]
        body.append(f"• Reconnecting... {attempt}/5 ({attempt * 9}s • esc to interrupt)")
        body.append("  └ Stream disconnected before completion: error sending request for url")
        body.append("    (https://chatgpt.com/backend-api/codex/responses)")
        return _codex(body)
    if kind is AgentKind.OPENCODE:
        status = f"   Too Many Requests [retrying in {60 - attempt}m 12s attempt #{attempt}]"
        body = [*_oc_user(prompt), "     → Read docs/release-notes.md", "", f"     ▣  {_OC_MODEL}"]
        return _opencode(body, status=status)
    return f"retrying (attempt {attempt})"


def compose_blocked_screen(kind: AgentKind, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn waiting on the agent's own approval prompt (herdr: blocked; not an error)."""
    command = "scripts/check-links.sh docs/release-notes.md"
    if kind is AgentKind.CLAUDE:
        lines = ["", f"❯ {prompt}", "", "⏺ I'll run the link checker over the notes.", "", _RULE]
        lines += [" Bash command", "", f"   {command}", "   Check every link in the notes", ""]
        lines += [" Do you want to proceed?", " ❯ 1. Yes"]
        lines.append("   2. Yes, and don't ask again for scripts/check-links.sh commands in ~/src")
        lines += ["   3. No, and tell Claude what to do differently (esc)", ""]
        lines.append(" Esc to cancel · Tab to amend · ctrl+e to explain")
        return "\n".join(lines)
    if kind is AgentKind.CODEX:
        lines = ["", f"› {prompt}", "", "", "• I'll run the link checker over the notes.", ""]
        lines += ["  Would you like to run the following command?", "", f"  $ {command}", ""]
        lines += ["› 1. Yes, proceed (y)", "  2. Yes, and don't ask again for these commands (p)"]
        lines += ["  3. No, and tell Codex what to do differently (esc)", ""]
        lines.append("  Press enter to confirm or esc to cancel")
        return "\n".join(lines)
    if kind is AgentKind.OPENCODE:
        lines = ["", *_oc_user(prompt), f"     $ {command}", "", f"     ▣  {_OC_MODEL}", "", ""]
        lines += ["  ┃", "  ┃  △ Permission required", "  ┃    # Check every link in the notes"]
        lines += ["  ┃", f"  ┃  $ {command}", "  ┃"]
        lines.append("  ┃   Allow once   Allow always   Reject     ⇆ select  enter confirm")
        return "\n".join(lines)
    return "Allow this action? [y/n] "


def compose_error_screen(
    kind: AgentKind, signature_id: str, *, prompt: str = DEFAULT_PROMPT
) -> str:
    """A screen whose current turn ends in the fatal signature ``signature_id`` of ``kind``.

    Raises ``KeyError`` for an id that :func:`error_screen_ids` does not list for ``kind``.
    """
    style, message = ERROR_EXAMPLES.get(kind, {})[signature_id]
    if style == "crash":
        return message
    if kind is AgentKind.CLAUDE:
        if style == "bullet":
            drawn = _indent(_wrap(message, _WIDTH - 4), "⏺ ", "  ")
        else:
            drawn = _indent(_wrap(message, _WIDTH - 7), "  ⎿  ", "     ")
        head = [f"❯ {prompt}", "", f"⏺ {_FIRST_STEP}", ""]
        return _claude([*head, *drawn, "", "✻ Worked for 4s"])
    if kind is AgentKind.CODEX:
        drawn = _indent(_wrap(message, _WIDTH - 2), "■ ", "")
        return _codex([f"› {prompt}", "", "", f"• {_FIRST_STEP}", "", *drawn])
    drawn = _indent(_wrap(message, _WIDTH - 8), "  ┃  ", "  ┃  ")
    body = [*_oc_user(prompt), "     → Read docs/release-notes.md", "", "  ┃", *drawn, "  ┃"]
    return _opencode([*body, "", f"     ▣  {_OC_MODEL}"])
