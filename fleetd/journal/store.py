"""``SqlStore``: the journal's synchronous SQL operations, one transaction each.

:class:`~fleetd.journal.sql.SqlJournal` runs these on its worker thread; nothing here awaits. Each
public method opens one transaction (``BEGIN IMMEDIATE`` on SQLite), does all its reads and
writes inside it and commits, or rolls back and raises a translated
:class:`~fleetd.errors.JournalError`. Input is checked with the same functions the fake uses,
before the transaction starts, so a refused record writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, Text, cast, func, or_
from sqlalchemy import select as sql_select
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from fleetd.errors import JournalError, JournalRefusedError
from fleetd.health.incidents import IncidentKey
from fleetd.journal.engine import translate
from fleetd.journal.queries import (
    add_events,
    cancel_events,
    compact_reminders,
    last_revision,
    purge_resolved,
    rearm_events,
    recent_rows,
    unsettled_ids,
)
from fleetd.journal.rows import (
    incident_key,
    instance_record,
    renew_every,
    renew_ms,
    stored_incidents,
)
from fleetd.journal.tables import AttemptRow, EventRow, IncidentRow, InstanceRow
from fleetd.journal.values import (
    AFTER_CANCEL,
    AttemptOutcome,
    Claim,
    EventState,
    EventType,
    IncidentChange,
    InstanceRecord,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
    check_change,
    check_code,
    check_event,
    check_instance,
    key_namespace,
)

__all__ = ["SqlStore"]


class SqlStore:
    """The journal's operations on one engine, synchronous."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def transaction(self, operation: str) -> Iterator[Session]:
        """One transaction; any database or OS failure leaves as a :class:`JournalError`."""
        try:
            with Session(self.engine, expire_on_commit=False) as session, session.begin():
                yield session
        except JournalError:
            raise
        except (SQLAlchemyError, OSError) as exc:
            raise translate(exc, operation) from None

    def record(
        self, change: IncidentChange, events: Sequence[NewEvent], now: datetime
    ) -> tuple[RecordedEvent, ...]:
        check_change(change)
        for new in events:
            check_event(new)
        with self.transaction("record") as session:
            self._put_incident(session, change, now)
            session.flush()
            cancel_events(session, change.incident.id, change.cancel, now)
            return add_events(session, change.incident.id, events, now)

    def settle(
        self,
        incident_id: str,
        *,
        now: datetime,
        after_revision: int,
        events: Sequence[NewEvent],
        cancel: Sequence[int],
        rearm: Sequence[int],
    ) -> tuple[RecordedEvent, ...] | None:
        for new in events:
            check_event(new)
        with self.transaction("settle") as session:
            row = session.get(IncidentRow, incident_id, with_for_update=True)
            if row is None or last_revision(session, incident_id) != after_revision:
                return None
            cancel_events(session, incident_id, cancel, now)
            rearm_events(session, incident_id, rearm, now)
            return add_events(session, incident_id, events, now)

    def _put_incident(self, session: Session, change: IncidentChange, now: datetime) -> None:
        incident = change.incident
        key = incident.key
        row = session.get(IncidentRow, incident.id)
        space = key_namespace(key.scope, row.instance if row is not None else change.instance)
        others = session.exec(
            select(IncidentRow).where(
                IncidentRow.scope == key.scope.value,
                IncidentRow.subject_stable_id == key.subject,
                IncidentRow.state == key.state.value,
                IncidentRow.cause_fingerprint == key.cause,
                IncidentRow.key_instance == space,
                IncidentRow.id != incident.id,
            )
        ).all()
        for other in others:
            if other.generation == incident.generation:
                raise JournalRefusedError("record", "generation_conflict")
            if other.resolved_at is None and change.resolved_at is None:
                raise JournalRefusedError("record", "open_key_conflict")
        if row is None:
            row = IncidentRow(
                id=incident.id,
                scope=key.scope.value,
                subject_stable_id=key.subject,
                state=key.state.value,
                cause_fingerprint=key.cause,
                generation=incident.generation,
                severity=incident.severity.value,
                certainty=incident.certainty.value,
                opened_at=incident.opened_at,
                updated_at=now,
                instance=change.instance,
                key_instance=space,
            )
        elif incident_key(row) != key or row.generation != incident.generation:
            raise JournalRefusedError("record", "incident_key_changed")
        routing = change.effective_routing
        row.severity = incident.severity.value
        row.certainty = incident.certainty.value
        row.target = incident.target
        row.committed_work_at_risk = incident.committed_work_at_risk
        row.routing_owner = routing.owner
        row.routing_recipient = routing.recipient
        row.routing_reason = routing.reason
        row.routing_generation = routing.generation
        row.resolved_at = change.resolved_at
        row.resolve_reason = change.resolve_reason.value if change.resolve_reason else None
        row.updated_at = now
        session.add(row)

    def get(self, incident_id: str) -> StoredIncident | None:
        with self.transaction("get") as session:
            row = session.get(IncidentRow, incident_id)
            found = stored_incidents(session, [row] if row is not None else [])
        return found[0] if found else None

    def recent(
        self, resolved_since: datetime, limit: int, involving: str | None
    ) -> tuple[StoredIncident, ...]:
        with self.transaction("recent") as session:
            return stored_incidents(session, recent_rows(session, resolved_since, limit, involving))

    def load_open(
        self, told_since: datetime | None = None, instance: str | None = None
    ) -> JournalSnapshot:
        owned = (
            or_(col(IncidentRow.instance).is_(None), col(IncidentRow.instance) == instance)
            if instance is not None
            else col(IncidentRow.id).is_not(None)
        )
        with self.transaction("load") as session:
            opened = session.exec(
                select(IncidentRow)
                .where(col(IncidentRow.resolved_at).is_(None), owned)
                .order_by(col(IncidentRow.opened_at), col(IncidentRow.id))
            ).all()
            resolving = session.exec(
                select(IncidentRow)
                .where(
                    col(IncidentRow.resolved_at).is_not(None),
                    col(IncidentRow.id).in_(unsettled_ids(told_since)),
                    owned,
                )
                .order_by(col(IncidentRow.opened_at), col(IncidentRow.id))
            ).all()
            # the keys these rows hold, and one indexed max for every other key: never a pass
            # over the history kept
            generations: dict[IncidentKey, int] = {}
            for row in (*opened, *resolving):
                key = incident_key(row)
                generations[key] = max(generations.get(key, 0), row.generation)
            floor = session.exec(select(func.max(IncidentRow.generation))).one()
            return JournalSnapshot(
                open_incidents=stored_incidents(session, opened),
                pending_resolutions=stored_incidents(session, resolving),
                generations=generations,
                generation_floor=floor or 0,
            )

    def renew_instance(self, record: InstanceRecord) -> InstanceRecord | None:
        check_instance(record)
        with self.transaction("instance") as session:
            row = session.get(InstanceRow, record.instance, with_for_update=True)
            before = None if row is None else replace(instance_record(row), summary=None)
            if row is None:
                row = InstanceRow(
                    instance=record.instance,
                    host=record.host,
                    version=record.version,
                    started_at=record.started_at,
                    last_seen=record.last_seen,
                    leads=[],
                    coverage=record.coverage,
                )
            row.host = record.host
            row.version = record.version
            row.started_at = record.started_at
            row.last_seen = record.last_seen
            row.leads = list(record.leads)
            row.coverage = record.coverage
            row.renew_ms = renew_ms(record.renew_every)
            row.run = record.run
            row.summary = dict(record.summary) if record.summary is not None else None
            session.add(row)
        return before

    def instances(self, limit: int, summaries: bool = True) -> tuple[InstanceRecord, ...]:
        order = (col(InstanceRow.last_seen).desc(), col(InstanceRow.instance))
        with self.transaction("instances") as session:
            if summaries:
                rows = session.exec(select(InstanceRow).order_by(*order).limit(limit)).all()
                return tuple(instance_record(row) for row in rows)
            bare = (
                session.connection()
                .execute(
                    sql_select(
                        col(InstanceRow.instance),
                        col(InstanceRow.host),
                        col(InstanceRow.version),
                        col(InstanceRow.started_at),
                        col(InstanceRow.last_seen),
                        col(InstanceRow.leads),
                        col(InstanceRow.coverage),
                        col(InstanceRow.renew_ms),
                        col(InstanceRow.run),
                    )
                    .order_by(*order)
                    .limit(limit)
                )
                .all()
            )
            return tuple(
                InstanceRecord(
                    instance=instance,
                    host=host,
                    version=version,
                    started_at=started_at,
                    last_seen=last_seen,
                    leads=tuple(str(lead) for lead in leads),
                    coverage=coverage,
                    renew_every=renew_every(ms),
                    run=run,
                )
                for instance, host, version, started_at, last_seen, leads, coverage, ms, run in bare
            )

    def instance_summaries(self, names: tuple[str, ...]) -> dict[str, str]:
        if not names:
            return {}
        with self.transaction("instances") as session:
            texts = session.connection().execute(
                sql_select(col(InstanceRow.instance), cast(col(InstanceRow.summary), Text)).where(
                    col(InstanceRow.instance).in_(names), col(InstanceRow.summary).is_not(None)
                )
            )
            # a JSON null (what a row renewed without a summary may hold) is no summary
            return {str(name): str(text) for name, text in texts if text not in (None, "null")}

    def claim_due(
        self, owner: str, now: datetime, lease: timedelta, limit: int
    ) -> tuple[Claim, ...]:
        check_code(owner, operation="claim")
        with self.transaction("claim") as session:
            held_now = _lease_time(session, now)
            lease_free = or_(
                col(AttemptRow.lease_expires_at).is_(None),
                col(AttemptRow.lease_expires_at) <= held_now,
            )
            rows = session.exec(
                select(AttemptRow, EventRow)
                .join(EventRow, col(AttemptRow.event_id) == col(EventRow.id))
                .where(col(AttemptRow.outcome).is_(None), col(AttemptRow.due_at) <= now)
                .where(lease_free)
                .order_by(col(AttemptRow.due_at), col(AttemptRow.id))
                .limit(limit)
                .with_for_update(skip_locked=True, of=AttemptRow)
            ).all()
            claims: list[Claim] = []
            for attempt, event in rows:
                attempt.lease_owner = owner
                attempt.lease_expires_at = held_now + lease
                attempt.lease_token += 1
                session.add(attempt)
                assert attempt.id is not None
                assert event.id is not None
                claims.append(
                    Claim(
                        attempt_id=attempt.id,
                        attempt=attempt.attempt,
                        event_id=event.id,
                        incident_id=event.incident_id,
                        type=EventType(event.event_type),
                        revision=event.revision,
                        idempotency_key=event.idempotency_key,
                        payload=event.payload,
                        due_at=attempt.due_at,
                        lease_owner=owner,
                        lease_expires_at=now + lease,  # the holder's deadline, by its clock
                        lease_token=attempt.lease_token,
                    )
                )
            return tuple(claims)

    def _held(
        self, session: Session, claim: Claim, outcome: AttemptOutcome | None
    ) -> AttemptRow | None:
        """The attempt while ``claim``'s lease holds it; on an attempt cancelled in flight under
        the same lease a delivery still lands (the request went out), and so does word that it
        never reached the person (refused for good, or given back unsent), which ends the doubt
        its lease left; a retryable failure may have reached the receiver and is not taken."""
        attempt = session.get(AttemptRow, claim.attempt_id, with_for_update=True)
        if (
            attempt is None
            or attempt.lease_owner != claim.lease_owner
            or attempt.lease_token != claim.lease_token
        ):
            return None
        if attempt.outcome is None:
            return attempt
        late = outcome in AFTER_CANCEL
        return attempt if late and attempt.outcome == AttemptOutcome.CANCELLED.value else None

    def finish(
        self,
        claim: Claim,
        outcome: AttemptOutcome | None,
        now: datetime,
        *,
        failure: str | None = None,
        http_status: int | None = None,
        retry_at: datetime | None = None,
        sink: str | None = None,
    ) -> bool:
        """Record how a held attempt ended (``None``: released unsent); ``False`` if not held."""
        for code in (failure, sink):
            if code is not None:
                check_code(code, operation="finish")
        if retry_at is not None and retry_at.utcoffset() is None:
            raise JournalRefusedError("finish", "naive_time")
        with self.transaction("finish") as session:
            attempt = self._held(session, claim, outcome)
            if attempt is None:
                return False
            refused_after_cancel = (
                attempt.outcome == AttemptOutcome.CANCELLED.value
                and outcome is AttemptOutcome.PERMANENT
            )
            if outcome is None or refused_after_cancel:
                attempt.lease_owner = None  # given back, or a cancelled one never reached anyone:
                attempt.lease_expires_at = None  # the doubt its lease left ends
                session.add(attempt)
                return not refused_after_cancel  # a refusal is not recorded over the cancel
            attempt.outcome = outcome.value
            attempt.failure_class = failure
            attempt.http_status = http_status
            attempt.sink_generation = sink
            attempt.finished_at = now
            session.add(attempt)
            session.flush()  # the outstanding-attempt index must see this one finished first
            event = session.get(EventRow, attempt.event_id)
            assert event is not None
            if outcome is AttemptOutcome.DELIVERED:
                event.state = EventState.DELIVERED.value
                event.delivered_at = now
            elif outcome is AttemptOutcome.PERMANENT:
                event.state = EventState.FAILED.value
            elif retry_at is not None:
                session.add(
                    AttemptRow(
                        event_id=attempt.event_id,
                        attempt=attempt.attempt + 1,
                        due_at=retry_at,
                        created_at=now,
                    )
                )
            session.add(event)
            return True

    def stats(self) -> JournalStats:
        with self.transaction("stats") as session:
            depth = session.exec(
                select(func.count())
                .select_from(AttemptRow)
                .where(col(AttemptRow.outcome).is_(None))
            ).one()
            last = session.exec(select(func.max(EventRow.delivered_at))).one()
            return JournalStats(queue_depth=depth, last_delivered_at=last)

    def purge(self, resolved_before: datetime, limit: int) -> int:
        if resolved_before.utcoffset() is None:
            raise JournalRefusedError("purge", "naive_time")
        with self.transaction("purge") as session:
            purged = purge_resolved(session, resolved_before, limit)
            compact_reminders(session, limit)
            return purged


def _lease_time(session: Session, now: datetime) -> datetime:
    """The time leases are judged by: PostgreSQL's own clock, which every instance sharing the
    journal reads alike (a host whose clock runs ahead would otherwise take a lease another
    instance still holds, and send its event a second time); on SQLite, one host's journal, the
    caller's ``now``."""
    if session.get_bind().dialect.name != "postgresql":
        return now
    moment: datetime = session.exec(select(func.clock_timestamp())).one()
    return moment.astimezone(UTC)
