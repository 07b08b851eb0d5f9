"""What a simulated agent's pane shows, shaped like the real TUIs.

The simulator draws its own screens — animated: a turn's progress frames, ticking timers, the
pane's directory, answers wrapped to the pane — but every marker, status cue and fatal message
comes from :mod:`fleetd.screens.drawing.vocabulary`, the vocabulary the screen tests' composed
screens
(:mod:`fleetd.screens.drawing.compose`) draw too. So end-to-end runs exercise fleetd's pane-reading
code
(assistant-block extraction, fatal-signature matching, progress digests) on the same words:

* Claude Code (Linux glyphs): ``❯ prompt``, ``● Tool(...)`` + ``  ⎿  ...``, ``● answer`` with
  2-space continuation, ``✻ Brewed for 12s``, the prompt box between two ``─`` rules; working
  shows a ``✶ Percolating… (Ns · ↓ Nk tokens)`` spinner and ``esc to interrupt``;
* Codex: ``› prompt``, ``• Explored`` / ``  └ ...``, ``• answer``, ``─ Worked for 12s ───``,
  the ``› Ask Codex to do anything`` composer; working shows ``• Working (Ns • esc to interrupt)``;
* OpenCode: the user box ``  ┃  prompt``, 5-space answer, ``     ▣  Build · <model> · 4.2s``,
  the input box and status line; working shows the ``⬝⬝⬝■■■`` progress bar.

Every function is pure (text in, lines out). A new ``frame`` adds work to a working screen (its
progress digest changes); ``elapsed`` only moves timers (the digest does not), so a stalled
agent's screen reads as no progress. :func:`errored` draws any fatal signature of the kind, named
by its id (``claude.usage_limit``) or its SCREENS.md name (``usage-limit``).
``tests/unit/sim/test_sim_screens.py`` checks that fleetd's own reader (:mod:`fleetd.screens`)
extracts each finished turn's answer and identifies each fatal signature drawn here.
"""

from __future__ import annotations

import textwrap

from fleetd.screens import AgentKind, parse_agent_kind
from fleetd.screens.drawing.vocabulary import (
    CLAUDE,
    CODEX,
    ERROR_EXAMPLES,
    OPENCODE,
    SPINNER_GLYPHS,
    SPINNER_VERBS,
    fatal_signature_id,
)

__all__ = [
    "DEFAULT_SIGNATURE",
    "blocked",
    "done",
    "errored",
    "idle",
    "interrupted",
    "launching",
    "shell",
    "working",
]

Lines = list[str]
_RULE = CLAUDE.rule * 88
_WIDTH = 76
_MARK = CLAUDE.mark_linux
_OC_BAR = OPENCODE.box_bottom + OPENCODE.box_fill * 88

DEFAULT_SIGNATURE = {
    AgentKind.CLAUDE: "claude.api_error_529",
    AgentKind.CODEX: "codex.usage_limit",
    AgentKind.OPENCODE: "opencode.credit_low",
}
"""The fatal signature :func:`errored` draws when a scenario names none the kind has."""

_OTHER_ERROR = "Error: the model provider refused the request."


def _duration(seconds: float) -> str:
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m {secs}s"


def _wrap(text: str, first: str, rest: str, width: int = _WIDTH) -> Lines:
    """Wrap paragraphs with a first-line marker and a continuation indent."""
    out: Lines = []
    marker = first
    for paragraph in text.split("\n") or [""]:
        if not paragraph.strip():
            out.append("")
            continue
        wrapped = textwrap.wrap(paragraph, width=width - len(rest)) or [""]
        for piece in wrapped:
            out.append(f"{marker}{piece}")
            marker = rest
    return out


def _head(prompt: str) -> str:
    first = prompt.strip().split("\n", 1)[0]
    return first if len(first) <= _WIDTH else first[: _WIDTH - 1] + "…"


