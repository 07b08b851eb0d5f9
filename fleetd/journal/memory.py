"""``InMemoryJournal``: the fake journal for core and runtime unit tests.

It keeps the same rows the SQL tables hold, in dicts, and passes the same contract tests
(``tests/contract/test_journal_contract.py``): refusals, revisions, leases, fencing, cancel and
re-arm behave exactly as in :class:`~fleetd.journal.sql.SqlJournal`. A record that is refused
changes nothing, as a rolled-back transaction would. Nothing survives the object.

``fail_with`` makes every following call raise the given error until it is set back to ``None``,
for tests of a journal that is down.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetd.errors import JournalError, JournalRefusedError
from fleetd.health.audience import lead_may_see
from fleetd.health.incidents import IncidentKey
from fleetd.journal.memory_rows import AttemptEntry, EventEntry, stored_incident
from fleetd.journal.port import (
    DEFAULT_CLAIM_LIMIT,
    DEFAULT_PURGE_LIMIT,
    DEFAULT_RECENT_LIMIT,
    Journal,
)
from fleetd.journal.values import (
    AFTER_CANCEL,
    MAX_INSTANCES,
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
    idempotency_key,
    key_namespace,
)
from fleetd.observe import Around, direct, observed

__all__ = ["InMemoryJournal"]

_UNSENT = (EventState.PENDING, EventState.FAILED)


class InMemoryJournal:
    """A :class:`~fleetd.journal.port.Journal` in memory."""

    def __init__(self) -> None:
        self.around: Around = direct
        self._incidents: dict[str, IncidentChange] = {}
        self._events: dict[int, EventEntry] = {}
        self._attempts: dict[int, AttemptEntry] = {}
        self._ids = 0
        self._instances: dict[str, InstanceRecord] = {}
        self.fail_with: JournalError | None = None

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _check_up(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def observe(self, around: Around) -> None:
        self.around = around

    @observed
    async def record(
        self, change: IncidentChange, events: Sequence[NewEvent] = (), *, now: datetime
    ) -> tuple[RecordedEvent, ...]:
        self._check_up()
        check_change(change)
        for event in events:
            check_event(event)
        self._check_conflicts(change)
        incident_id = change.incident.id
        first = self._incidents.get(incident_id)
        if first is not None:  # the instance that inserted it stays its owner
            change = dataclasses.replace(change, instance=first.instance)
        self._incidents[incident_id] = change
        self._cancel(incident_id, change.cancel)
        return self._add_events(incident_id, events, now)

    def _add_events(
        self, incident_id: str, events: Sequence[NewEvent], now: datetime
    ) -> tuple[RecordedEvent, ...]:
        revision = self._last_revision(incident_id)
        recorded: list[RecordedEvent] = []
        for event in events:
            revision += 1
            due = event.due_at or now
            row = EventEntry(
                id=self._next_id(),
                incident_id=incident_id,
                type=event.type,
                payload=json.loads(json.dumps(event.payload)),  # as a database returns it
                revision=revision,
                key=idempotency_key(incident_id, event.type, revision),
                state=EventState.PENDING,
                created_at=now,
            )
            self._events[row.id] = row
            self._add_attempt(row.id, 1, due)
            recorded.append(
                RecordedEvent(
                    id=row.id,
                    incident_id=incident_id,
                    type=event.type,
                    revision=revision,
                    idempotency_key=row.key,
                    due_at=due,
                )
            )
        return tuple(recorded)

    def _last_revision(self, incident_id: str) -> int:
        return max((e.revision for e in self._of(incident_id)), default=0)

    @observed
    async def settle(
        self,
        incident_id: str,
        *,
        now: datetime,
        after_revision: int,
        events: Sequence[NewEvent] = (),
        cancel: Sequence[int] = (),
        rearm: Sequence[int] = (),
    ) -> tuple[RecordedEvent, ...] | None:
        self._check_up()
        for event in events:
            check_event(event)
        if incident_id not in self._incidents or self._last_revision(incident_id) != after_revision:
            return None
        self._cancel(incident_id, cancel)
        for entry in self._of(incident_id):
            if entry.revision in rearm and entry.state is EventState.FAILED:
                last = max(a.attempt for a in self._attempts.values() if a.event_id == entry.id)
                self._add_attempt(entry.id, last + 1, now)
                entry.state = EventState.PENDING
        return self._add_events(incident_id, events, now)

    def _cancel(self, incident_id: str, revisions: Sequence[int]) -> None:
        for entry in self._of(incident_id):
            if entry.revision in revisions and entry.state in _UNSENT:
                entry.state = EventState.CANCELLED
                for attempt in self._attempts.values():
                    if attempt.event_id == entry.id and attempt.outcome is None:
                        attempt.outcome = AttemptOutcome.CANCELLED

    def _check_conflicts(self, change: IncidentChange) -> None:
        incident = change.incident
        stored = self._incidents.get(incident.id)
        if stored is not None and (
            stored.incident.key != incident.key or stored.incident.generation != incident.generation
        ):
            raise JournalRefusedError("record", "incident_key_changed")
        owner = stored.instance if stored is not None else change.instance
        space = key_namespace(incident.scope, owner)
        for other in self._incidents.values():
            if other.incident.id == incident.id or other.incident.key != incident.key:
                continue
            if key_namespace(other.incident.scope, other.instance) != space:
                continue  # another instance's lead, link or profile of the same name
            if other.incident.generation == incident.generation:
                raise JournalRefusedError("record", "generation_conflict")
            if other.resolved_at is None and change.resolved_at is None:
                raise JournalRefusedError("record", "open_key_conflict")

    def _of(self, incident_id: str) -> list[EventEntry]:
        return [e for e in self._events.values() if e.incident_id == incident_id]

    def _add_attempt(self, event_id: int, number: int, due_at: datetime) -> None:
        attempt = AttemptEntry(id=self._next_id(), event_id=event_id, attempt=number, due_at=due_at)
        self._attempts[attempt.id] = attempt

    @observed
    async def get(self, incident_id: str) -> StoredIncident | None:
        self._check_up()
        change = self._incidents.get(incident_id)
        return None if change is None else self._stored(change)

    def _stored(self, change: IncidentChange) -> StoredIncident:
        events = self._of(change.incident.id)
        ids = {e.id for e in events}
        return stored_incident(
            change, events, [a for a in self._attempts.values() if a.event_id in ids]
        )

    @observed
    async def load_open(
        self, *, told_since: datetime | None = None, instance: str | None = None
    ) -> JournalSnapshot:
        self._check_up()
        every = sorted(
            self._incidents.values(), key=lambda c: (c.incident.opened_at, c.incident.id)
        )
        changes = [c for c in every if instance is None or c.instance in (None, instance)]
        opened = [c for c in changes if c.resolved_at is None]
        pending = [
            c
            for c in changes
            if c.resolved_at is not None and self._unsettled(c.incident.id, told_since)
        ]
        generations: dict[IncidentKey, int] = {}
        for change in (*opened, *pending):
            key = change.incident.key
            generations[key] = max(generations.get(key, 0), change.incident.generation)
        return JournalSnapshot(
            open_incidents=tuple(self._stored(c) for c in opened),
            pending_resolutions=tuple(self._stored(c) for c in pending),
            generations=generations,
            generation_floor=max((c.incident.generation for c in every), default=0),
        )

    @observed
    async def renew_instance(self, record: InstanceRecord) -> InstanceRecord | None:
        self._check_up()
        check_instance(record)
        before = self._instances.get(record.instance)
        self._instances[record.instance] = record
        return None if before is None else dataclasses.replace(before, summary=None)

    @observed
    async def instances(
        self, *, limit: int = MAX_INSTANCES, summaries: bool = True
    ) -> tuple[InstanceRecord, ...]:
        self._check_up()
        rows = sorted(self._instances.values(), key=lambda r: r.instance)
        rows.sort(key=lambda r: r.last_seen, reverse=True)
        if not summaries:
            rows = [dataclasses.replace(r, summary=None) for r in rows]
        return tuple(rows[:limit])

    @observed
    async def instance_summaries(self, names: Collection[str]) -> Mapping[str, str]:
        self._check_up()
        return {
            name: json.dumps(row.summary)
            for name in names
            if (row := self._instances.get(name)) is not None and row.summary is not None
        }

    @observed
    async def recent(
        self,
        *,
        resolved_since: datetime,
        limit: int = DEFAULT_RECENT_LIMIT,
        involving: str | None = None,
    ) -> tuple[StoredIncident, ...]:
        self._check_up()
        changes = [
            c
            for c in self._incidents.values()
            if involving is None
            or lead_may_see(
                involving,
                scope=c.incident.scope,
                subject=c.incident.subject,
                owner=c.effective_routing.owner,
                recipient=c.effective_routing.recipient,
            )
        ]
        opened = sorted(
            (c for c in changes if c.resolved_at is None),
            key=lambda c: (-c.incident.opened_at.timestamp(), c.incident.id),
        )
        resolved = sorted(
            (c for c in changes if c.resolved_at is not None and c.resolved_at >= resolved_since),
            key=lambda c: (-c.resolved_at.timestamp() if c.resolved_at else 0.0, c.incident.id),
        )
        return tuple(self._stored(c) for c in [*opened, *resolved][: max(limit, 0)])

    @observed
    async def claim_due(
        self, owner: str, *, now: datetime, lease: timedelta, limit: int = DEFAULT_CLAIM_LIMIT
    ) -> tuple[Claim, ...]:
        self._check_up()
        check_code(owner, operation="claim")
        due = sorted(
            (
                a
                for a in self._attempts.values()
                if a.outcome is None
                and a.due_at <= now
                and (a.lease_expires_at is None or a.lease_expires_at <= now)
            ),
            key=lambda a: (a.due_at, a.id),
        )[:limit]
        claims: list[Claim] = []
        for attempt in due:
            attempt.lease_owner = owner
            attempt.lease_expires_at = now + lease
            attempt.lease_token += 1
            event = self._events[attempt.event_id]
            claims.append(
                Claim(
                    attempt_id=attempt.id,
                    attempt=attempt.attempt,
                    event_id=event.id,
                    incident_id=event.incident_id,
                    type=event.type,
                    revision=event.revision,
                    idempotency_key=event.key,
                    payload=event.payload,
                    due_at=attempt.due_at,
                    lease_owner=owner,
                    lease_expires_at=attempt.lease_expires_at,
                    lease_token=attempt.lease_token,
                )
            )
        return tuple(claims)

    def _unsettled(self, incident_id: str, told_since: datetime | None) -> bool:
        events = self._of(incident_id)
        if any(e.state in _UNSENT for e in events):
            return True
        if told_since is None or any(e.type is EventType.RESOLVED for e in events):
            return False
        return any(e.delivered_at is not None and e.delivered_at >= told_since for e in events)

    def _held(self, claim: Claim, outcome: AttemptOutcome | None = None) -> AttemptEntry | None:
        attempt = self._attempts.get(claim.attempt_id)
        if (
            attempt is None
            or attempt.lease_owner != claim.lease_owner
            or attempt.lease_token != claim.lease_token
        ):
            return None
        if attempt.outcome is None:
            return attempt
        # cancelled in flight: a delivery lands, a refusal for good ends the doubt (see finish)
        late = outcome in AFTER_CANCEL
        return attempt if late and attempt.outcome is AttemptOutcome.CANCELLED else None

    def _finish(
        self,
        claim: Claim,
        outcome: AttemptOutcome,
        *,
        failure: str | None = None,
        http_status: int | None = None,
    ) -> AttemptEntry | None:
        self._check_up()
        if failure is not None:
            check_code(failure, operation="finish")
        attempt = self._held(claim, outcome)
        if attempt is None:
            return None
        if attempt.outcome is AttemptOutcome.CANCELLED and outcome is not AttemptOutcome.DELIVERED:
            attempt.lease_owner = None  # refused: nothing reached the person, so the doubt its
            attempt.lease_expires_at = None  # lease left ends; the attempt stays cancelled
            return None
        attempt.outcome = outcome
        attempt.failure = failure
        attempt.http_status = http_status
        return attempt

    @observed
    async def complete(self, claim: Claim, *, now: datetime, http_status: int | None) -> bool:
        attempt = self._finish(claim, AttemptOutcome.DELIVERED, http_status=http_status)
        if attempt is None:
            return False
        event = self._events[attempt.event_id]
        event.state = EventState.DELIVERED
        event.delivered_at = now
        return True

    @observed
    async def reschedule(
        self,
        claim: Claim,
        *,
        now: datetime,
        due_at: datetime,
        failure: str,
        http_status: int | None = None,
    ) -> bool:
        if due_at.utcoffset() is None:
            raise JournalRefusedError("finish", "naive_time")
        attempt = self._finish(
            claim, AttemptOutcome.RETRY, failure=failure, http_status=http_status
        )
        if attempt is None:
            return False
        self._add_attempt(attempt.event_id, attempt.attempt + 1, due_at)
        return True

    @observed
    async def fail(
        self,
        claim: Claim,
        *,
        now: datetime,
        failure: str,
        http_status: int | None = None,
        sink: str | None = None,
    ) -> bool:
        if sink is not None:
            check_code(sink, operation="finish")
        attempt = self._finish(
            claim, AttemptOutcome.PERMANENT, failure=failure, http_status=http_status
        )
        if attempt is None:
            return False
        attempt.sink = sink
        self._events[attempt.event_id].state = EventState.FAILED
        return True

    @observed
    async def release(self, claim: Claim, *, now: datetime) -> bool:
        self._check_up()
        attempt = self._held(claim)
        if attempt is None:
            return False
        attempt.lease_owner = None
        attempt.lease_expires_at = None
        return True

    @observed
    async def stats(self) -> JournalStats:
        self._check_up()
        delivered = [e.delivered_at for e in self._events.values() if e.delivered_at is not None]
        return JournalStats(
            queue_depth=sum(1 for a in self._attempts.values() if a.outcome is None),
            last_delivered_at=max(delivered, default=None),
        )

    @observed
    async def purge(self, *, resolved_before: datetime, limit: int = DEFAULT_PURGE_LIMIT) -> int:
        self._check_up()
        if resolved_before.utcoffset() is None:
            raise JournalRefusedError("purge", "naive_time")
        old = sorted(
            (
                c
                for c in self._incidents.values()
                if c.resolved_at is not None
                and c.resolved_at < resolved_before
                and all(e.state is not EventState.PENDING for e in self._of(c.incident.id))
            ),
            key=lambda c: (c.resolved_at, c.incident.id),
        )[: max(limit, 0)]
        for change in old:
            self._drop({e.id for e in self._of(change.incident.id)})
            del self._incidents[change.incident.id]
        self._drop(self._superseded_reminders(limit))
        return len(old)

    def _drop(self, gone: set[int]) -> None:
        """Delete the events ``gone`` with their attempts."""
        self._attempts = {i: a for i, a in self._attempts.items() if a.event_id not in gone}
        self._events = {i: e for i, e in self._events.items() if i not in gone}

    def _superseded_reminders(self, limit: int) -> set[int]:
        """Up to ``limit`` delivered reminders a later delivered reminder of the same incident
        supersedes (by incident, oldest revision first)."""
        delivered = [
            e
            for e in self._events.values()
            if e.type is EventType.REMINDER and e.state is EventState.DELIVERED
        ]
        last: dict[str, int] = {}
        for entry in delivered:
            last[entry.incident_id] = max(last.get(entry.incident_id, 0), entry.revision)
        old = sorted(
            (e.incident_id, e.revision, e.id) for e in delivered if e.revision < last[e.incident_id]
        )
        return {entry_id for _, _, entry_id in old[: max(limit, 0)]}

    async def close(self) -> None:
        return None


if TYPE_CHECKING:
    _conforms: type[Journal] = InMemoryJournal  # mypy checks the class against the port
