"""Reading stored rows back into the journal's values (the SQL side of the records).

A stored code the core does not know (a state from a newer build, a severity renamed) raises
:class:`~fleetd.errors.JournalSchemaError`: the database belongs to a different fleetd.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from enum import StrEnum
from typing import TypeVar

from sqlmodel import Session, col, select

from fleetd.errors import JournalSchemaError
from fleetd.health.incidents import Incident, IncidentKey, ResolveReason
from fleetd.health.states import (
    Certainty,
    ControlLinkState,
    HealthStateName,
    InboxState,
    InstanceState,
    LeadState,
    MemberState,
    Scope,
    Severity,
)
from fleetd.journal.tables import AttemptRow, EventRow, IncidentRow, InstanceRow
from fleetd.journal.values import (
    AttemptOutcome,
    EventState,
    EventType,
    InstanceRecord,
    Routing,
    StoredEvent,
    StoredIncident,
    assignment_of,
)

__all__ = [
    "incident_key",
    "instance_record",
    "make_key",
    "renew_every",
    "renew_ms",
    "stored_incidents",
]

E = TypeVar("E", bound=StrEnum)

_UNRECORDED = (None, AttemptOutcome.CANCELLED.value)
"""An attempt's outcome while nothing its lease holder did is recorded: none yet, or cancelled
in flight (``finish`` keeps the holder of an outcome it records; ``release`` clears it)."""

_STATES: dict[str, HealthStateName] = {
    state.value: state
    for kind in (MemberState, ControlLinkState, LeadState, InboxState, InstanceState)
    for state in kind
}


def _parse(kind: type[E], value: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise JournalSchemaError("load", "unknown_value") from None


def make_key(scope: str, subject: str, state: str, cause: str) -> IncidentKey:
    """The core's key for stored codes."""
    known = _STATES.get(state)
    if known is None:
        raise JournalSchemaError("load", "unknown_value")
    return IncidentKey(scope=_parse(Scope, scope), subject=subject, state=known, cause=cause)


def incident_key(row: IncidentRow) -> IncidentKey:
    return make_key(row.scope, row.subject_stable_id, row.state, row.cause_fingerprint)


def _event(row: EventRow, attempts: Sequence[AttemptRow]) -> StoredEvent:
    ordered = sorted(attempts, key=lambda a: a.attempt)
    outstanding = [a for a in ordered if a.outcome is None]
    failures = [a.failure_class for a in ordered if a.failure_class is not None]
    statuses = [a.http_status for a in ordered if a.http_status is not None]
    assert row.id is not None
    return StoredEvent(
        id=row.id,
        type=_parse(EventType, row.event_type),
        revision=row.revision,
        idempotency_key=row.idempotency_key,
        state=_parse(EventState, row.state),
        created_at=row.created_at,
        delivered_at=row.delivered_at,
        attempts=len(ordered),
        due_at=outstanding[0].due_at if outstanding else None,
        last_failure=failures[-1] if failures else None,
        last_http_status=statuses[-1] if statuses else None,
        failed_by=ordered[-1].sink_generation if ordered else None,
        in_doubt=any(a.lease_owner is not None and a.outcome in _UNRECORDED for a in ordered),
    )


def stored_incidents(session: Session, rows: Sequence[IncidentRow]) -> tuple[StoredIncident, ...]:
    """``rows`` as stored incidents with their events, in the order given."""
    ids = [row.id for row in rows]
    events = session.exec(
        select(EventRow)
        .where(col(EventRow.incident_id).in_(ids))
        .order_by(col(EventRow.incident_id), col(EventRow.revision))
    ).all()
    event_ids = [event.id for event in events]
    attempts = session.exec(select(AttemptRow).where(col(AttemptRow.event_id).in_(event_ids))).all()
    by_event: dict[int, list[AttemptRow]] = {}
    for attempt in attempts:
        by_event.setdefault(attempt.event_id, []).append(attempt)
    by_incident: dict[str, list[StoredEvent]] = {}
    for event in events:
        assert event.id is not None
        by_incident.setdefault(event.incident_id, []).append(
            _event(event, by_event.get(event.id, []))
        )
    return tuple(_incident(row, tuple(by_incident.get(row.id, ()))) for row in rows)


def _incident(row: IncidentRow, events: tuple[StoredEvent, ...]) -> StoredIncident:
    routing = Routing(
        owner=row.routing_owner,
        recipient=row.routing_recipient,
        reason=row.routing_reason,
        generation=row.routing_generation,
    )
    incident = Incident(
        id=row.id,
        key=incident_key(row),
        generation=row.generation,
        target=row.target,
        severity=_parse(Severity, row.severity),
        certainty=_parse(Certainty, row.certainty),
        opened_at=row.opened_at,
        owner_lead=routing.owner,
        committed_work_at_risk=row.committed_work_at_risk,
    )
    incident = dataclasses.replace(incident, assignment=assignment_of(incident, routing))
    return StoredIncident(
        incident=incident,
        routing=routing,
        resolved_at=row.resolved_at,
        resolve_reason=_parse(ResolveReason, row.resolve_reason) if row.resolve_reason else None,
        events=events,
        instance=row.instance,
    )


def instance_record(row: InstanceRow) -> InstanceRecord:
    """The value of one ``instances`` row."""
    return InstanceRecord(
        instance=row.instance,
        host=row.host,
        version=row.version,
        started_at=row.started_at,
        last_seen=row.last_seen,
        leads=tuple(str(lead) for lead in row.leads),
        coverage=row.coverage,
        summary=row.summary,
        renew_every=renew_every(row.renew_ms),
        run=row.run,
    )


def renew_ms(every: timedelta | None) -> int | None:
    """An instance's renewal interval as its row stores it (whole milliseconds)."""
    return None if every is None else int(every / timedelta(milliseconds=1))


def renew_every(ms: int | None) -> timedelta | None:
    """An instance's renewal interval as its row stored it."""
    return None if ms is None else timedelta(milliseconds=ms)
