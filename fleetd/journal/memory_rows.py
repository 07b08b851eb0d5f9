"""The in-memory journal's rows and how they read back as stored values.

:class:`EventEntry` and :class:`AttemptEntry` hold what the ``outbound_events`` and
``delivery_attempts`` tables hold; :func:`stored_incident` turns an incident change with its
entries into the :class:`~fleetd.journal.values.StoredIncident` the SQL adapter would return
(evidence dropped, routing rebuilt), so the fake and the databases answer alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fleetd.health.incidents import ResolveReason
from fleetd.journal.values import (
    AttemptOutcome,
    EventState,
    EventType,
    IncidentChange,
    StoredEvent,
    StoredIncident,
    assignment_of,
)

__all__ = ["AttemptEntry", "EventEntry", "stored_event", "stored_incident"]


@dataclass(slots=True, kw_only=True)
class EventEntry:
    id: int
    incident_id: str
    type: EventType
    payload: Mapping[str, object]
    revision: int
    key: str
    state: EventState
    created_at: datetime
    delivered_at: datetime | None = None


@dataclass(slots=True, kw_only=True)
class AttemptEntry:
    id: int
    event_id: int
    attempt: int
    due_at: datetime
    outcome: AttemptOutcome | None = None
    failure: str | None = None
    http_status: int | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    sink: str | None = None


def stored_event(event: EventEntry, attempts: Iterable[AttemptEntry]) -> StoredEvent:
    """``event`` with its retry state, read from its attempts."""
    ordered = sorted((a for a in attempts if a.event_id == event.id), key=lambda a: a.attempt)
    outstanding = [a for a in ordered if a.outcome is None]
    failed = [a for a in ordered if a.failure is not None]
    statuses = [a for a in ordered if a.http_status is not None]
    return StoredEvent(
        id=event.id,
        type=event.type,
        revision=event.revision,
        idempotency_key=event.key,
        state=event.state,
        created_at=event.created_at,
        delivered_at=event.delivered_at,
        attempts=len(ordered),
        due_at=outstanding[0].due_at if outstanding else None,
        last_failure=failed[-1].failure if failed else None,
        last_http_status=statuses[-1].http_status if statuses else None,
        failed_by=ordered[-1].sink if ordered else None,
        in_doubt=any(
            a.lease_owner is not None and a.outcome in (None, AttemptOutcome.CANCELLED)
            for a in ordered
        ),
    )


def stored_incident(
    change: IncidentChange, events: Iterable[EventEntry], attempts: Iterable[AttemptEntry]
) -> StoredIncident:
    """The incident as stored: no evidence, routing rebuilt, events in revision order."""
    routing = change.effective_routing
    incident = dataclasses.replace(
        change.incident,
        owner_lead=routing.owner,
        assignment=assignment_of(change.incident, routing),
        evidence=(),
    )
    kept = list(attempts)
    return StoredIncident(
        incident=incident,
        routing=routing,
        resolved_at=change.resolved_at,
        resolve_reason=ResolveReason(change.resolve_reason) if change.resolve_reason else None,
        events=tuple(stored_event(e, kept) for e in sorted(events, key=lambda e: e.revision)),
        instance=change.instance,
    )
