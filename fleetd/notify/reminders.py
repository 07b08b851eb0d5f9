"""Reminders (M4 §10.4) and the other events the delivery worker adds itself.

A transport retry repeats one event with the same key; a reminder is a *new* event, the next
revision of its incident. An open incident is due a reminder when all of these hold:

* it is unresolved, routed to a person (its stored assignment's route is ``human``), and critical;
* at least one of its events was delivered, and the latest delivery is ``humanRepeatSeconds`` old
  or older ("counted from the last successful human event");
* none of its events is pending. An event still being told (an ``open`` in retry, the previous
  reminder) is the reminder; so a failing sink holds at most one outstanding event per incident
  and never grows a reminder queue. Disabled mode asks nothing here at all.

The worker also adds a ``resolved`` event when an event it delivered turns out to have been
cancelled meanwhile (the incident resolved while the request was in flight, so the dispatcher
thought nobody had been told): the person saw the incident open and must see it close.

Both payloads come from the stored incident through
:func:`~fleetd.notify.payload.event_from_incident`, the same builder the dispatcher uses, so they
hold only what §10.5 allows. The journal stores no
evidence, so these events carry none.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fleetd.health.incidents import Route
from fleetd.health.states import Severity
from fleetd.journal.records import EventState, EventType, StoredIncident
from fleetd.notify.payload import CoverageStatus, event_from_incident

__all__ = [
    "follow_up_payload",
    "last_revision",
    "next_reminder_at",
    "owes_resolved",
    "reminder_due",
]


def last_revision(stored: StoredIncident) -> int:
    """The incident's latest event revision (0 before its first event)."""
    return max((event.revision for event in stored.events), default=0)


def next_reminder_at(stored: StoredIncident, *, repeat: timedelta) -> datetime | None:
    """When ``stored`` is due its next reminder (module docstring), or ``None`` while it is not a
    candidate at all (resolved, not with a person, not critical, never delivered, or pending)."""
    incident = stored.incident
    last = stored.last_delivered_at
    if (
        stored.resolved_at is not None
        or incident.route is not Route.HUMAN
        or incident.severity is not Severity.CRITICAL
        or last is None
        or any(event.state is EventState.PENDING for event in stored.events)
    ):
        return None
    return last + repeat


def reminder_due(stored: StoredIncident, *, now: datetime, repeat: timedelta) -> bool:
    """Whether ``stored`` should get a new ``reminder`` revision at ``now``."""
    due = next_reminder_at(stored, repeat=repeat)
    return due is not None and due <= now


def owes_resolved(stored: StoredIncident, event_id: int) -> bool:
    """Whether a person was told of ``stored`` by event ``event_id`` after the incident's pending
    events were cancelled, and no ``resolved`` event exists yet."""
    cancelled = any(e.id == event_id and e.state is EventState.CANCELLED for e in stored.events)
    return (
        stored.resolved_at is not None
        and cancelled
        and not any(e.type is EventType.RESOLVED for e in stored.events)
    )


def follow_up_payload(
    stored: StoredIncident,
    *,
    event_type: EventType,
    now: datetime,
    instance: str,
    coverage: CoverageStatus,
) -> dict[str, object]:
    """The v1 payload of the next revision of ``stored`` (a reminder or a late ``resolved``),
    as the JSON object the journal stores."""
    event = event_from_incident(
        stored.incident,
        event_type=event_type,
        revision=last_revision(stored) + 1,
        occurred_at=now,
        instance=instance,
        coverage=coverage,
        routing_reason=stored.incident.routing_reason,
        resolved_at=stored.resolved_at,
        resolve_reason=stored.resolve_reason,
    )
    return event.model_dump(mode="json", by_alias=True)
