"""7b: the journal's retention, run on the fake, on SQLite and on PostgreSQL: resolved incidents
past it are deleted with their events and attempts, in bounded batches, oldest first; nothing
open or still pending goes; and a restart's generations stay safe without reading the history."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason
from fleetd.journal.values import EventState, EventType, IncidentChange, NewEvent

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]

DAY = timedelta(days=1)
LEASE = timedelta(seconds=30)


def opened(subject: str, **changes: object) -> IncidentChange:
    return IncidentChange(incident=make_incident(subject, **changes))  # type: ignore[arg-type]


def event(kind: EventType = EventType.OPEN) -> NewEvent:
    return NewEvent(type=kind, payload={"event": kind.value})


def resolved(change: IncidentChange, at: datetime) -> IncidentChange:
    """``change`` resolved at ``at``; its ``open`` (revision 1) is cancelled if still unsent."""
    return dataclasses.replace(
        change, resolved_at=at, resolve_reason=ResolveReason.CLEARED, cancel=(1,)
    )


async def delivered_and_resolved(journal_kit: JournalKit, subject: str, at: datetime) -> str:
    """An incident whose ``open`` was delivered and whose ``resolved`` was delivered at ``at``."""
    journal = journal_kit.build()
    told_at = at - timedelta(hours=1)
    change = opened(subject, opened_at=told_at)
    await journal.record(change, [event()], now=told_at)
    (claim,) = await journal.claim_due("w", now=told_at, lease=LEASE)
    assert await journal.complete(claim, now=told_at, http_status=204)
    await journal.record(resolved(change, at), [event(EventType.RESOLVED)], now=at)
    (claim,) = await journal.claim_due("w", now=at, lease=LEASE)
    assert await journal.complete(claim, now=at, http_status=204)
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert [e.state for e in stored.events] == [EventState.DELIVERED, EventState.DELIVERED]
    return change.incident.id


async def test_purge_deletes_resolved_incidents_past_the_cutoff_only(
    journal_kit: JournalKit,
) -> None:
    """Incidents resolved before the cutoff go with their events and attempts; one resolved
    after it and an open one stay, with their events."""
    journal = journal_kit.build()
    old = await delivered_and_resolved(journal_kit, "sess_old", T0)
    recent = await delivered_and_resolved(journal_kit, "sess_recent", T0 + 3 * DAY)
    still_open = opened("sess_open", opened_at=T0 - DAY)
    await journal.record(still_open, [event()], now=T0 - DAY)
    assert await journal.purge(resolved_before=T0 + DAY) == 1
    assert await journal.get(old) is None
    kept = await journal.get(recent)
    assert kept is not None
    assert [e.type for e in kept.events] == [EventType.OPEN, EventType.RESOLVED]
    assert (await journal.get(still_open.incident.id)) is not None
    assert (await journal.stats()).queue_depth == 1  # the open incident's pending event
    listed = await journal.recent(resolved_since=T0 - 10 * DAY)
    assert {s.incident.id for s in listed} == {recent, still_open.incident.id}
    assert await journal.purge(resolved_before=T0 + DAY) == 0


async def test_purge_works_in_batches_oldest_first(journal_kit: JournalKit) -> None:
    """``limit`` bounds one call; the oldest resolutions go first."""
    journal = journal_kit.build()
    ids = [
        await delivered_and_resolved(journal_kit, f"sess_{n}", T0 + n * timedelta(minutes=1))
        for n in range(5)
    ]
    cutoff = T0 + DAY
    assert await journal.purge(resolved_before=cutoff, limit=2) == 2
    assert [await journal.get(i) is None for i in ids] == [True, True, False, False, False]
    assert await journal.purge(resolved_before=cutoff, limit=2) == 2
    assert await journal.purge(resolved_before=cutoff, limit=2) == 1
    assert await journal.purge(resolved_before=cutoff, limit=0) == 0


async def test_an_incident_with_a_pending_event_is_kept_until_its_delivery_ends(
    journal_kit: JournalKit,
) -> None:
    """A resolution still owed to a person is not deleted; once delivered it is."""
    journal = journal_kit.build()
    change = opened("sess_owed")
    await journal.record(change, [event()], now=T0)
    (claim,) = await journal.claim_due("w", now=T0, lease=LEASE)
    await journal.complete(claim, now=T0, http_status=204)
    await journal.record(
        dataclasses.replace(change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED),
        [event(EventType.RESOLVED)],
        now=T0,
    )
    later = T0 + 40 * DAY
    assert await journal.purge(resolved_before=later) == 0
    assert len((await journal.load_open()).pending_resolutions) == 1
    (owed,) = await journal.claim_due("w", now=later, lease=LEASE)
    await journal.complete(owed, now=later, http_status=204)
    assert await journal.purge(resolved_before=later) == 1
    assert await journal.get(change.incident.id) is None


async def test_generations_after_a_purge_never_collide_with_a_stored_incident(
    journal_kit: JournalKit,
) -> None:
    """``generations`` lists only keys with an open incident or a pending resolution; the floor
    covers every generation still stored, so the next generation of any key records, before
    and after a purge."""
    journal = journal_kit.build()
    first = await delivered_and_resolved(journal_kit, "sess_a", T0)
    second = opened("sess_a", generation=2, opened_at=T0 + DAY)
    await journal.record(second, [event()], now=T0 + DAY)
    await journal.record(resolved(second, T0 + 2 * DAY), now=T0 + 2 * DAY)
    other = opened("sess_b", generation=3, opened_at=T0)
    await journal.record(other, [event()], now=T0)
    snapshot = await journal.load_open()
    assert snapshot.generations == {other.incident.key: 3}
    assert snapshot.generation_floor == 3
    key = second.incident.key
    floor = snapshot.generation_floor
    again = opened("sess_a", generation=floor + 1, opened_at=T0 + 3 * DAY)
    await journal.record(again, now=T0 + 3 * DAY)
    assert await journal.purge(resolved_before=T0 + 10 * DAY) == 2
    assert await journal.get(first) is None
    after = await journal.load_open()
    assert after.generations == {key: floor + 1, other.incident.key: 3}
    assert after.generation_floor == floor + 1


async def test_purge_refuses_a_naive_cutoff(journal_kit: JournalKit) -> None:
    """A purge with a naive (zone-less) cutoff is refused."""
    journal = journal_kit.build()
    with pytest.raises(JournalRefusedError):
        await journal.purge(resolved_before=T0.replace(tzinfo=None))


async def test_an_open_incident_keeps_only_its_last_delivered_reminder(
    journal_kit: JournalKit,
) -> None:
    """An incident that stays open while a sink re-posts it every minute does not grow: purge
    deletes each delivered ``reminder`` a later delivered one supersedes (in batches of
    ``limit``), keeps the ``open``, the last reminder and one still pending, and leaves the
    revisions and the last delivery time the policy reads as they were."""
    journal = journal_kit.build()
    change = opened("sess_open", opened_at=T0)
    await journal.record(change, [event()], now=T0)
    (claim,) = await journal.claim_due("w", now=T0, lease=LEASE)
    assert await journal.complete(claim, now=T0, http_status=204)
    revision = 1
    for minute in range(1, 6):
        at = T0 + minute * timedelta(minutes=1)
        recorded = await journal.settle(
            change.incident.id, now=at, after_revision=revision, events=[event(EventType.REMINDER)]
        )
        assert recorded is not None
        revision = recorded[0].revision
        (claim,) = await journal.claim_due("w", now=at, lease=LEASE)
        assert await journal.complete(claim, now=at, http_status=204)
    last_told = T0 + 5 * timedelta(minutes=1)
    pending_at = last_told + timedelta(minutes=1)
    recorded = await journal.settle(
        change.incident.id,
        now=pending_at,
        after_revision=revision,
        events=[event(EventType.REMINDER)],
    )
    assert recorded is not None
    assert await journal.purge(resolved_before=T0 + DAY, limit=3) == 0
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert [e.revision for e in stored.events] == [1, 5, 6, 7]  # reminders 2-4 went first
    assert await journal.purge(resolved_before=T0 + DAY, limit=3) == 0
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert [(e.type, e.revision, e.state) for e in stored.events] == [
        (EventType.OPEN, 1, EventState.DELIVERED),
        (EventType.REMINDER, 6, EventState.DELIVERED),
        (EventType.REMINDER, 7, EventState.PENDING),
    ]
    assert stored.events[1].delivered_at == last_told
    assert (await journal.stats()).queue_depth == 1
