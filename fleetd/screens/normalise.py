"""Screen text normalisation and progress digests.

STALL_SUSPECTED compares two digests of a pane taken minutes apart: unchanged means nothing
visible progressed. Agent TUIs redraw things that move while nothing progresses — a spinner glyph
and verb, an elapsed-time counter, token and cost counters, a progress-bar animation, retry
countdowns and attempt counters — so :func:`normalise` drops or flattens exactly those, and keeps
every other line. A new output line therefore changes the digest; a ticking spinner does not.

The same cleaning (ANSI escapes, carriage returns, trailing blanks, blank runs) without the noise
rules is :func:`tidy`, used for assistant text, where a line that merely looks like a spinner must
survive.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from fleetd.screens.claude import SPINNER as _CLAUDE_SPINNER

__all__ = ["clean_lines", "digest", "normalise", "tidy"]

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (title, progress, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"  # two-byte escapes and charset selection
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 (but tab, newline), DEL, C1

# Lines that only say "still working".
_CLAUDE_TIP = re.compile(r"^\s+⎿\s+Tip:")
_CODEX_WORKING = re.compile(r"^[•◦]\s+Working\s+\(.*\)\s*$")
_CODEX_RECONNECTING = re.compile(r"^(?:\S\s+)?[•◦]?\s*Reconnecting\.\.\.\s.*$")

# Fragments that tick inside otherwise meaningful lines.
_FRAGMENTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Retrying in \d+(?:\.\d+)?\s?(?:seconds?|s)\b…?"), "Retrying in #"),
    (re.compile(r"attempt #?\d+(?:/\d+)?"), "attempt #"),
    (re.compile(r"\[retrying in [^\]]*\]"), "[retrying]"),
    (re.compile(r"\((?:\d+h\s?)?(?:\d+m\s?)?\d+s\b[^)]*\)"), "(#)"),
    (re.compile(r"[↑↓]\s?\d+(?:[.,]\d+)?[kKmM]?\s?tokens"), "tokens"),
    (re.compile(r"[⬝■]{4,}"), "■■■■"),
    (re.compile(r"\d+% context left"), "#% context left"),
    (re.compile(r"Context low \(\d+% remaining\)"), "Context low (#% remaining)"),
    (re.compile(r"^(\s*)[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏◐◓◑◒]"), r"\1⠿"),
)
# OpenCode's status bar counts tokens and cost while a turn streams.
_OPENCODE_STATUS = re.compile(r"ctrl\+p commands")
_OPENCODE_COUNTERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d+(?:[.,]\d+)?[KM]?\s\(\d+%\)"), "# (#%)"),
    (re.compile(r"\$\d+(?:\.\d+)?"), "$#"),
)


def clean_lines(text: str) -> list[str]:
    """Split pane text into display lines: no escapes, no control characters, no trailing blanks."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    while True:  # dropping a control character can join the pieces of an escape: go again
        stripped = _CONTROL.sub("", _ANSI.sub("", text))
        if stripped == text:
            break
        text = stripped
    text = text.replace("\u00a0", " ")
    return [line.expandtabs(8).rstrip() for line in text.split("\n")]


def tidy(lines: Iterable[str]) -> str:
    """Join cleaned lines, collapsing blank runs to one blank line and trimming blank ends."""
    out: list[str] = []
    for raw in lines:
        line = raw.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _denoise(lines: Iterable[str]) -> list[str]:
    out: list[str] = []
    after_spinner = False
    for line in lines:
        if _CLAUDE_SPINNER.match(line) or _CODEX_WORKING.match(line):
            after_spinner = True
            continue
        if after_spinner and _CLAUDE_TIP.match(line):
            continue
        after_spinner = False
        if _CODEX_RECONNECTING.match(line):
            out.append("Reconnecting...")
            continue
        flat = line
        for pattern, replacement in _FRAGMENTS:
            flat = pattern.sub(replacement, flat)
        if _OPENCODE_STATUS.search(flat):
            for pattern, replacement in _OPENCODE_COUNTERS:
                flat = pattern.sub(replacement, flat)
        out.append(flat)
    return out


def normalise(text: str) -> str:
    """Pane text with escapes, trailing blanks, blank runs and ticking noise removed."""
    return tidy(_denoise(clean_lines(text)))


def digest(text: str) -> str:
    """SHA-256 hex of :func:`normalise` (``text``): equal digests mean no visible progress."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()
