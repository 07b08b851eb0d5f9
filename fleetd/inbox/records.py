"""The typed inbox record (M4 §7.1) and the small values that travel with it.

One :class:`InboxRecord` is one entry in a lead's inbox: either a member's reply (``kind=reply``)
or a health message about a member or lead (``kind=health``). The two kinds are kept apart on
purpose: a health message never resolves a task rendezvous, so it must never look like a reply.
That is why the health-only fields are required on a health record and must be absent on a reply.

A record read from the legacy wire format (``text/plain``, written by the previous build) has
``schema_version=None`` and no typed metadata: it is a reply whose ``content`` is the exact text.

Records are validated on construction and raise :class:`ValueError` with a fixed, content-free
message (the codec turns it into an ``invalid_field`` outcome), so an invalid record cannot exist.
This module is pure: no I/O, no clock, no logging.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

__all__ = [
    "EPOCH_MILLIS_MAX",
    "SCHEMA_VERSION",
    "EvidenceValue",
    "InboxRecord",
    "InboxStats",
    "MessageKind",
    "ReplySource",
    "Severity",
    "WaitingReply",
    "check_key",
    "is_valid_key",
    "is_valid_msg_id",
]

SCHEMA_VERSION = 1
"""The one typed schema version this build reads and writes."""

EPOCH_MILLIS_MAX = 2**53 - 1
"""Largest epoch-millisecond value accepted (exact in every JSON reader)."""

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_MSG_ID = re.compile(r"[\x21-\x7e]{1,200}")
_STATE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_TEXT_ID_MAX = 256

EvidenceValue = str | int | float | bool | None
"""Evidence is a flat JSON object of scalars: structured facts and counts, never pane text."""


class MessageKind(StrEnum):
    """What an inbox entry is."""

    REPLY = "reply"
    HEALTH = "health"


class Severity(StrEnum):
    """How urgent a health message is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class ReplySource(StrEnum):
    """How the bridge obtained a reply (typed v1 optional field ``source``)."""

    REPLY = "reply"
    FALLBACK = "fallback"
    REPAIRED = "repaired"
    LATE = "late"


def is_valid_key(key: str) -> bool:
    """Whether ``key`` can name an inbox (it becomes part of an AMQP queue name)."""
    return _KEY.fullmatch(key) is not None


