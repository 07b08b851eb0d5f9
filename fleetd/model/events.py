"""Event types, delivery states and the idempotency key of one outbound event (M4 §10.3).

An incident tells a person about itself through events, each with a revision that grows by one
per event of that incident (``open`` is revision 1; a ``reminder`` or the ``resolved`` event takes
the next; ``severity_changed`` is reserved). The key of an event is a hash of exactly those three
facts::

    "evt_" + sha256("fleetd.webhook.v1" US incidentId US eventType US revision)[:32 hex digits]

where ``US`` is the unit separator ``\\x1f`` (no id, type or decimal revision contains it) and the
revision is written in decimal without leading zeros. The key is computed, never stored as the
only copy: a transport retry, a restart or a replay from the journal recomputes the same value, so
the receiver can drop duplicates on ``webhook-id`` / ``Idempotency-Key`` (both carry it). The
``fleetd.webhook.v1`` prefix names this recipe; a different recipe would change the prefix, never
silently the keys.

Pure: standard library only.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Final

__all__ = ["EVENT_ID_PATTERN", "EventState", "EventType", "idempotency_key", "is_plain_id"]

_RECIPE: Final = "fleetd.webhook.v1"
_SEPARATOR: Final = "\x1f"

EVENT_ID_PATTERN: Final = r"^evt_[0-9a-f]{32}$"
"""What every key looks like (the payload schema's ``eventId``)."""

_INCIDENT_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


class EventType(StrEnum):
    """What an outbound event says about its incident (§10.3); ``severity_changed`` is
    reserved (an incident's severity is fixed when it opens; no event of that type is sent)."""

    OPEN = "open"
    SEVERITY_CHANGED = "severity_changed"  # reserved: kept so stored rows and receivers still parse
    REMINDER = "reminder"
    RESOLVED = "resolved"


class EventState(StrEnum):
    """Where an event's delivery stands."""

    PENDING = "pending"  # an attempt is outstanding (due, leased or waiting for its time)
    DELIVERED = "delivered"
    FAILED = "failed"  # a permanent failure, until the policy re-arms it (new receivers, a replay)
    CANCELLED = "cancelled"  # superseded, e.g. resolved before its first delivery


def is_plain_id(value: str) -> bool:
    """Whether ``value`` can name an incident in a key (1 to 128 of ``A-Za-z0-9_.:-``)."""
    return _INCIDENT_ID.fullmatch(value) is not None


def idempotency_key(incident_id: str, event_type: EventType | str, revision: int) -> str:
    """The stable key of revision ``revision`` (>= 1) of ``incident_id``'s ``event_type`` event.

    Also the Standard Webhooks ``webhook-id``. Raises :class:`ValueError` for an unknown event
    type, a revision below 1 or an incident id that is not a plain id.
    """
    kind = EventType(event_type)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise ValueError(f"revision must be an integer >= 1, not {revision!r}")
    if not is_plain_id(incident_id):
        raise ValueError("incident id must be a plain id")
    raw = _SEPARATOR.join((_RECIPE, incident_id, kind.value, str(revision)))
    return "evt_" + hashlib.sha256(raw.encode("ascii")).hexdigest()[:32]
