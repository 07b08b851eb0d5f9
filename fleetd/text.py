"""Characters no text from a caller may carry into a label or onto a terminal.

:data:`INVISIBLE` is the body of a regular-expression character class (the same in Python, in
Rust's ``regex`` that pydantic validates with, and in the ECMA-262 patterns of JSON Schema): the
controls a terminal acts on instead of showing — C0 (ESC among them), DEL and C1 — and the
invisible characters that reorder or hide what follows: the Arabic letter mark, zero-width space,
the left-to-right and right-to-left marks, the line and paragraph separators, the bidi embeddings
and overrides, the word joiner and invisible operators, the bidi isolates, and the byte-order
mark. The zero-width (non-)joiners are not in it: scripts and emoji sequences need them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["INVISIBLE", "git_name"]

INVISIBLE: Final = (
    "\\x00-\\x1f\\x7f-\\x9f\\u061c\\u200b\\u200e\\u200f\\u2028-\\u202e"
    "\\u2060-\\u2064\\u2066-\\u2069\\ufeff"
)


def git_name(value: str) -> bool:
    """Whether git reads ``value`` as a name (a ref, a branch) when it is passed as an argument:
    not empty, never an option (a leading ``-``), no NUL (no argument of a process holds one)."""
    return bool(value) and not value.startswith("-") and "\0" not in value
