"""The pane excerpt a lead may read (``health.includePaneExcerpt``): cleaned, secrets taken out
before the clip, bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.screens.excerpt import (
    KNOWN_MIN_CHARS,
    PANE_EXCERPT_CHARS,
    REDACTED,
    pane_excerpt,
    redact,
)

TOKEN = "r8k2.AbCdEfGh1JkLmNoPqRsTuVwXyZ0123456789_-xyz"


@pytest.mark.parametrize(
    ("line", "kept", "gone"),
    [
        pytest.param(f"FLEETD_TOKEN={TOKEN}", "FLEETD_TOKEN=", TOKEN, id="named-env"),
        pytest.param("password: hunter2!", "password: ", "hunter2", id="named-colon"),
        pytest.param('api_key = "abc def"', "api_key = ", "abc def", id="named-quoted"),
        pytest.param(
            "Authorization: Bearer abcdefgh12345", "Authorization: ", "abcdefgh", id="bearer"
        ),
        pytest.param(
            "curl https://hooks.slack.com/services/T0/B0/secretpart", "curl ", "slack", id="url"
        ),
        pytest.param("postgresql://fleetd:pw@db:5432/j", "", "pw@db", id="url-credentials"),
        pytest.param("key whsec_QUFBQUFBQUFBQUFBQUFBQUFB", "key ", "whsec_", id="webhook-secret"),
        pytest.param("OPENAI sk-proj-ABCDEFGHIJKLMNOPQRST", "OPENAI ", "sk-proj", id="sk"),
        pytest.param("gh ghp_ABCDEFGHIJKLMNOPQRSTUV012345", "gh ", "ghp_", id="github"),
        pytest.param("slack xoxb-1234567890-abcdefghij", "slack ", "xoxb-", id="slack"),
        pytest.param("aws AKIAABCDEFGHIJKLMNOP", "aws ", "AKIA", id="aws"),
        pytest.param("jwt eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q", "jwt ", "eyJ", id="jwt"),
        pytest.param(f"opaque {TOKEN} here", "opaque ", "AbCdEf", id="opaque-run"),
    ],
)
def test_each_kind_of_secret_is_redacted(line: str, kept: str, gone: str) -> None:
    """The secret goes, the words around it stay, and the marker stands in its place."""
    redacted = redact(line)
    assert gone not in redacted
    assert redacted.startswith(kept)
    assert REDACTED in redacted


@pytest.mark.parametrize(
    "line",
    [
        "commit 3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a49 passed",  # a hash: no upper case
        "author: Ada Lovelace",  # not an auth header
        "tests/unit/health/test_health_member_faults.py::test_x PASSED",
        "Context low (12% remaining) · 1.2k tokens",
        "● The thing is done: two files changed.",
    ],
)
def test_ordinary_screen_text_is_kept(line: str) -> None:
    """Hashes, paths, prose and status lines are not secrets."""
    assert redact(line) == line


def test_a_known_value_is_redacted_wherever_it_stands() -> None:
    """A configured secret is taken out even inside other text; a too-short one is not sought."""
    text = "say opensesame123 twice: xopensesame123x; ok"
    assert redact(text, known=["opensesame123", "ok"]) == (
        f"say {REDACTED} twice: x{REDACTED}x; ok"
    )
    assert len("ok") < KNOWN_MIN_CHARS


def test_the_excerpt_is_the_cleaned_tail_starting_at_a_line() -> None:
    """Escapes and blank runs go; a long screen keeps its last lines, from a line start."""
    screen = "\x1b[1mfirst\x1b[0m\n\n\n" + "".join(f"line {n:04}\n" for n in range(400))
    excerpt = pane_excerpt(screen, max_chars=100)
    assert excerpt.clipped
    assert len(excerpt.text) <= 100
    assert excerpt.text.startswith("line ")
    assert excerpt.text.endswith("line 0399")
    short = pane_excerpt("\x1b[31mred\x1b[0m\n\n\nend\n")
    assert (short.text, short.clipped) == ("red\n\nend", False)


def test_a_bound_below_one_is_refused() -> None:
    """pane_excerpt refuses a max_chars below 1."""
    with pytest.raises(ValueError, match="max_chars"):
        pane_excerpt("x", max_chars=0)


@given(
    before=st.integers(min_value=0, max_value=3 * PANE_EXCERPT_CHARS),
    after=st.integers(min_value=0, max_value=2 * PANE_EXCERPT_CHARS),
)
def test_no_part_of_a_secret_survives_wherever_the_clip_falls(before: int, after: int) -> None:
    """Redaction comes before the clip: no 8-character piece of a known secret is ever shown."""
    filler = "a b c d e\n"
    text = filler * (before // len(filler)) + f"note {TOKEN} end\n" + filler * (after // 10)
    shown = pane_excerpt(text, known=[TOKEN]).text
    assert len(shown) <= PANE_EXCERPT_CHARS
    assert not any(TOKEN[i : i + 8] in shown for i in range(len(TOKEN) - 7))
