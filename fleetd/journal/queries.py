"""SQL the journal's store runs inside an open transaction: appending, cancelling and re-arming
events, finding incidents whose human leg is unsettled, the operator's list of recent incidents,
and deleting resolved history past its retention.

Each function takes the :class:`~sqlmodel.Session` of a transaction
:class:`~fleetd.journal.store.SqlStore` opened and neither commits nor rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, delete, exists, func, literal_column, or_, update
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select

from fleetd.health.audience import FLEET_WIDE_SCOPES, SELF_SCOPES
from fleetd.journal.tables import AttemptRow, EventRow, IncidentRow
from fleetd.journal.values import (
    AttemptOutcome,
    EventState,
    EventType,
    NewEvent,
    RecordedEvent,
    idempotency_key,
)

__all__ = [
    "add_events",
    "cancel_events",
    "compact_reminders",
    "last_revision",
    "purge_resolved",
    "rearm_events",
    "recent_rows",
    "unsettled_ids",
]


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


def cancel_events(
    session: Session, incident_id: str, revisions: Sequence[int], now: datetime
) -> None:
    """Cancel the listed revisions of ``incident_id`` still pending or failed, with their
    outstanding attempt (an attempt in flight keeps its lease: a delivery may still land)."""
    if not revisions:
        return
    events = session.exec(
        select(EventRow).where(
            EventRow.incident_id == incident_id,
            col(EventRow.revision).in_(list(revisions)),
            col(EventRow.state).in_([EventState.PENDING.value, EventState.FAILED.value]),
        )
    ).all()
    for event in events:
        event.state = EventState.CANCELLED.value
        session.add(event)
    ids = [event.id for event in events]
    session.exec(
        update(AttemptRow)
        .where(col(AttemptRow.outcome).is_(None), col(AttemptRow.event_id).in_(ids))
        .values(outcome=AttemptOutcome.CANCELLED.value, finished_at=now)
    )


def rearm_events(
    session: Session, incident_id: str, revisions: Sequence[int], now: datetime
) -> int:
    """Give the listed failed revisions of ``incident_id`` a new attempt due at ``now``."""
    if not revisions:
        return 0
    events = session.exec(
        select(EventRow)
        .where(
            EventRow.incident_id == incident_id,
            col(EventRow.revision).in_(list(revisions)),
            EventRow.state == EventState.FAILED.value,
        )
        .with_for_update()
    ).all()
    for event in events:
        last = session.exec(
            select(func.max(AttemptRow.attempt)).where(AttemptRow.event_id == event.id)
        ).one()
        assert event.id is not None
        session.add(
            AttemptRow(event_id=event.id, attempt=(last or 0) + 1, due_at=now, created_at=now)
        )
        event.state = EventState.PENDING.value
        session.add(event)
    return len(events)


def unsettled_ids(told_since: datetime | None) -> Select[tuple[str]]:
    """Ids of incidents whose human leg may still owe something (the policy decides what; this
    only finds): an event pending or failed, or — with ``told_since`` — one delivered at or after
    it whose incident has no ``resolved`` event (a delivery that landed after its incident's
    resolution was recorded). Both follow indexes: the partial ones on pending and failed events,
    and ``delivered_at``."""
    pending = select(EventRow.incident_id).where(EventRow.state == EventState.PENDING.value)
    failed = select(EventRow.incident_id).where(EventRow.state == EventState.FAILED.value)
    if told_since is None:
        return pending.union(failed)  # type: ignore[return-value]  # one partial index each
    closing = aliased(EventRow)
    closed = exists().where(
        col(closing.incident_id) == col(EventRow.incident_id),
        col(closing.event_type) == EventType.RESOLVED.value,
    )
    told = select(EventRow.incident_id).where(col(EventRow.delivered_at) >= told_since, ~closed)
    return pending.union(failed, told)  # type: ignore[return-value]


def recent_rows(
    session: Session, resolved_since: datetime, limit: int, involving: str | None
) -> list[IncidentRow]:
    """Open incidents (latest opened first), then those resolved since (latest first); with
    ``involving``, those that lead may see (:func:`fleetd.health.audience.lead_may_see`)."""
    if limit < 1:
        return []
    query = select(IncidentRow)
    if involving is not None:
        query = query.where(
            or_(
                col(IncidentRow.routing_owner) == involving,
                col(IncidentRow.routing_recipient) == involving,
                and_(
                    col(IncidentRow.scope).in_(sorted(SELF_SCOPES)),
                    col(IncidentRow.subject_stable_id) == involving,
                ),
                col(IncidentRow.scope).in_(sorted(FLEET_WIDE_SCOPES)),
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


def compact_reminders(session: Session, limit: int) -> int:
    """Delete up to ``limit`` delivered ``reminder`` events that a later delivered ``reminder``
    of the same incident supersedes, with their attempts; how many."""
    if limit < 1:
        return 0
    later = aliased(EventRow)
    # literals, not parameters: SQLite uses a partial index only for a query whose WHERE
    # implies the index's, which a bound parameter never does
    delivered: ColumnElement[str] = literal_column(f"'{EventState.DELIVERED.value}'")
    reminder: ColumnElement[str] = literal_column(f"'{EventType.REMINDER.value}'")
    superseded = exists().where(
        col(later.incident_id) == col(EventRow.incident_id),
        col(later.event_type) == reminder,
        col(later.state) == delivered,
        col(later.revision) > col(EventRow.revision),
    )
    ids = session.exec(
        select(EventRow.id)
        .where(col(EventRow.event_type) == reminder, col(EventRow.state) == delivered, superseded)
        .order_by(col(EventRow.incident_id), col(EventRow.revision))  # the partial index's order
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not ids:
        return 0
    session.exec(delete(AttemptRow).where(col(AttemptRow.event_id).in_(ids)))
    session.exec(delete(EventRow).where(col(EventRow.id).in_(ids)))
    return len(ids)


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