def check_key(key: str) -> str:
    """Return ``key`` if it can name an inbox, else raise :class:`ValueError`."""
    if not is_valid_key(key):
        raise ValueError("inbox key must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
    return key


def is_valid_msg_id(msg_id: str) -> bool:
    """Whether ``msg_id`` is a message id we write (printable ASCII, 1-200 characters)."""
    return _MSG_ID.fullmatch(msg_id) is not None


_E = TypeVar("_E", bound=StrEnum)


def _member(enum: type[_E], value: str, name: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"{name}: not one of {sorted(member.value for member in enum)}") from None


def _check_millis(name: str, value: int | None) -> None:
    if value is not None and not (
        type(value) is int and 0 <= value <= EPOCH_MILLIS_MAX  # bool is not an epoch
    ):
        raise ValueError(f"{name}: must be an integer epoch in milliseconds")


def _check_text_id(name: str, value: str | None) -> None:
    if value is not None and not (0 < len(value) <= _TEXT_ID_MAX):
        raise ValueError(f"{name}: must be 1-{_TEXT_ID_MAX} characters")


def _check_evidence(evidence: Mapping[str, EvidenceValue]) -> None:
    for name, value in evidence.items():
        if not isinstance(name, str) or not (
            value is None or isinstance(value, str | int | float | bool)
        ):
            raise ValueError("evidence: must be a flat object of scalars")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("evidence: numbers must be finite")


_HEALTH_ONLY = (
    "subject_terminal",
    "severity",
    "state",
    "evidence",
    "first_seen_epoch_millis",
    "last_seen_epoch_millis",
    "recovery_tried",
    "suggested_tool_calls",
)

_WIRE_NAMES = {
    "subject_terminal": "subjectTerminal",
    "severity": "severity",
    "state": "state",
    "evidence": "evidence",
    "first_seen_epoch_millis": "firstSeenEpochMillis",
    "last_seen_epoch_millis": "lastSeenEpochMillis",
    "recovery_tried": "recoveryTried",
    "suggested_tool_calls": "suggestedToolCalls",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxRecord:
    """One inbox entry, typed (``schema_version=1``) or legacy (``schema_version=None``)."""

    msg_id: str
    kind: MessageKind
    target: str
    recipient_lead: str
    content: str = field(repr=False)  # reply text never reaches a log through a repr
    schema_version: int | None = SCHEMA_VERSION
    created_at_epoch_millis: int | None = None
    subject_terminal: str | None = None
    severity: Severity | None = None
    state: str | None = None
    evidence: Mapping[str, EvidenceValue] | None = field(default=None, hash=False)
    first_seen_epoch_millis: int | None = None
    last_seen_epoch_millis: int | None = None
    recovery_tried: bool | None = None
    suggested_tool_calls: tuple[str, ...] | None = None
    ticket: str | None = None
    source: ReplySource | None = None

    def __post_init__(self) -> None:
        if not is_valid_msg_id(self.msg_id):
            raise ValueError("msgId: must be 1-200 printable ASCII characters")
        object.__setattr__(self, "kind", _member(MessageKind, self.kind, "kind"))
        _check_text_id("target", self.target)
        if not is_valid_key(self.recipient_lead):
            raise ValueError("recipientLead: must be a valid inbox key")
        if not isinstance(self.content, str):
            raise ValueError("content: must be text")
        _check_millis("createdAtEpochMillis", self.created_at_epoch_millis)
        _check_millis("firstSeenEpochMillis", self.first_seen_epoch_millis)
        _check_millis("lastSeenEpochMillis", self.last_seen_epoch_millis)
        _check_text_id("subjectTerminal", self.subject_terminal)
        _check_text_id("ticket", self.ticket)
        if self.severity is not None:
            object.__setattr__(self, "severity", _member(Severity, self.severity, "severity"))
        if self.source is not None:
            object.__setattr__(self, "source", _member(ReplySource, self.source, "source"))
        if self.state is not None and _STATE.fullmatch(self.state) is None:
            raise ValueError("state: must be an upper-case health state name")
        if self.evidence is not None:
            _check_evidence(self.evidence)
            object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))
        if self.suggested_tool_calls is not None:
            calls = tuple(self.suggested_tool_calls)
            if not all(isinstance(call, str) and call for call in calls):
                raise ValueError("suggestedToolCalls: must be non-empty strings")
            object.__setattr__(self, "suggested_tool_calls", calls)
        self._check_shape()

    def _check_shape(self) -> None:
        present = [name for name in _HEALTH_ONLY if getattr(self, name) is not None]
        if self.schema_version is None:
            if self.kind is not MessageKind.REPLY or present or self.ticket or self.source:
                raise ValueError("kind: legacy entries are replies without typed metadata")
            return
        if type(self.schema_version) is not int or self.schema_version != SCHEMA_VERSION:
            raise ValueError("schemaVersion: this build writes version 1 only")
        if self.created_at_epoch_millis is None:
            raise ValueError("createdAtEpochMillis: required")
        if self.kind is MessageKind.REPLY:
            if present:
                raise ValueError(f"{_WIRE_NAMES[present[0]]}: must be absent on a reply")
            return
        if len(present) != len(_HEALTH_ONLY):
            missing = next(name for name in _HEALTH_ONLY if getattr(self, name) is None)
            raise ValueError(f"{_WIRE_NAMES[missing]}: required on a health message")
        if self.source is not None:
            raise ValueError("source: only replies carry a source")
        first, last = self.first_seen_epoch_millis, self.last_seen_epoch_millis
        if first is not None and last is not None and first > last:
            raise ValueError("firstSeenEpochMillis: must not be after lastSeenEpochMillis")


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingReply:
    """One decodable reply waiting in a key: which member wrote it, and when (no content)."""

    target: str
    created_epoch_millis: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxStats:
    """What waits in one inbox key.

    ``depth`` counts every waiting entry, decodable or not. ``by_kind``,
    ``oldest_created_epoch_millis`` and ``replies`` describe the decodable entries (see each
    adapter for bounds); ``unscanned`` counts waiting entries past an adapter's scan bound, whose
    kind is not known. :attr:`actionable` is what the lead can collect: an entry held for a decode
    failure (an unsupported version, an entry waiting for quarantine) is not the lead's backlog.
    """

    depth: int
    oldest_created_epoch_millis: int | None
    by_kind: Mapping[MessageKind, int] = field(hash=False)
    replies: tuple[WaitingReply, ...] = ()
    unscanned: int = 0

    @property
    def actionable(self) -> int:
        """Entries a collect would hand to the lead (unscanned ones presumed collectable)."""
        return sum(self.by_kind.values()) + self.unscanned
