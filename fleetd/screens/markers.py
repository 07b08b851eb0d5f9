"""What the lead sees when a result came from a pane instead of ``fleet_reply``.

A pane-derived result must never pass for a structured reply. Every such text opens with one
reason marker: the completion fallback (the turn ended without ``fleet_reply``; counted as MUTE)
or the repaired completion of M4 §8.4 (a lost turn boundary was reconciled). Further markers say
that no assistant marker was recognised (raw screen text), that the text was clipped to its tail,
or that the pane could not be read at all, and (completion fallback only) that the text equals
the last assistant block on screen when the prompt was sent, so it may be an earlier turn's.
When the read shows a tested fatal signature (herdr reports Claude Code and Codex error screens
as ``idle``, so such a turn ends at a normal-looking boundary), a marker names the signature id
and says in our own words what it means: the turn ended on an error, not an answer, and nothing
was retried — what to do is the lead's call (M4 §5.2). Markers are bracketed lines on their own,
above the text, so a lead (or a test) can tell them from the member's words.
"""

from __future__ import annotations

from enum import StrEnum

from fleetd.screens.extract import CaptureResult, Extraction
from fleetd.screens.fatal import FatalSignature

__all__ = [
    "CLIPPED_TAIL_MARKER",
    "COMPLETION_FALLBACK_MARKER",
    "NO_TEXT_NOTE",
    "RAW_TEXT_MARKER",
    "READ_FAILED_NOTE",
    "REPAIRED_COMPLETION_MARKER",
    "UNCHANGED_MARKER",
    "FallbackReason",
    "error_screen_marker",
    "render_fallback",
]

COMPLETION_FALLBACK_MARKER = (
    "[completion fallback - the member ended its turn without calling fleet_reply;"
    " the text below was read from its pane]"
)
REPAIRED_COMPLETION_MARKER = (
    "[repaired completion - fleetd detected a lost turn boundary. The member did not call"
    " fleet_reply; pane-derived text follows and may be partial]"
)
RAW_TEXT_MARKER = (
    "[raw pane text - fleetd recognised no assistant marker on the pane; the text below is"
    " the end of the screen and may include interface lines]"
)
UNCHANGED_MARKER = (
    "[unchanged - this text was already on the pane when the prompt was sent; it may be an"
    " earlier turn's answer]"
)
CLIPPED_TAIL_MARKER = "[clipped - the beginning was cut; only the last part of the text follows]"
NO_TEXT_NOTE = "(no assistant text was found on the pane)"
READ_FAILED_NOTE = "(the pane could not be read)"


class FallbackReason(StrEnum):
    """Why a result is shown from pane text."""

    COMPLETION_FALLBACK = "completion_fallback"
    REPAIRED_COMPLETION = "repaired_completion"


_REASON_MARKERS = {
    FallbackReason.COMPLETION_FALLBACK: COMPLETION_FALLBACK_MARKER,
    FallbackReason.REPAIRED_COMPLETION: REPAIRED_COMPLETION_MARKER,
}


def error_screen_marker(signature: FatalSignature) -> str:
    """The marker naming a fatal signature found on the pane (our words, never pane text)."""
    return (
        f"[error on screen {signature.id} - {signature.summary}. The turn ended on this error,"
        " not on an answer; fleetd retried nothing]"
    )


def render_fallback(
    extraction: Extraction,
    reason: FallbackReason,
    *,
    fatal: FatalSignature | None = None,
    unchanged: bool = False,
) -> str:
    """The content the lead sees: reason, error and capture markers, a blank line, the text.

    ``unchanged`` says the block equals the delivery baseline (see
    :func:`fleetd.bridge.resolver.unchanged`); repair never renders such a block.
    """
    markers = [_REASON_MARKERS[reason]]
    if fatal is not None:
        markers.append(error_screen_marker(fatal))
    if extraction.capture is CaptureResult.READ_FAILED:
        return f"{markers[0]}\n\n{READ_FAILED_NOTE}"
    if not extraction.marker_recognised:
        markers.append(RAW_TEXT_MARKER)
    if extraction.clipped:
        markers.append(CLIPPED_TAIL_MARKER)
    if unchanged:
        markers.append(UNCHANGED_MARKER)
    body = extraction.text if extraction.text.strip() else NO_TEXT_NOTE
    return "\n".join(markers) + "\n\n" + body
