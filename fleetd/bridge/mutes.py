"""The turns a member ended without a reply: read from its pane by the completion fallback.

The health monitor reads them to judge mute members (M4 §6); the log keeps the last
:data:`MUTES_KEPT` and counts every one ever noted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime

__all__ = ["MUTES_KEPT", "MuteEvent", "MuteLog"]

MUTES_KEPT = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class MuteEvent:
    """One turn resolved through the completion fallback."""

    session_id: str
    profile: str
    at: datetime


class MuteLog:
    """The last fallback resolutions, oldest first, and how many there ever were."""

    def __init__(self, kept: int = MUTES_KEPT) -> None:
        self._events: deque[MuteEvent] = deque(maxlen=kept)
        self.total = 0

    def note(self, *, session_id: str, profile: str, at: datetime) -> None:
        self._events.append(MuteEvent(session_id=session_id, profile=profile, at=at))
        self.total += 1

    def since(self, cursor: int) -> tuple[list[MuteEvent], int]:
        """The events noted after ``cursor`` (a former ``total``) that are still kept, and the
        new cursor."""
        fresh = min(self.total - cursor, len(self._events))
        events = list(self._events)[len(self._events) - fresh :] if fresh > 0 else []
        return events, self.total
