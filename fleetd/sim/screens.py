"""What a simulated agent's pane shows, shaped like the real TUIs.

fleetd's pane-reading code (assistant-block extraction, fatal-signature matching) is tested
against composed samples (``shared/agents/SCREENS.md``); the simulator draws screens with the
same landmarks so end-to-end runs exercise that code for real:

* Claude Code (Linux glyphs): ``❯ prompt``, ``● Tool(...)`` + ``  ⎿  ...``, ``● answer`` with
  2-space continuation, ``✻ Brewed for 12s``, the prompt box between two ``─`` rules; working
  shows a ``✶ Percolating… (Ns · ↓ Nk tokens)`` spinner and ``esc to interrupt``;
* Codex: ``› prompt``, ``• Explored`` / ``  └ ...``, ``• answer``, ``─ Worked for 12s ───``,
  the ``› Ask Codex to do anything`` composer; working shows ``• Working (Ns • esc to interrupt)``;
* OpenCode: the user box ``  ┃  prompt``, 5-space answer, ``     ▣  Build · <model> · 4.2s``,
  the input box and status line; working shows the ``⬝⬝⬝■■■`` progress bar.

Every function is pure (text in, lines out). A new ``frame`` adds work to a working screen (its
progress digest changes); ``elapsed`` only moves timers (the digest does not), so a stalled
agent's screen reads as no progress. ``tests/unit/sim/test_sim_screens.py`` checks that fleetd's
own reader (:mod:`fleetd.screens`) extracts each finished turn's answer and identifies each fatal
signature drawn here.
"""

from __future__ import annotations

import textwrap

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
_RULE = "─" * 88
_WIDTH = 76
_SPINNER = "·✢✶✻✽*"
_VERBS = ("Percolating", "Pondering", "Brewing", "Crunching", "Noodling", "Simmering")
_OC_MODEL = "Claude Sonnet 4.5"
_OC_BAR = "▀" * 88

DEFAULT_SIGNATURE = {"claude": "overloaded", "codex": "usage-limit", "opencode": "credit"}

_CLAUDE_ERRORS = {
    "overloaded": "● API Error: 529 Overloaded. This is a server-side issue, usually temporary —"
    " try again in a moment. If it persists, check https://status.claude.com.",
    "usage-limit": "  ⎿  You've hit your limit · resets 3:30am (UTC)",
    "oauth-expired": '● API Error: 401 {"type":"error","error":{"type":"authentication_error",'
    '"message":"OAuth token has expired. Please obtain a new token or refresh your existing'
    ' token."}} · Please run /login',
    "credit": "  ⎿  Credit balance too low · Add funds: https://platform.claude.com/settings/billing",
}
_CODEX_ERRORS = {
    "usage-limit": "■ You've hit your usage limit. Upgrade to Pro"
    " (https://openai.com/chatgpt/pricing), visit https://chatgpt.com/codex/settings/usage to"
    " purchase more credits or try again at 4:12 PM.",
    "stream-lost": "■ stream disconnected before completion: error sending request for url"
    " (https://chatgpt.com/backend-api/codex/responses)",
    "context-full": "■ Codex ran out of room in the model's context window. Start a new"
    " conversation or clear earlier history before retrying.",
}
_OPENCODE_ERRORS = {
    "credit": "Your credit balance is too low to access the Anthropic API. Please go to Plans &"
    " Billing to upgrade or purchase credits.",
    "bad-key": "Incorrect API key provided: sk-sim. You can find your API key at"
    " https://platform.openai.com/account/api-keys.",
    "context": "prompt is too long: 202744 tokens > 200000 maximum",
}


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
    footer = "  ⏵⏵ bypass permissions on (shift+tab to cycle)"
    return [_RULE, "❯ ", _RULE, footer + (" · esc to interrupt" if working else "")]


def _claude_tools(frame: int) -> Lines:
    tools = [
        ["● Read(README.md)", "  ⎿  Read 42 lines (ctrl+o to expand)", ""],
        ["● Bash(python -m pytest -q)", "  ⎿  12 passed in 0.8s", ""],
    ]
    return [line for block in tools[: max(0, min(frame, len(tools)))] for line in block]


def _claude(state: str, prompt: str, *, frame: int, elapsed: float, text: str) -> Lines:
    top = ["", f"❯ {_head(prompt)}", ""]
    if state == "working":
        glyph = _SPINNER[frame % len(_SPINNER)]
        verb = _VERBS[frame % len(_VERBS)]
        tokens = f"{0.4 + 0.3 * frame:.1f}k"
        status = f"{glyph} {verb}… ({_duration(elapsed)} · ↓ {tokens} tokens)"
        return [*top, *_claude_tools(frame), status, "", *_claude_box(True)]
    if state == "blocked":
        return [
            *top,
            "● I'll run the command that needs approval.",
            "",
            _RULE,
            " Bash command",
            "",
            "   rm -rf build/ && python -m build --wheel",
            "   Remove stale build output and rebuild the wheel",
            "",
            " Do you want to proceed?",
            " ❯ 1. Yes",
            "   2. Yes, and don't ask again for python -m build commands",
            "   3. No, and tell Claude what to do differently (esc)",
            "",
            " Esc to cancel · Tab to amend · ctrl+e to explain",
        ]
    if state == "interrupted":
        return [*top, "  ⎿  Interrupted by user", "", *_claude_box(False)]
    if state == "error":
        body = _wrap(text, "", "  ") if text.startswith("●") else [text]
        return [*top, *_claude_tools(1), *body, "", f"✻ Worked for {_duration(elapsed)}", "",
                *_claude_box(False)]  # fmt: skip
    if state == "done":
        answer = _wrap(text, "● ", "  ")
        return [*top, *_claude_tools(2), *answer, "", f"✻ Brewed for {_duration(elapsed)}", "",
                *_claude_box(False)]  # fmt: skip
    return ["", " ✻ Welcome to Claude Code!", "", *_claude_box(False)]


