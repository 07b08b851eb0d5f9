"""The journal's outbox additions, run on the fake, on SQLite and on PostgreSQL: ``settle`` (the
human-leg policy's plan for a stored incident: events appended, revisions cancelled or re-armed,
only while the incident's latest revision is the one the plan was made from), which target
refused an event, and the operator's recent list."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason
from fleetd.journal.values import EventState, EventType, IncidentChange, NewEvent, Routing

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]

LEASE = timedelta(seconds=30)
HOUR = timedelta(hours=1)


def opened(subject: str = "sess_1", **changes: object) -> IncidentChange:
    return IncidentChange(incident=make_incident(subject, **changes))  # type: ignore[arg-type]


def event(kind: EventType = EventType.OPEN) -> NewEvent:
    return NewEvent(type=kind, payload={"event": kind.value})


def resolved(change: IncidentChange, at: datetime | None = T0) -> IncidentChange:
    return dataclasses.replace(change, resolved_at=at, resolve_reason=ResolveReason.CLEARED)


async def test_settle_adds_the_next_revision_without_touching_the_incident(
    journal_kit: JournalKit,
) -> None:
    """A settled reminder takes the next revision, due at once; routing and severity stay as
    recorded."""
    journal = journal_kit.build()
    routing = Routing(owner="lead", reason="sole_owner_unhealthy", generation=1)
    change = dataclasses.replace(opened(), routing=routing)
    await journal.record(change, [event()], now=T0)
    added = await journal.settle(
        change.incident.id, now=T0 + HOUR, after_revision=1, events=[event(EventType.REMINDER)]
    )
    assert added is not None
    (reminder,) = added
    assert (reminder.type, reminder.revision, reminder.due_at) == (
        EventType.REMINDER,
        2,
        T0 + HOUR,
    )
    stored = await journal_kit.build().get(change.incident.id)
    assert stored is not None
    assert stored.routing == routing
    assert stored.incident == change.incident
    assert [(e.type, e.revision) for e in stored.events] == [
        (EventType.OPEN, 1),
        (EventType.REMINDER, 2),
    ]


async def test_settle_writes_nothing_once_the_revision_moved_on(journal_kit: JournalKit) -> None:
    """Two writers that read revision 1: the first wins, the second gets ``None`` and neither
    its event, nor its cancel, nor its re-arm is written."""
    journal, other = journal_kit.build(), journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    (claim,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert await journal.fail(claim, now=T0, failure="http_4xx", http_status=404)
    incident_id = change.incident.id
    first = await journal.settle(
        incident_id, now=T0, after_revision=1, events=[event(EventType.REMINDER)]
    )
    second = await other.settle(
        incident_id,
        now=T0,
        after_revision=1,
        events=[event(EventType.REMINDER)],
        cancel=[2],
        rearm=[1],
    )
    assert first is not None
    assert [r.revision for r in first] == [2]
    assert second is None
    stored = await journal.get(incident_id)
    assert stored is not None
    assert [(e.revision, e.state) for e in stored.events] == [
        (1, EventState.FAILED),
        (2, EventState.PENDING),
    ]


async def test_settle_may_close_a_resolved_incident_but_not_an_unknown_one(
    journal_kit: JournalKit,
) -> None:
    """A late ``resolved`` lands on a resolved incident (the incident stays resolved); an
    unknown incident gets ``None`` and nothing."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    await journal.record(resolved(change), now=T0)
    late = [event(EventType.RESOLVED)]
    assert await journal.settle("inc_missing", now=T0, after_revision=0, events=late) is None
    added = await journal.settle(change.incident.id, now=T0, after_revision=1, events=late)
    assert added is not None
    (closing,) = added
    assert (closing.type, closing.revision) == (EventType.RESOLVED, 2)
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert (stored.resolved_at, stored.resolve_reason) == (T0, ResolveReason.CLEARED)


async def test_settle_refuses_a_payload_out_of_bounds_and_writes_nothing(
    journal_kit: JournalKit,
) -> None:
    """Refused whole: the cancel that came with the bad event is not carried out either."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    bad = NewEvent(type=EventType.REMINDER, payload={"note": "line one\nline two"})
    with pytest.raises(JournalRefusedError):
        await journal.settle(change.incident.id, now=T0, after_revision=1, events=[bad], cancel=[1])
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert [e.state for e in stored.events] == [EventState.PENDING]
    assert (await journal.stats()).queue_depth == 1


async def test_settle_cancels_and_rearms_in_one_write(journal_kit: JournalKit) -> None:
    """In one call: a pending revision cancelled with its attempt, a failed one re-armed (due at
    ``now``, numbered one up), a listed delivered one left alone, and a new event appended."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event(), event(EventType.REMINDER)], now=T0)
    first, second = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert await journal.complete(first, now=T0, http_status=200)
    assert await journal.fail(second, now=T0, failure="http_4xx", http_status=404)
    await journal.record(change, [event(EventType.REMINDER)], now=T0)
    added = await journal.settle(
        change.incident.id,
        now=T0 + HOUR,
        after_revision=3,
        events=[event(EventType.REMINDER)],
        cancel=[1, 3],
        rearm=[1, 2],
    )
    assert added is not None
    assert [r.revision for r in added] == [4]
    stored = await journal_kit.build().get(change.incident.id)
    assert stored is not None
    assert [(e.revision, e.state) for e in stored.events] == [
        (1, EventState.DELIVERED),
        (2, EventState.PENDING),
        (3, EventState.CANCELLED),
        (4, EventState.PENDING),
    ]
    due = await journal.claim_due("worker-a", now=T0 + HOUR, lease=LEASE)
    assert sorted((c.revision, c.attempt, c.due_at) for c in due) == [
        (2, 2, T0 + HOUR),
        (4, 1, T0 + HOUR),
    ]


