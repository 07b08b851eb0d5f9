"""Reading agent screens: assistant blocks, fatal signatures and progress digests.

Everything here is pure: it takes the text of a pane read and returns values. The bridge uses it
for the completion fallback and the delivery baseline (:func:`extract_assistant_block`,
:func:`render_fallback`), health for ERROR_ON_SCREEN (:func:`match_fatal`) and STALL_SUSPECTED
(:func:`digest`). What the agents draw — markers, status cues, fatal messages — is written once in
:mod:`.vocabulary`: the screen tests compose their screens from it (:mod:`.compose`) and the herdr
simulator (:mod:`fleetd.sim.screens`) draws its animated screens from it.
"""

from __future__ import annotations

from fleetd.screens.extract import (
    CaptureResult,
    Extraction,
    extract_assistant_block,
    repair_supported,
)
from fleetd.screens.fatal import FatalSignature, match_fatal, signature_ids
from fleetd.screens.kinds import AgentKind, parse_agent_kind
from fleetd.screens.markers import (
    CLIPPED_TAIL_MARKER,
    COMPLETION_FALLBACK_MARKER,
    NO_TEXT_NOTE,
    RAW_TEXT_MARKER,
    READ_FAILED_NOTE,
    REPAIRED_COMPLETION_MARKER,
    UNCHANGED_MARKER,
    FallbackReason,
    render_fallback,
)
from fleetd.screens.normalise import digest, normalise

__all__ = [
    "CLIPPED_TAIL_MARKER",
    "COMPLETION_FALLBACK_MARKER",
    "NO_TEXT_NOTE",
    "RAW_TEXT_MARKER",
    "READ_FAILED_NOTE",
    "REPAIRED_COMPLETION_MARKER",
    "UNCHANGED_MARKER",
    "AgentKind",
    "CaptureResult",
    "Extraction",
    "FallbackReason",
    "FatalSignature",
    "digest",
    "extract_assistant_block",
    "match_fatal",
    "normalise",
    "parse_agent_kind",
    "render_fallback",
    "repair_supported",
    "signature_ids",
]