def _where(cwd: str | None) -> str:
    return cwd or "~"


# -- shell --------------------------------------------------------------------------------


def shell(cwd: str | None, history: list[str]) -> Lines:
    """A bash prompt after ``history`` (commands and their output)."""
    return [*history, f"sim@herdr:{_where(cwd)}$ "]


def launching(kind: str, argv: list[str], cwd: str | None) -> Lines:
    """The shell after herdr typed the agent's command line."""
    return [f"sim@herdr:{_where(cwd)}$ {' '.join(argv)}", f"Starting {kind}…"]


# -- Claude Code ----------------------------------------------------------------------------


def _claude_box(working: bool) -> Lines:
    status = CLAUDE.bypass + (CLAUDE.interrupt if working else "")
    return [_RULE, CLAUDE.prompt_box, _RULE, status]


def _claude_tools(frame: int) -> Lines:
    tools = [
        [f"{_MARK}Read(README.md)", f"{CLAUDE.result}Read 42 lines (ctrl+o to expand)", ""],
        [f"{_MARK}Bash(python -m pytest -q)", f"{CLAUDE.result}12 passed in 0.8s", ""],
    ]
    return [line for block in tools[: max(0, min(frame, len(tools)))] for line in block]


def _claude_error(style: str, message: str) -> Lines:
    if style == "bullet":
        return _wrap(message, _MARK, CLAUDE.continuation)
    return _wrap(message, CLAUDE.result, CLAUDE.result_continuation)


def _claude(state: str, prompt: str, *, frame: int, elapsed: float, text: str) -> Lines:
    top = ["", f"{CLAUDE.user}{_head(prompt)}", ""]
    if state == "working":
        status = CLAUDE.spinner.format(
            glyph=SPINNER_GLYPHS[frame % len(SPINNER_GLYPHS)],
            verb=SPINNER_VERBS[frame % len(SPINNER_VERBS)],
            duration=_duration(elapsed),
            tokens=f"{0.4 + 0.3 * frame:.1f}k",
        )
        return [*top, *_claude_tools(frame), status, "", *_claude_box(True)]
    if state == "blocked":
        yes, always, no = CLAUDE.approval_options
        return [
            *top,
            f"{_MARK}I'll run the command that needs approval.",
            "",
            _RULE,
            CLAUDE.approval_tool,
            "",
            "   rm -rf build/ && python -m build --wheel",
            "   Remove stale build output and rebuild the wheel",
            "",
            CLAUDE.approval_question,
            yes,
            always.format(scope="python -m build commands"),
            no,
            "",
            CLAUDE.approval_footer,
        ]
    if state == "interrupted":
        return [*top, CLAUDE.result + CLAUDE.interrupted, "", *_claude_box(False)]
    summary = CLAUDE.summary.format(verb="Worked", duration=_duration(elapsed))
    if state == "error":
        return [*top, *_claude_tools(1), *text.split("\n"), "", summary, "", *_claude_box(False)]
    if state == "done":
        answer = _wrap(text, _MARK, CLAUDE.continuation)
        summary = CLAUDE.summary.format(verb="Brewed", duration=_duration(elapsed))
        return [*top, *_claude_tools(2), *answer, "", summary, "", *_claude_box(False)]
    return ["", f" {CLAUDE.welcome}", "", *_claude_box(False)]


# -- Codex --------------------------------------------------------------------------------


def _codex_composer(cwd: str | None) -> Lines:
    return ["", CODEX.composer, "", CODEX.model.format(cwd=_where(cwd))]