# -- Codex --------------------------------------------------------------------------------


def _codex_composer(cwd: str | None) -> Lines:
    return ["", "› Ask Codex to do anything", "", f"  gpt-5.5 high · {_where(cwd)}"]


def _codex(
    state: str, prompt: str, *, frame: int, elapsed: float, text: str, cwd: str | None
) -> Lines:
    top = [f"› {_head(prompt)}", "", "", "• I'll look at the relevant files first.", ""]
    explored = ["• Explored", "  └ Read README.md", ""]
    if state == "working":
        ran = ["• Ran python -m pytest -q", "  └ 12 passed in 0.8s", ""] if frame >= 2 else []
        status = f"• Working ({_duration(elapsed)} • esc to interrupt)"
        return [*top, *(explored if frame >= 1 else []), *ran, status, *_codex_composer(cwd)]
    if state == "blocked":
        return [
            *top,
            "• Running git worktree remove --force ../wt/stale",
            "",
            "",
            "  Would you like to run the following command?",
            "",
            "  $ git worktree remove --force ../wt/stale",
            "",
            "› 1. Yes, proceed (y)",
            "  2. Yes, and don't ask again for commands that start with `git worktree` (p)",
            "  3. No, and tell Codex what to do differently (esc)",
            "",
            "  Press enter to confirm or esc to cancel",
        ]
    if state == "interrupted":
        return [*top, "■ Conversation interrupted - tell the model what to do differently.",
                *_codex_composer(cwd)]  # fmt: skip
    if state == "error":
        return [*top, *explored, *_wrap(text, "", ""), "", *_codex_composer(cwd)]
    if state == "done":
        rule = f"─ Worked for {_duration(elapsed)} " + "─" * 60
        return [*top, *explored, *_wrap(text, "• ", "  "), "", rule, "", *_codex_composer(cwd)]
    return [">_ OpenAI Codex (v0.150.0)", "", *_codex_composer(cwd)]


# -- OpenCode -------------------------------------------------------------------------------


def _oc_input(cwd: str | None, *, busy: int | None) -> Lines:
    if busy is None:
        status = f"   {_where(cwd)}:main              12.4K (6%) · $0.04  ctrl+p commands"
        status += "    • OpenCode 1.18.29"
    else:
        filled = busy % 8
        bar = "⬝" * (8 - filled) + "■" * filled
        status = f"   {bar}  esc interrupt                     12.9K (6%) · $0.05  ctrl+p commands"
    return ["", "", "  ┃", "  ┃", f"  ┃  Build · {_OC_MODEL} Anthropic", f"  ╹{_OC_BAR}", status]


def _opencode(
    state: str, prompt: str, *, frame: int, elapsed: float, text: str, cwd: str | None
) -> Lines:
    top = ["", "  ┃", f"  ┃  {_head(prompt)}", "  ┃", "", "     → Read README.md", ""]
    footer = f"     ▣  Build · {_OC_MODEL}"
    if state == "working":
        partial = "     I'll cover the main path first" + "." * (frame % 4)
        return [*top, partial, "", footer, *_oc_input(cwd, busy=frame + 1)]
    if state == "blocked":
        return [
            *top,
            footer,
            "",
            "",
            "  ┃",
            "  ┃  △ Permission required",
            "  ┃    # Remove generated files and rebuild",
            "  ┃",
            "  ┃  $ rm -rf gen && make proto",
            "  ┃",
            "  ┃   Allow once   Allow always   Reject"
            "          ctrl+f fullscreen  ⇆ select  enter confirm",
        ]
    if state == "interrupted":
        return [*top, f"{footer} · interrupted", *_oc_input(cwd, busy=None)]
    if state == "error":
        box = ["  ┃", *_wrap(text, "  ┃  ", "  ┃  "), "  ┃", ""]
        return [*top, *box, footer, *_oc_input(cwd, busy=None)]
    if state == "done":
        answer = _wrap(text, "     ", "     ")
        done_footer = f"{footer} · {elapsed:.1f}s"
        return [*top, *answer, "", done_footer, *_oc_input(cwd, busy=None)]
    return ["", "  OpenCode 1.18.29", *_oc_input(cwd, busy=None)]


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
    if kind == "claude":
        return _claude(state, prompt, frame=frame, elapsed=elapsed, text=text)
    if kind == "codex":
        return _codex(state, prompt, frame=frame, elapsed=elapsed, text=text, cwd=cwd)
    if kind == "opencode":
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


def errored(kind: str, prompt: str, signature: str | None, *, elapsed: float,
            cwd: str | None = None) -> Lines:  # fmt: skip
    """Back at the prompt with a fatal signature from SCREENS.md instead of an answer."""
    table: dict[str, dict[str, str]] = {
        "claude": _CLAUDE_ERRORS, "codex": _CODEX_ERRORS, "opencode": _OPENCODE_ERRORS,
    }  # fmt: skip
    errors = table.get(kind, {"error": "Error: the model provider refused the request."})
    key = signature if signature in errors else DEFAULT_SIGNATURE.get(kind, "error")
    return _render(kind, "error", prompt, elapsed=elapsed, text=errors[key], cwd=cwd)
