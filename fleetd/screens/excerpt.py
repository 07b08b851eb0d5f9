"""A pane excerpt a lead may read in its health record (``health.includePaneExcerpt``, M4 §11).

What goes out is the tail of one pane read, cleaned like every other screen text (no escapes, no
control characters, no blank runs), with secrets taken out *before* it is clipped, so a secret cut
in half by the clip cannot leave its second half behind:

* every value in ``known`` (the tokens, keys and URLs the running config names) of at least
  :data:`KNOWN_MIN_CHARS` characters, wherever it appears;
* every URL (``scheme://...``): webhook and chat URLs carry their token in the path;
* the value after a name that says what it is and ``=`` or ``:`` — ``FLEETD_TOKEN=``,
  ``password:``, ``api_key=``, ``Authorization:`` — and after ``Bearer`` or ``Basic``;
* the shapes of well-known credentials (``whsec_``, ``sk-``, ``ghp_``, ``xoxb-``, ``AKIA``, JWTs,
  PEM private keys) and any long opaque run mixing upper case, lower case and digits (a random
  token; a commit hash or a word never mixes all three).

Each becomes :data:`REDACTED`. Then the last :data:`PANE_EXCERPT_CHARS` characters are kept, cut
at a line start when one is near. The excerpt is for the member's own lead only: the human leg,
the journal and every other outbound path never receive it (M4 §10.5, invariant 5). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fleetd.screens.normalise import clean_lines, tidy

__all__ = [
    "KNOWN_MIN_CHARS",
    "PANE_EXCERPT_CHARS",
    "REDACTED",
    "PaneExcerpt",
    "pane_excerpt",
    "redact",
]

PANE_EXCERPT_CHARS = 1000
"""The most characters of a pane an excerpt keeps (its tail). Compiled, not configured."""

KNOWN_MIN_CHARS = 6
"""A known secret shorter than this is not searched for (it would blank ordinary words)."""

REDACTED = "[redacted]"
"""What stands where a secret was."""

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{1,15}://[^\s\"'<>`]+")
_NAMED_VALUE = re.compile(
    r"(?i)\b((?:[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passwd|api[_-]?key|apikey|"
    r"access[_-]?key|private[_-]?key|credentials?)[A-Za-z0-9_.-]*|authorization|auth)\b)"
    r"(\s*[=:]\s*)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;]+)"
)
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})")
_SHAPES = re.compile(
    r"whsec_[A-Za-z0-9+/=]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
_PEM = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_OPAQUE = re.compile(r"[A-Za-z0-9_+=.-]{32,}")
_LINE_START_SLACK = 120
_WINDOW = 4  # times max_chars of cleaned text searched for secrets


@dataclass(frozen=True, slots=True, kw_only=True)
class PaneExcerpt:
    """The redacted tail of one pane read; ``clipped`` when its beginning was cut."""

    text: str
    clipped: bool


def _opaque(found: re.Match[str]) -> str:
    run = found.group(0)
    mixed = (
        any(c.isdigit() for c in run)
        and any(c.islower() for c in run)
        and any(c.isupper() for c in run)
    )
    return REDACTED if mixed else run


def redact(text: str, *, known: Iterable[str] = ()) -> str:
    """``text`` with every secret this module recognises replaced by :data:`REDACTED`."""
    for value in sorted({k for k in known if len(k) >= KNOWN_MIN_CHARS}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _PEM.sub(REDACTED, text)
    text = _URL.sub(REDACTED, text)
    text = _SCHEME_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _NAMED_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _SHAPES.sub(REDACTED, text)
    return _OPAQUE.sub(_opaque, text)


def pane_excerpt(
    text: str, *, known: Iterable[str] = (), max_chars: int = PANE_EXCERPT_CHARS
) -> PaneExcerpt:
    """The cleaned, redacted tail of ``text``, at most ``max_chars`` characters.

    Only the last few times ``max_chars`` of the cleaned text are searched for secrets (a pane
    read is a screen, but nothing bounds it here), starting at a whole line, so no secret is
    searched for half cut.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, not {max_chars}")
    cleaned = tidy(clean_lines(text))
    window = cleaned[-_WINDOW * max_chars :]
    clipped = len(window) < len(cleaned)
    if clipped and "\n" in window:
        window = window[window.index("\n") + 1 :]
    redacted = redact(window, known=known)
    if len(redacted) <= max_chars:
        return PaneExcerpt(text=redacted, clipped=clipped)
    tail = redacted[-max_chars:]
    newline = tail.find("\n")
    if 0 <= newline < _LINE_START_SLACK:
        tail = tail[newline + 1 :]
    return PaneExcerpt(text=tail, clipped=True)