def _codex(
    state: str, prompt: str, *, frame: int, elapsed: float, text: str, cwd: str | None
) -> Lines:
    first_step = f"{CODEX.agent}I'll look at the relevant files first."
    top = [f"{CODEX.user}{_head(prompt)}", "", "", first_step, ""]
    explored = [f"{CODEX.agent}Explored", f"{CODEX.output}Read README.md", ""]
    if state == "working":
        ran = [f"{CODEX.agent}Ran python -m pytest -q", f"{CODEX.output}12 passed in 0.8s", ""]
        status = CODEX.agent + CODEX.working.format(duration=_duration(elapsed))
        return [
            *top,
            *(explored if frame >= 1 else []),
            *(ran if frame >= 2 else []),
            status,
            *_codex_composer(cwd),
        ]
    if state == "blocked":
        yes, always, no = CODEX.approval_options
        return [
            *top,
            f"{CODEX.agent}Running git worktree remove --force ../wt/stale",
            "",
            "",
            CODEX.approval_question,
            "",
            "  $ git worktree remove --force ../wt/stale",
            "",
            yes,
            always.format(scope="commands that start with `git worktree`"),
            no,
            "",
            CODEX.approval_footer,
        ]
    if state == "interrupted":
        return [*top, CODEX.interrupted, *_codex_composer(cwd)]
    if state == "error":
        return [*top, *explored, *text.split("\n"), "", *_codex_composer(cwd)]
    if state == "done":
        rule = CODEX.separator.format(duration=_duration(elapsed)) + "─" * 60
        answer = _wrap(text, CODEX.agent, CODEX.continuation)
        return [*top, *explored, *answer, "", rule, "", *_codex_composer(cwd)]
    return [CODEX.banner, "", *_codex_composer(cwd)]


# -- OpenCode -------------------------------------------------------------------------------


def _oc_input(cwd: str | None, *, busy: int | None) -> Lines:
    if busy is None:
        status = f"   {_where(cwd)}:main              12.4K (6%) · $0.04  {OPENCODE.commands}"
        status += f"    • {OPENCODE.version}"
    else:
        full, empty = OPENCODE.progress
        filled = busy % 8
        bar = empty * (8 - filled) + full * filled
        status = f"   {bar}  {OPENCODE.interrupt}                     12.9K (6%) · $0.05"
        status += f"  {OPENCODE.commands}"
    return ["", "", OPENCODE.bar, OPENCODE.bar, OPENCODE.input_label, _OC_BAR, status]


def _opencode(
    state: str, prompt: str, *, frame: int, elapsed: float, text: str, cwd: str | None
) -> Lines:
    bar, box = OPENCODE.bar, OPENCODE.box
    top = ["", bar, f"{box}{_head(prompt)}", bar, "", f"{OPENCODE.tool}Read README.md", ""]
    footer = OPENCODE.footer_line()
    if state == "working":
        partial = f"{OPENCODE.indent}I'll cover the main path first" + "." * (frame % 4)
        return [*top, partial, "", footer, *_oc_input(cwd, busy=frame + 1)]
    if state == "blocked":
        return [
            *top,
            footer,
            "",
            "",
            bar,
            f"{box}{OPENCODE.permission}",
            f"{box}  # Remove generated files and rebuild",
            bar,
            f"{box}$ rm -rf gen && make proto",
            bar,
            f"{box} {OPENCODE.permission_buttons}"
            f"          ctrl+f fullscreen  {OPENCODE.permission_hints}",
        ]
    if state == "interrupted":
        return [*top, footer + OPENCODE.interrupted, *_oc_input(cwd, busy=None)]
    if state == "error":
        error_box = [bar, *text.split("\n"), bar, ""]
        return [*top, *error_box, footer, *_oc_input(cwd, busy=None)]
    if state == "done":
        answer = _wrap(text, OPENCODE.indent, OPENCODE.indent)
        done_footer = OPENCODE.footer_line(f"{elapsed:.1f}s")
        return [*top, *answer, "", done_footer, *_oc_input(cwd, busy=None)]
    return ["", f"  {OPENCODE.version}", *_oc_input(cwd, busy=None)]


# -- any other kind ---------------------------------------------------------------------------