async def test_settle_rearms_only_its_own_incident(journal_kit: JournalKit) -> None:
    """A replay of one incident re-arms only its failed events."""
    journal = journal_kit.build()
    first, second = opened("sess_1"), opened("sess_2")
    for change in (first, second):
        await journal.record(change, [event()], now=T0)
    for claim in await journal.claim_due("worker-a", now=T0, lease=LEASE):
        assert await journal.fail(claim, now=T0, failure="http_4xx", http_status=404)
    assert await journal.settle(first.incident.id, now=T0 + HOUR, after_revision=1, rearm=[1]) == ()
    (claim,) = await journal.claim_due("worker-a", now=T0 + HOUR, lease=LEASE)
    assert (claim.incident_id, claim.attempt) == (first.incident.id, 2)
    stored = await journal.get(second.incident.id)
    assert stored is not None
    assert stored.events[0].state is EventState.FAILED


async def test_a_failed_event_names_the_target_that_refused_it(journal_kit: JournalKit) -> None:
    """``failed_by`` is the refusing target's generation (``None`` when unnamed), also after a
    reload; a URL is refused as a target's name."""
    journal = journal_kit.build()
    changes = [opened(f"sess_{n}") for n in range(3)]
    for change in changes:
        await journal.record(change, [event()], now=T0)
    claims = sorted(
        await journal.claim_due("worker-a", now=T0, lease=LEASE), key=lambda c: c.incident_id
    )
    sinks = {claims[0].incident_id: "snk_old", claims[1].incident_id: "snk_new"}
    for claim in claims[:2]:
        assert await journal.fail(
            claim, now=T0, failure="http_4xx", http_status=400, sink=sinks[claim.incident_id]
        )
    with pytest.raises(JournalRefusedError):
        await journal.fail(claims[2], now=T0, failure="http_4xx", sink="https://hooks.example/x")
    assert await journal.fail(claims[2], now=T0, failure="http_4xx", http_status=400)
    reader = journal_kit.build()
    named = {}
    for claim in claims:
        stored = await reader.get(claim.incident_id)
        assert stored is not None
        named[claim.incident_id] = stored.events[0].failed_by
    assert named == {**sinks, claims[2].incident_id: None}


async def test_recent_lists_open_then_recently_resolved_newest_first(
    journal_kit: JournalKit,
) -> None:
    """Open ones by opening time, then resolutions inside the window by resolution time; the
    limit cuts the tail; ``involving`` keeps what a lead owns or receives."""
    journal = journal_kit.build()
    old_open = opened("sess_1")
    new_open = opened("sess_2", opened_at=T0 + HOUR, owner="other")
    gone, fresh = opened("sess_3"), opened("sess_4")
    for change in (old_open, new_open, gone, fresh):
        await journal.record(change, now=T0)
    await journal.record(resolved(gone, T0 + HOUR), now=T0 + HOUR)
    await journal.record(resolved(fresh, T0 + 3 * HOUR), now=T0 + 3 * HOUR)
    received = dataclasses.replace(
        opened("sess_5", owner="other"),
        routing=Routing(owner="other", recipient="lead", reason="peer_owner_unhealthy"),
    )
    await journal.record(received, now=T0)

    def ids(found: tuple[object, ...]) -> list[str]:
        return [s.incident.id for s in found]  # type: ignore[attr-defined]

    window = await journal_kit.build().recent(resolved_since=T0 + 2 * HOUR)
    assert ids(window) == [
        new_open.incident.id,
        *sorted([old_open.incident.id, received.incident.id]),
        fresh.incident.id,
    ]
    wider = await journal.recent(resolved_since=T0, limit=5)
    assert ids(wider)[3:] == [fresh.incident.id, gone.incident.id]
    assert ids(await journal.recent(resolved_since=T0, limit=5 - 1))[-1] == fresh.incident.id
    mine = await journal.recent(resolved_since=T0, involving="lead")
    assert set(ids(mine)) == {
        old_open.incident.id,
        received.incident.id,
        gone.incident.id,
        fresh.incident.id,
    }
    assert await journal.recent(resolved_since=T0, limit=0) == ()
