"""Compose plausible agent screens from a few facts, for the screen-reading tests.

The screen tests use these to check that reading inverts drawing:
``extract_assistant_block(kind, compose_finished_screen(kind, t))`` gives ``t`` back (for tidy
text), every ``compose_error_screen(kind, id)`` matches exactly the signature ``id``, and
``compose_working_screen(kind, tick)`` has the same progress digest for every tick. Each shape is
drawn once, at a fixed size, with the answer's lines kept as given.

The herdr simulator does not draw with these: its agents show animated screens (progress frames,
timers, the pane's directory, answers wrapped to the pane) from :mod:`fleetd.sim.screens`. Both
take every marker, status cue and error message from :mod:`fleetd.screens.drawing.vocabulary`, so
the two
draw one vocabulary. For ``OTHER`` kinds there is no agent chrome: the screen is plain text and
nothing on it is ever recognised.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from fleetd.screens.drawing.vocabulary import (
    CLAUDE,
    CODEX,
    ERROR_EXAMPLES,
    OPENCODE,
    SPINNER_GLYPHS,
    SPINNER_VERBS,
)
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
_RULE = CLAUDE.rule * _WIDTH
_MARK = CLAUDE.mark_macos
_OC_BOX_BOTTOM = OPENCODE.box_bottom + OPENCODE.box_fill * (_WIDTH - 3)
_OC_INPUT = (OPENCODE.bar, OPENCODE.bar, OPENCODE.input_label, _OC_BOX_BOTTOM)
_OC_STATUS = (
    f"   ~/src/app:main         9.1K (5%) · $0.02  {OPENCODE.commands}    • {OPENCODE.version}"
)
_FIRST_STEP = "I'll read the notes first, then check each link."
_COMMAND = "scripts/check-links.sh docs/release-notes.md"


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


def _claude(body: list[str], *, status: str = CLAUDE.shortcuts) -> str:
    return "\n".join(["", *body, "", _RULE, CLAUDE.prompt_box, _RULE, status])


def _claude_summary(duration: str) -> str:
    return CLAUDE.summary.format(verb="Worked", duration=duration)


def _codex(body: list[str]) -> str:
    footer = ["", "", CODEX.composer, "", CODEX.model.format(cwd="~/src/app")]
    return "\n".join(["", *body, *footer])


def _opencode(body: list[str], *, status: str = _OC_STATUS) -> str:
    return "\n".join(["", *body, "", "", *_OC_INPUT, status])


def _oc_user(prompt: str) -> list[str]:
    box = OPENCODE.box
    return [OPENCODE.bar, *_indent(_wrap(prompt, _WIDTH - 8), box, box), OPENCODE.bar, ""]


def compose_finished_screen(
    kind: AgentKind, answer_text: str, *, prompt: str = DEFAULT_PROMPT
) -> str:
    """A screen whose last turn ran one tool, then answered ``answer_text`` (lines kept as is).

    An empty ``answer_text`` draws a turn that ended without any answer text.
    """
    answer = answer_text.split("\n")
    if kind is AgentKind.CLAUDE:
        body = [f"{CLAUDE.user}{prompt}", "", f"{_MARK}Read(docs/release-notes.md)"]
        body.append(f"{CLAUDE.result}Read 42 lines (ctrl+o to expand)")
        if answer_text:
            body += ["", *_indent(answer, _MARK, CLAUDE.continuation)]
        return _claude([*body, "", _claude_summary("18s")])
    if kind is AgentKind.CODEX:
        body = [f"{CODEX.user}{prompt}", "", "", f"{CODEX.agent}Ran git diff --stat"]
        body.append(f"{CODEX.output}docs/release-notes.md | 4 ++--")
        if answer_text:
            body += ["", *_indent(answer, CODEX.agent, CODEX.continuation)]
        separator = CODEX.separator.format(duration="18s")
        return _codex([*body, "", separator + "─" * (_WIDTH - len(separator))])
    if kind is AgentKind.OPENCODE:
        body = [*_oc_user(prompt), f"{OPENCODE.tool}Read docs/release-notes.md", ""]
        if answer_text:
            body += [*_indent(answer, OPENCODE.indent, OPENCODE.indent), ""]
        return _opencode([*body, OPENCODE.footer_line("18.4s")])
    return answer_text


def compose_idle_screen(kind: AgentKind) -> str:
    """A fresh session waiting for its first prompt: chrome only, no turn yet."""
    if kind is AgentKind.CLAUDE:
        return _claude([CLAUDE.welcome, "", CLAUDE.help])
    if kind is AgentKind.CODEX:
        return _codex([CODEX.banner, "", "  model: gpt-5.5 high"])
    if kind is AgentKind.OPENCODE:
        return _opencode(["", "                 opencode", ""])
    return "$ "


def compose_working_screen(kind: AgentKind, tick: int, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn in progress; only the spinner, timer and token counters depend on ``tick``."""
    if kind is AgentKind.CLAUDE:
        glyph = SPINNER_GLYPHS[tick % len(SPINNER_GLYPHS)]
        verb = SPINNER_VERBS[tick % len(SPINNER_VERBS)]
        body = [f"{CLAUDE.user}{prompt}", "", f"{_MARK}{_FIRST_STEP}", ""]
        body += [f"{_MARK}Bash({_COMMAND})", f"{CLAUDE.result}Running…", ""]
        tokens = f"{tick * 37 / 10:.1f}k"
        body.append(
            CLAUDE.spinner.format(glyph=glyph, verb=verb, duration=f"{tick}s", tokens=tokens)
        )
        return _claude(body, status=CLAUDE.accept_edits + CLAUDE.interrupt)
    if kind is AgentKind.CODEX:
        dot = CODEX.agent if tick % 2 == 0 else CODEX.agent_blink
        body = [f"{CODEX.user}{prompt}", "", "", f"{CODEX.agent}{_FIRST_STEP}", ""]
        body.append(dot + CODEX.working.format(duration=f"{tick}s"))
        return _codex(body)
    if kind is AgentKind.OPENCODE:
        full, empty = OPENCODE.progress
        bar = "".join(full if (i - tick) % 8 < 3 else empty for i in range(8))
        tokens = f"{9 + tick % 7}.{tick % 10}K ({5 + tick % 3}%) · ${tick % 9 / 100:.2f}"
        status = f"   {bar}  {OPENCODE.interrupt}          {tokens}  {OPENCODE.commands}"
        body = [*_oc_user(prompt), f"{OPENCODE.tool}Read docs/release-notes.md", ""]
        body += [f"{OPENCODE.indent}I'll check each link in the notes.", ""]
        return _opencode([*body, OPENCODE.footer_line()], status=status)
    return f"working… ({tick}s)"