def _generic(state: str, prompt: str, *, frame: int, elapsed: float, text: str, kind: str) -> Lines:
    top = [f"> {_head(prompt)}", ""]
    if state == "working":
        return [*top, f"{kind} is working{'.' * (frame % 4)} ({_duration(elapsed)})"]
    if state == "blocked":
        return [*top, "Allow this action? [y/n]"]
    if state in ("done", "error"):
        return [*top, *_wrap(text, "", ""), "", "> "]
    if state == "interrupted":
        return [*top, "Interrupted.", "", "> "]
    return [f"{kind} ready", "", "> "]


def _render(kind: str, state: str, prompt: str, *, frame: int = 0, elapsed: float = 0.0,
            text: str = "", cwd: str | None = None) -> Lines:  # fmt: skip
    agent_kind = parse_agent_kind(kind)
    if agent_kind is AgentKind.CLAUDE:
        return _claude(state, prompt, frame=frame, elapsed=elapsed, text=text)
    if agent_kind is AgentKind.CODEX:
        return _codex(state, prompt, frame=frame, elapsed=elapsed, text=text, cwd=cwd)
    if agent_kind is AgentKind.OPENCODE:
        return _opencode(state, prompt, frame=frame, elapsed=elapsed, text=text, cwd=cwd)
    return _generic(state, prompt, frame=frame, elapsed=elapsed, text=text, kind=kind)


def idle(kind: str, cwd: str | None = None) -> Lines:
    """A freshly started agent waiting at an empty prompt."""
    return _render(kind, "idle", "", cwd=cwd)


def working(kind: str, prompt: str, *, frame: int, elapsed: float, cwd: str | None = None) -> Lines:
    """Mid-turn; changes with ``frame`` and ``elapsed``."""
    return _render(kind, "working", prompt, frame=frame, elapsed=elapsed, cwd=cwd)


def done(kind: str, prompt: str, answer: str, *, elapsed: float, cwd: str | None = None) -> Lines:
    """Back at the prompt with the final assistant block for this turn."""
    return _render(kind, "done", prompt, elapsed=elapsed, text=answer, cwd=cwd)


def blocked(kind: str, prompt: str, cwd: str | None = None) -> Lines:
    """Stopped at an approval prompt (matches herdr's blocked rules for the kind)."""
    return _render(kind, "blocked", prompt, cwd=cwd)


def interrupted(kind: str, prompt: str, cwd: str | None = None) -> Lines:
    return _render(kind, "interrupted", prompt, cwd=cwd)


def _error_cell(kind: AgentKind, style: str, message: str) -> Lines:
    """The agent's own message ending the turn, marked as the kind marks an error."""
    if kind is AgentKind.CLAUDE:
        return _claude_error(style, message)
    if kind is AgentKind.CODEX:
        return _wrap(message, CODEX.error, "")
    return _wrap(message, OPENCODE.box, OPENCODE.box)


def errored(kind: str, prompt: str, signature: str | None, *, elapsed: float,
            cwd: str | None = None) -> Lines:  # fmt: skip
    """Back at the prompt with a fatal signature instead of an answer.

    ``signature`` is a signature id or a SCREENS.md name of the kind; one the kind does not have
    draws :data:`DEFAULT_SIGNATURE`. A crash leaves the TUI: the pane shows the crash output.
    """
    agent_kind = parse_agent_kind(kind)
    if agent_kind is AgentKind.OTHER:
        return _render(kind, "error", prompt, elapsed=elapsed, text=_OTHER_ERROR, cwd=cwd)
    chosen = fatal_signature_id(agent_kind, signature) or DEFAULT_SIGNATURE[agent_kind]
    style, message = ERROR_EXAMPLES[agent_kind][chosen]
    if style == "crash":
        return message.split("\n")
    cell = "\n".join(_error_cell(agent_kind, style, message))
    return _render(kind, "error", prompt, elapsed=elapsed, text=cell, cwd=cwd)
