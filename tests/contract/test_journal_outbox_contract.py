"""The journal's outbox additions, run on the fake, on SQLite and on PostgreSQL: appending events
to a stored incident, the operator's recent list, and re-arming by incident or by sink target."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason
from fleetd.journal.records import EventState, EventType, IncidentChange, NewEvent, Routing

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


def resolved(change: IncidentChange, at: object = T0) -> IncidentChange:
    return dataclasses.replace(change, resolved_at=at, resolve_reason=ResolveReason.CLEARED)


async def test_append_adds_the_next_revision_without_touching_the_incident(
    journal_kit: JournalKit,
) -> None:
    """An appended reminder takes the next revision; routing and severity stay as recorded."""
    journal = journal_kit.build()
    routing = Routing(owner="lead", reason="sole_owner_unhealthy", generation=1)
    change = dataclasses.replace(opened(), routing=routing)
    await journal.record(change, [event()], now=T0)
    (reminder,) = await journal.append(
        change.incident.id, [event(EventType.REMINDER)], now=T0 + HOUR, after_revision=1
    )
    assert (reminder.type, reminder.revision, reminder.due_at) == (
        EventType.REMINDER,
        2,
        T0 + HOUR,
    )
    stored = await journal_kit.build().get(change.incident.id)
    assert stored is not None
    assert stored.routing == routing
    assert [(e.type, e.revision) for e in stored.events] == [
        (EventType.OPEN, 1),
        (EventType.REMINDER, 2),
    ]


async def test_append_writes_nothing_once_the_revision_moved_on(journal_kit: JournalKit) -> None:
    """Two appenders that read revision 1: the first wins, the second gets ``()``."""
    journal, other = journal_kit.build(), journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    first = await journal.append(
        change.incident.id, [event(EventType.REMINDER)], now=T0, after_revision=1
    )
    second = await other.append(
        change.incident.id, [event(EventType.REMINDER)], now=T0, after_revision=1
    )
    assert [r.revision for r in first] == [2]
    assert second == ()
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert len(stored.events) == 2


async def test_append_to_a_resolved_or_unknown_incident_writes_nothing_unless_asked(
    journal_kit: JournalKit,
) -> None:
    """A reminder never lands on a resolved incident; a late ``resolved`` may, when asked."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    await journal.record(resolved(change), now=T0)
    late = [event(EventType.RESOLVED)]
    assert await journal.append(change.incident.id, late, now=T0, after_revision=1) == ()
    assert await journal.append("inc_missing", late, now=T0, after_revision=0) == ()
    (added,) = await journal.append(
        change.incident.id, late, now=T0, after_revision=1, require_open=False
    )
    assert (added.type, added.revision) == (EventType.RESOLVED, 2)


async def test_append_refuses_a_payload_out_of_bounds(journal_kit: JournalKit) -> None:
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    bad = NewEvent(type=EventType.REMINDER, payload={"note": "line one\nline two"})
    with pytest.raises(JournalRefusedError):
        await journal.append(change.incident.id, [bad], now=T0, after_revision=1)
    assert (await journal.stats()).queue_depth == 1


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


async def test_rearm_one_incident_leaves_the_others_failed(journal_kit: JournalKit) -> None:
    """A replay of one incident re-arms only its failed events."""
    journal = journal_kit.build()
    first, second = opened("sess_1"), opened("sess_2")
    for change in (first, second):
        await journal.record(change, [event()], now=T0)
    for claim in await journal.claim_due("worker-a", now=T0, lease=LEASE):
        assert await journal.fail(claim, now=T0, failure="http_4xx", http_status=404)
    assert await journal.rearm(now=T0 + HOUR, incident_id=first.incident.id) == 1
    assert await journal.rearm(now=T0 + HOUR, incident_id="inc_missing") == 0
    (claim,) = await journal.claim_due("worker-a", now=T0 + HOUR, lease=LEASE)
    assert (claim.incident_id, claim.attempt) == (first.incident.id, 2)
    stored = await journal.get(second.incident.id)
    assert stored is not None
    assert stored.events[0].state is EventState.FAILED


async def test_rearm_except_a_sink_keeps_what_that_target_refused(journal_kit: JournalKit) -> None:
    """After a config change, events another (or an unnamed) target refused come back; those the
    current target refused stay failed."""
    journal = journal_kit.build()
    changes = [opened(f"sess_{n}") for n in range(3)]
    for change in changes:
        await journal.record(change, [event()], now=T0)
    claims = sorted(
        await journal.claim_due("worker-a", now=T0, lease=LEASE), key=lambda c: c.incident_id
    )
    sinks = {claims[0].incident_id: "snk_old", claims[1].incident_id: "snk_new"}
    for claim in claims:
        assert await journal.fail(
            claim, now=T0, failure="http_4xx", http_status=400, sink=sinks.get(claim.incident_id)
        )
    assert await journal.rearm(now=T0 + HOUR, except_sink="snk_new") == 2
    back = await journal.claim_due("worker-a", now=T0 + HOUR, lease=LEASE)
    assert {c.incident_id for c in back} == {claims[0].incident_id, claims[2].incident_id}
    with pytest.raises(JournalRefusedError):
        await journal.fail(back[0], now=T0, failure="http_4xx", sink="https://hooks.example/x")