def compose_retrying_screen(kind: AgentKind, attempt: int, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn whose provider call is being retried (attempt ``attempt``): working, not fatal."""
    if kind is AgentKind.CLAUDE:
        body = [f"{CLAUDE.user}{prompt}", "", f"{_MARK}{_FIRST_STEP}", ""]
        body.append(f"✻ Spelunking… ({attempt * 7}s · esc to interrupt)")
        body.append(
            f'{CLAUDE.result}API Error (529 {{"type":"error","error":{{"type":"overloaded_error",'
            '"message":"Overloaded"}})'
        )
        body.append(CLAUDE.retrying.format(seconds=attempt * 2, attempt=attempt))
        return _claude(body, status=CLAUDE.shortcuts + CLAUDE.interrupt)
    if kind is AgentKind.CODEX:
        body = [f"{CODEX.user}{prompt}", "", "", f"{CODEX.agent}{_FIRST_STEP}", ""]
        reconnecting = CODEX.reconnecting.format(attempt=attempt, duration=f"{attempt * 9}s")
        body.append(CODEX.agent + reconnecting)
        body.append(
            f"{CODEX.output}Stream disconnected before completion: error sending request for url"
        )
        body.append("    (https://chatgpt.com/backend-api/codex/responses)")
        return _codex(body)
    if kind is AgentKind.OPENCODE:
        retrying = OPENCODE.retrying.format(wait=f"{60 - attempt}m 12s", attempt=attempt)
        body = [*_oc_user(prompt), f"{OPENCODE.tool}Read docs/release-notes.md", ""]
        return _opencode([*body, OPENCODE.footer_line()], status=f"   Too Many Requests {retrying}")
    return f"retrying (attempt {attempt})"


def compose_blocked_screen(kind: AgentKind, *, prompt: str = DEFAULT_PROMPT) -> str:
    """A turn waiting on the agent's own approval prompt (herdr: blocked; not an error)."""
    step = "I'll run the link checker over the notes."
    if kind is AgentKind.CLAUDE:
        yes, always, no = CLAUDE.approval_options
        scope = "scripts/check-links.sh commands in ~/src"
        lines = ["", f"{CLAUDE.user}{prompt}", "", f"{_MARK}{step}", "", _RULE]
        lines += [
            CLAUDE.approval_tool,
            "",
            f"   {_COMMAND}",
            "   Check every link in the notes",
            "",
        ]
        lines += [CLAUDE.approval_question, yes, always.format(scope=scope), no, ""]
        return "\n".join([*lines, CLAUDE.approval_footer])
    if kind is AgentKind.CODEX:
        yes, always, no = CODEX.approval_options
        lines = ["", f"{CODEX.user}{prompt}", "", "", f"{CODEX.agent}{step}", ""]
        lines += [CODEX.approval_question, "", f"  $ {_COMMAND}", ""]
        lines += [yes, always.format(scope="these commands"), no, ""]
        return "\n".join([*lines, CODEX.approval_footer])
    if kind is AgentKind.OPENCODE:
        bar, box = OPENCODE.bar, OPENCODE.box
        lines = ["", *_oc_user(prompt), f"{OPENCODE.indent}$ {_COMMAND}", ""]
        lines += [OPENCODE.footer_line(), "", ""]
        lines += [bar, f"{box}{OPENCODE.permission}", f"{box}  # Check every link in the notes"]
        lines += [bar, f"{box}$ {_COMMAND}", bar]
        lines.append(f"{box} {OPENCODE.permission_buttons}     {OPENCODE.permission_hints}")
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
            drawn = _indent(_wrap(message, _WIDTH - 4), _MARK, CLAUDE.continuation)
        else:
            result, rest = CLAUDE.result, CLAUDE.result_continuation
            drawn = _indent(_wrap(message, _WIDTH - 7), result, rest)
        head = [f"{CLAUDE.user}{prompt}", "", f"{_MARK}{_FIRST_STEP}", ""]
        return _claude([*head, *drawn, "", _claude_summary("4s")])
    if kind is AgentKind.CODEX:
        drawn = _indent(_wrap(message, _WIDTH - 2), CODEX.error, "")
        return _codex([f"{CODEX.user}{prompt}", "", "", f"{CODEX.agent}{_FIRST_STEP}", "", *drawn])
    drawn = _indent(_wrap(message, _WIDTH - 8), OPENCODE.box, OPENCODE.box)
    body = [*_oc_user(prompt), f"{OPENCODE.tool}Read docs/release-notes.md", ""]
    body += [OPENCODE.bar, *drawn, OPENCODE.bar]
    return _opencode([*body, "", OPENCODE.footer_line()])
