"""SQL the journal's store runs inside an open transaction: appending events, re-arming failed
ones, the operator's list of recent incidents, and deleting resolved history past its retention.

Each function takes the :class:`~sqlmodel.Session` of a transaction
:class:`~fleetd.journal.store.SqlStore` opened and neither commits nor rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, exists, func, or_
from sqlmodel import Session, col, select

from fleetd.journal.records import (
    EventState,
    NewEvent,
    RecordedEvent,
    idempotency_key,
)
from fleetd.journal.tables import AttemptRow, EventRow, IncidentRow

__all__ = ["add_events", "last_revision", "purge_resolved", "rearm_failed", "recent_rows"]


def last_revision(session: Session, incident_id: str) -> int:
    """The incident's latest event revision (0 before its first event)."""
    last = session.exec(
        select(func.max(EventRow.revision)).where(EventRow.incident_id == incident_id)
    ).one()
    return last or 0


def add_events(
    session: Session, incident_id: str, events: Sequence[NewEvent], now: datetime
) -> tuple[RecordedEvent, ...]:
    """Append ``events`` with the next revisions, each with its first attempt due."""
    revision = last_revision(session, incident_id)
    recorded: list[RecordedEvent] = []
    for new in events:
        revision += 1
        due = new.due_at or now
        key = idempotency_key(incident_id, new.type, revision)
        row = EventRow(
            incident_id=incident_id,
            event_type=new.type.value,
            revision=revision,
            idempotency_key=key,
            payload=dict(new.payload),
            state=EventState.PENDING.value,
            created_at=now,
        )
        session.add(row)
        session.flush()
        assert row.id is not None
        session.add(AttemptRow(event_id=row.id, attempt=1, due_at=due, created_at=now))
        recorded.append(
            RecordedEvent(
                id=row.id,
                incident_id=incident_id,
                type=new.type,
                revision=revision,
                idempotency_key=key,
                due_at=due,
            )
        )
    return tuple(recorded)


def rearm_failed(
    session: Session, now: datetime, incident_id: str | None, except_sink: str | None
) -> int:
    """Give failed events (of one incident, unless refused by ``except_sink``) a new attempt."""
    query = select(EventRow).where(EventRow.state == EventState.FAILED.value)
    if incident_id is not None:
        query = query.where(EventRow.incident_id == incident_id)
    rearmed = 0
    for event in session.exec(query.with_for_update()).all():
        last = session.exec(
            select(AttemptRow)
            .where(AttemptRow.event_id == event.id)
            .order_by(col(AttemptRow.attempt).desc())
            .limit(1)
        ).one()
        if except_sink is not None and last.sink_generation == except_sink:
            continue
        assert event.id is not None
        session.add(
            AttemptRow(event_id=event.id, attempt=last.attempt + 1, due_at=now, created_at=now)
        )
        event.state = EventState.PENDING.value
        session.add(event)
        rearmed += 1
    return rearmed


def recent_rows(
    session: Session, resolved_since: datetime, limit: int, involving: str | None
) -> list[IncidentRow]:
    """Open incidents (latest opened first), then those resolved since (latest first)."""
    if limit < 1:
        return []
    query = select(IncidentRow)
    if involving is not None:
        query = query.where(
            or_(
                col(IncidentRow.routing_owner) == involving,
                col(IncidentRow.routing_recipient) == involving,
            )
        )
    opened = session.exec(
        query.where(col(IncidentRow.resolved_at).is_(None))
        .order_by(col(IncidentRow.opened_at).desc(), col(IncidentRow.id))
        .limit(limit)
    ).all()
    rows = list(opened)
    if len(rows) < limit:
        resolved = session.exec(
            query.where(col(IncidentRow.resolved_at) >= resolved_since)
            .order_by(col(IncidentRow.resolved_at).desc(), col(IncidentRow.id))
            .limit(limit - len(rows))
        ).all()
        rows.extend(resolved)
    return rows


def purge_resolved(session: Session, resolved_before: datetime, limit: int) -> int:
    """Delete up to ``limit`` incidents resolved before ``resolved_before``, oldest first, with
    their events and attempts; one with an event still pending is kept. On PostgreSQL the rows
    another instance's purge holds are skipped, not waited for."""
    if limit < 1:
        return 0
    pending = exists().where(
        col(EventRow.incident_id) == col(IncidentRow.id),
        col(EventRow.state) == EventState.PENDING.value,
    )
    ids = session.exec(
        select(IncidentRow.id)
        .where(col(IncidentRow.resolved_at) < resolved_before, ~pending)
        .order_by(col(IncidentRow.resolved_at), col(IncidentRow.id))
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not ids:
        return 0
    events = select(EventRow.id).where(col(EventRow.incident_id).in_(ids))
    session.exec(delete(AttemptRow).where(col(AttemptRow.event_id).in_(events)))
    session.exec(delete(EventRow).where(col(EventRow.incident_id).in_(ids)))
    session.exec(delete(IncidentRow).where(col(IncidentRow.id).in_(ids)))
    return len(ids)
