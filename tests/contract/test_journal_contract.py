"""One Journal contract, run on the in-memory fake, on SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason, RoutingReason
from fleetd.health.states import LeadState, Severity
from fleetd.journal.values import (
    Claim,
    EventState,
    EventType,
    IncidentChange,
    NewEvent,
    Routing,
    idempotency_key,
)

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]

LEASE = timedelta(seconds=30)


def opened(subject: str = "sess_1", **changes: object) -> IncidentChange:
    return IncidentChange(incident=make_incident(subject, **changes))  # type: ignore[arg-type]


def event(kind: EventType = EventType.OPEN, due_at: datetime | None = None) -> NewEvent:
    return NewEvent(type=kind, payload={"event": kind.value, "severity": "critical"}, due_at=due_at)


async def test_an_incident_and_its_event_are_recorded_together(journal_kit: JournalKit) -> None:
    """The incident, its routing and its first event with one due attempt come back as stored."""
    journal = journal_kit.build()
    change = opened()
    (recorded,) = await journal.record(change, [event()], now=T0)
    incident = change.incident
    assert recorded.revision == 1
    assert recorded.idempotency_key == idempotency_key(incident.id, EventType.OPEN, 1)
    assert recorded.due_at == T0
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.incident == incident
    assert stored.routing == Routing(owner="lead")
    assert stored.resolved_at is None
    (stored_event,) = stored.events
    assert stored_event.state is EventState.PENDING
    assert (stored_event.attempts, stored_event.due_at) == (1, T0)
    assert stored_event.idempotency_key == recorded.idempotency_key
    assert await journal.get("inc_missing") is None


async def test_revisions_count_up_per_incident_and_keys_stay_stable(
    journal_kit: JournalKit,
) -> None:
    """Each event gets the next revision of its incident; a new client sees the same keys."""
    journal = journal_kit.build()
    first, second = opened("sess_1"), opened("sess_2")
    await journal.record(first, [event()], now=T0)
    await journal.record(second, [event()], now=T0)
    later = dataclasses.replace(first.incident, severity=Severity.WARNING)
    recorded = await journal.record(
        IncidentChange(incident=later),
        [event(EventType.SEVERITY_CHANGED), event(EventType.REMINDER)],
        now=T0 + timedelta(minutes=1),
    )
    assert [(r.type, r.revision) for r in recorded] == [
        (EventType.SEVERITY_CHANGED, 2),
        (EventType.REMINDER, 3),
    ]
    stored = await journal_kit.build().get(first.incident.id)
    assert stored is not None
    assert stored.incident.severity is Severity.WARNING
    assert [e.idempotency_key for e in stored.events] == [
        idempotency_key(first.incident.id, t, n)
        for t, n in ((EventType.OPEN, 1), (EventType.SEVERITY_CHANGED, 2), (EventType.REMINDER, 3))
    ]


async def test_a_second_open_incident_for_one_key_is_refused_whole(
    journal_kit: JournalKit,
) -> None:
    """At most one open incident per key; the refused record writes neither row nor event."""
    journal = journal_kit.build()
    await journal.record(opened(), [event()], now=T0)
    again = opened(generation=2)
    with pytest.raises(JournalRefusedError) as caught:
        await journal.record(again, [event()], now=T0)
    assert caught.value.reason == "open_key_conflict"
    assert await journal.get(again.incident.id) is None
    assert (await journal.stats()).queue_depth == 1


async def test_a_generation_is_stored_once_per_key(journal_kit: JournalKit) -> None:
    """Another id for the same key and generation is refused, even once the first resolved."""
    journal = journal_kit.build()
    first = opened()
    await journal.record(first, now=T0)
    resolved = dataclasses.replace(first, resolved_at=T0, resolve_reason=ResolveReason.CLEARED)
    await journal.record(resolved, now=T0)
    clash = IncidentChange(incident=dataclasses.replace(first.incident, id="inc_other"))
    with pytest.raises(JournalRefusedError) as caught:
        await journal.record(clash, now=T0)
    assert caught.value.reason == "generation_conflict"


async def test_a_recurrence_after_resolution_opens_the_next_generation(
    journal_kit: JournalKit,
) -> None:
    """Resolved, the key may open again; the generations a restart seeds are the latest ones."""
    journal = journal_kit.build()
    first = opened()
    await journal.record(first, [event()], now=T0)
    await journal.record(
        dataclasses.replace(first, resolved_at=T0, resolve_reason=ResolveReason.CLEARED), now=T0
    )
    second = opened(generation=2, opened_at=T0 + timedelta(hours=1))
    await journal.record(second, [event()], now=T0 + timedelta(hours=1))
    other = opened("sess_9", state=LeadState.LEAD_UNREACHABLE)
    await journal.record(other, now=T0)
    snapshot = await journal_kit.build().load_open()
    assert [s.incident.id for s in snapshot.open_incidents] == [
        other.incident.id,
        second.incident.id,
    ]
    assert snapshot.generations == {first.incident.key: 2, other.incident.key: 1}


async def test_routing_changes_are_kept(journal_kit: JournalKit) -> None:
    """Owner, pinned recipient, reason and routing generation survive a reload."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, now=T0)
    routing = Routing(owner="lead", recipient="peer", reason="peer_owner_unhealthy", generation=2)
    await journal.record(dataclasses.replace(change, routing=routing), now=T0)
    (stored,) = (await journal_kit.build().load_open()).open_incidents
    assert stored.routing == routing
    assert stored.incident.recipient_lead == "peer"
    assert stored.incident.routing_reason is RoutingReason.PEER_OWNER_UNHEALTHY
    assert stored.incident.routing_generation == 2
    assert stored.incident.assignment is not None
    assert stored.incident.assignment.on_behalf_of == "lead"


@pytest.mark.parametrize(
    "payload",
    [
        {"note": "first line\nsecond line"},
        {"note": "x" * 300},
        {"where": "/home/dev/repo/src/secret.py"},
        {"sink": "https://hooks.example.test/abc"},
        {"bad key": 1},
        {"nested": {"a": {"b": {"c": {"d": {"e": 1}}}}}},
        {"n": float("nan")},
    ],
)
async def test_a_payload_that_could_carry_content_is_refused(
    journal_kit: JournalKit, payload: dict[str, object]
) -> None:
    """Multi-line or long text, paths, URLs, odd keys, deep nesting: refused, nothing written."""
    journal = journal_kit.build()
    change = opened()
    bad = NewEvent(type=EventType.OPEN, payload=payload)
    with pytest.raises(JournalRefusedError):
        await journal.record(change, [bad], now=T0)
    assert await journal.get(change.incident.id) is None


async def test_naive_times_are_refused(journal_kit: JournalKit) -> None:
    """Recording an incident with a naive (zone-less) time is refused."""
    journal = journal_kit.build()
    naive = opened(opened_at=datetime(2026, 8, 1, 12, 0))
    with pytest.raises(JournalRefusedError):
        await journal.record(naive, now=T0)


async def test_claims_lease_due_attempts_once_and_in_due_order(journal_kit: JournalKit) -> None:
    """Only due attempts, earliest first, at most ``limit``; a leased one is not claimed again."""
    journal = journal_kit.build()
    for n, delay in enumerate((20, 0, 10, 60)):
        await journal.record(
            opened(f"sess_{n}"), [event(due_at=T0 + timedelta(seconds=delay))], now=T0
        )
    now = T0 + timedelta(seconds=30)
    first = await journal.claim_due("worker-a", now=now, lease=LEASE, limit=2)
    assert [c.due_at for c in first] == [T0, T0 + timedelta(seconds=10)]
    assert all(c.lease_owner == "worker-a" and c.lease_expires_at == now + LEASE for c in first)
    rest = await journal_kit.build().claim_due("worker-b", now=now, lease=LEASE)
    assert [c.due_at for c in rest] == [T0 + timedelta(seconds=20)]
    assert await journal.claim_due("worker-a", now=now, lease=LEASE) == ()


async def test_an_expired_lease_is_reclaimed_and_fences_the_old_holder(
    journal_kit: JournalKit,
) -> None:
    """After expiry another worker takes the attempt; the old holder can record nothing."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    (old,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    later = T0 + LEASE
    await journal_kit.leases_run_out()
    (new,) = await journal.claim_due("worker-b", now=later, lease=LEASE)
    assert (new.attempt_id, new.idempotency_key) == (old.attempt_id, old.idempotency_key)
    assert new.lease_token != old.lease_token
    assert not await journal.complete(old, now=later, http_status=200)
    assert not await journal.release(old, now=later)
    assert await journal.complete(new, now=later, http_status=204)
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert stored.events[0].state is EventState.DELIVERED
    assert stored.delivered_revisions == (1,)
    assert stored.last_delivered_at == later
    assert await journal.stats() == type(await journal.stats())(
        queue_depth=0, last_delivered_at=later
    )


async def test_a_retryable_failure_schedules_the_next_attempt(journal_kit: JournalKit) -> None:
    """The next attempt is due at the given time, numbered one up, with the same idempotency key."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    (claim,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    retry_at = T0 + timedelta(seconds=5)
    assert await journal.reschedule(
        claim, now=T0, due_at=retry_at, failure="http_5xx", http_status=503
    )
    assert not await journal.reschedule(claim, now=T0, due_at=retry_at, failure="timeout")
    assert await journal.claim_due("worker-a", now=T0, lease=LEASE) == ()
    (second,) = await journal.claim_due("worker-a", now=retry_at, lease=LEASE)
    assert (second.attempt, second.idempotency_key) == (2, claim.idempotency_key)
    stored = await journal.get(change.incident.id)
    assert stored is not None
    (stored_event,) = stored.events
    assert (stored_event.attempts, stored_event.due_at) == (2, retry_at)
    assert (stored_event.last_failure, stored_event.last_http_status) == ("http_5xx", 503)


async def test_a_permanent_failure_waits_for_rearm(journal_kit: JournalKit) -> None:
    """A failed event is not claimed until ``settle`` re-arms it; then its next attempt is due at
    once, and re-arming it again while it is pending adds no attempt."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    (claim,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert await journal.fail(claim, now=T0, failure="http_4xx", http_status=410, sink="snk_1")
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert (stored.events[0].state, stored.events[0].failed_by) == (EventState.FAILED, "snk_1")
    later = T0 + timedelta(hours=1)
    assert await journal.claim_due("worker-a", now=later, lease=LEASE) == ()
    incident_id = change.incident.id
    assert await journal.settle(incident_id, now=later, after_revision=1, rearm=[1]) == ()
    assert await journal.settle(incident_id, now=later, after_revision=1, rearm=[1]) == ()
    assert (await journal.stats()).queue_depth == 1
    (again,) = await journal.claim_due("worker-a", now=later, lease=LEASE)
    assert (again.attempt, again.due_at) == (2, later)
    stored = await journal_kit.build().get(incident_id)
    assert stored is not None
    assert (stored.events[0].state, stored.events[0].attempts) == (EventState.PENDING, 2)


async def test_a_released_attempt_is_due_again_at_once(journal_kit: JournalKit) -> None:
    """A released claim is due again at once and a second worker claims the same attempt, not a
    new one."""
    journal = journal_kit.build()
    await journal.record(opened(), [event()], now=T0)
    (claim,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert await journal.release(claim, now=T0)
    (again,) = await journal.claim_due("worker-b", now=T0, lease=LEASE)
    assert (again.attempt_id, again.attempt) == (claim.attempt_id, 1)


async def test_resolving_before_delivery_cancels_the_pending_open_event(
    journal_kit: JournalKit,
) -> None:
    """``cancel``: the undelivered open event is cancelled with its attempt; resolved with
    nothing delivered and nothing waiting, the incident's human leg is settled (not reloaded)."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event()], now=T0)
    resolved = dataclasses.replace(
        change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED, cancel=(1,)
    )
    assert await journal.record(resolved, now=T0) == ()
    assert await journal.claim_due("worker-a", now=T0 + LEASE, lease=LEASE) == ()
    assert (await journal.stats()).queue_depth == 0
    stored = await journal.get(change.incident.id)
    assert stored is not None
    assert stored.resolve_reason is ResolveReason.CLEARED
    assert stored.events[0].state is EventState.CANCELLED
    assert stored.delivered_revisions == ()
    snapshot = await journal.load_open()
    assert (snapshot.open_incidents, snapshot.pending_resolutions) == ((), ())


async def test_cancel_takes_only_the_listed_pending_or_failed_revisions(
    journal_kit: JournalKit,
) -> None:
    """A pending and a failed event listed are cancelled; a delivered one listed and a pending
    one not listed stay as they were."""
    journal = journal_kit.build()
    change = opened()
    await journal.record(change, [event(), event(EventType.REMINDER)], now=T0)
    first, second = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert await journal.complete(first, now=T0, http_status=200)
    assert await journal.fail(second, now=T0, failure="http_4xx", http_status=404)
    await journal.record(change, [event(EventType.REMINDER), event(EventType.REMINDER)], now=T0)
    await journal.record(dataclasses.replace(change, cancel=(1, 2, 3)), now=T0)
    stored = await journal_kit.build().get(change.incident.id)
    assert stored is not None
    assert [e.state for e in stored.events] == [
        EventState.DELIVERED,
        EventState.CANCELLED,
        EventState.CANCELLED,
        EventState.PENDING,
    ]
    (left,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    assert left.revision == 4


def _resolved(change: IncidentChange, at: datetime, cancel: tuple[int, ...]) -> IncidentChange:
    return dataclasses.replace(
        change, resolved_at=at, resolve_reason=ResolveReason.CLEARED, cancel=cancel
    )


async def test_an_event_is_in_doubt_while_a_lease_holds_it_with_nothing_recorded(
    journal_kit: JournalKit,
) -> None:
    """``in_doubt`` says a request may have reached the receiver with nothing recorded: it holds
    while an attempt is leased (its sender in flight, or gone — also past the lease) and after
    that attempt is cancelled in flight; never before a claim, after a release, or once the
    holder recorded an outcome (delivered, a retry, a permanent failure)."""
    journal = journal_kit.build()
    names = ("leased", "cancelled", "released", "delivered", "retried", "refused")
    changes = {name: opened(f"sess_{name}") for name in names}
    for change in changes.values():
        await journal.record(change, [event()], now=T0)
    claims = {c.incident_id: c for c in await journal.claim_due("a", now=T0, lease=LEASE)}

    def claim(name: str) -> Claim:
        return claims[changes[name].incident.id]

    idle = opened("sess_idle")
    await journal.record(idle, [event()], now=T0)
    await journal.record(_resolved(changes["cancelled"], T0, (1,)), now=T0)
    assert await journal.release(claim("released"), now=T0)
    assert await journal.complete(claim("delivered"), now=T0, http_status=200)
    retry = T0 + LEASE
    assert await journal.reschedule(
        claim("retried"), now=T0, due_at=retry, failure="timeout", http_status=None
    )
    assert await journal.fail(claim("refused"), now=T0, failure="http_4xx", http_status=404)
    reader = journal_kit.build()
    doubt = {}
    for name, change in (*changes.items(), ("idle", idle)):
        stored = await reader.get(change.incident.id)
        assert stored is not None
        doubt[name] = stored.events[0].in_doubt
    assert doubt == {
        "leased": True,
        "cancelled": True,
        "released": False,
        "delivered": False,
        "retried": False,
        "refused": False,
        "idle": False,
    }


async def test_an_attempt_cancelled_in_flight_is_still_delivered_under_its_lease(
    journal_kit: JournalKit,
) -> None:
    """The request of an attempt cancelled while in flight went out: ``complete`` under the same
    lease records the delivery (so the resolved incident is unsettled until a ``resolved``
    exists); a failure is not recorded over the cancellation, and a holder whose lease expired
    and was taken by another records nothing."""
    journal = journal_kit.build()
    told, refused, fenced = opened("sess_1"), opened("sess_2"), opened("sess_3")
    for change in (told, refused):
        await journal.record(change, [event()], now=T0)
    claims = {c.incident_id: c for c in await journal.claim_due("a", now=T0, lease=LEASE)}
    for change in (told, refused):
        await journal.record(_resolved(change, T0, (1,)), now=T0)
    assert await journal.complete(claims[told.incident.id], now=T0, http_status=200)
    assert not await journal.fail(
        claims[refused.incident.id], now=T0, failure="http_4xx", http_status=404
    )
    await journal.record(fenced, [event()], now=T0)
    (old,) = await journal.claim_due("a", now=T0, lease=LEASE)
    await journal_kit.leases_run_out()
    (new,) = await journal.claim_due("b", now=T0 + LEASE, lease=LEASE)
    await journal.record(_resolved(fenced, T0 + LEASE, (1,)), now=T0 + LEASE)
    assert not await journal.complete(old, now=T0 + LEASE, http_status=200)
    assert await journal.complete(new, now=T0 + LEASE, http_status=200)
    assert await journal.claim_due("c", now=T0 + 2 * LEASE, lease=LEASE) == ()
    reader = journal_kit.build()
    states = {}
    for change in (told, refused, fenced):
        stored = await reader.get(change.incident.id)
        assert stored is not None
        states[change.incident.id] = [e.state for e in stored.events]
    assert states == {
        told.incident.id: [EventState.DELIVERED],
        refused.incident.id: [EventState.CANCELLED],
        fenced.incident.id: [EventState.DELIVERED],
    }
    snapshot = await reader.load_open(told_since=T0)
    assert {s.incident.id for s in snapshot.pending_resolutions} == {
        told.incident.id,
        fenced.incident.id,
    }
    later = await reader.load_open(told_since=T0 + LEASE)  # delivered at or after it only
    assert {s.incident.id for s in later.pending_resolutions} == {fenced.incident.id}
    assert (await reader.load_open()).pending_resolutions == ()  # nothing pending or failed


async def test_a_cancelled_attempt_refused_for_good_or_given_back_is_no_longer_in_doubt(
    journal_kit: JournalKit,
) -> None:
    """An attempt cancelled while its request was out leaves its event in doubt (the person may
    have been told). Word that the request never reached anyone ends the doubt: a refusal for
    good (not recorded over the cancellation: ``fail`` answers ``False``) or the claim given back
    unsent. A retryable failure may have reached the receiver: the doubt stays."""
    journal = journal_kit.build()
    names = ("refused", "released", "retried", "silent")
    changes = {name: opened(f"sess_{name}") for name in names}
    for change in changes.values():
        await journal.record(change, [event()], now=T0)
    claims = {c.incident_id: c for c in await journal.claim_due("a", now=T0, lease=LEASE)}
    for change in changes.values():
        await journal.record(_resolved(change, T0, (1,)), now=T0)

    def claim(name: str) -> Claim:
        return claims[changes[name].incident.id]

    assert not await journal.fail(claim("refused"), now=T0, failure="http_4xx", http_status=404)
    assert await journal.release(claim("released"), now=T0)
    assert not await journal.reschedule(
        claim("retried"), now=T0, due_at=T0 + LEASE, failure="timeout", http_status=None
    )
    reader = journal_kit.build()
    seen = {}
    for name, change in changes.items():
        stored = await reader.get(change.incident.id)
        assert stored is not None
        (only,) = stored.events
        seen[name] = (only.state, only.in_doubt)
    assert seen == {
        "refused": (EventState.CANCELLED, False),
        "released": (EventState.CANCELLED, False),
        "retried": (EventState.CANCELLED, True),
        "silent": (EventState.CANCELLED, True),
    }


async def test_a_restart_reloads_a_pending_resolution(journal_kit: JournalKit) -> None:
    """A resolved incident whose ``resolved`` event is undelivered comes back with its retry
    state, and so does one whose person was told (at or after ``told_since``) with no
    ``resolved`` recorded yet; one whose ``resolved`` was delivered, and one nobody was told of,
    do not."""
    journal = journal_kit.build()
    pending, owed, done, untold = (opened(f"sess_{n}") for n in range(1, 5))
    for change in (pending, owed, done):
        await journal.record(change, [event()], now=T0)
    await journal.record(untold, now=T0)
    for claim in await journal.claim_due("worker-a", now=T0, lease=LEASE):
        assert await journal.complete(claim, now=T0, http_status=200)
    for change in (pending, owed, done, untold):
        resolved = dataclasses.replace(change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED)
        events = [event(EventType.RESOLVED)] if change in (pending, done) else []
        await journal.record(resolved, events, now=T0)
    for claim in await journal.claim_due("worker-a", now=T0, lease=LEASE):
        if claim.incident_id == done.incident.id:
            assert await journal.complete(claim, now=T0, http_status=200)
        else:
            assert await journal.release(claim, now=T0)
    restarted = journal_kit.build()
    assert {s.incident.id for s in (await restarted.load_open()).pending_resolutions} == {
        pending.incident.id  # without ``told_since``: only an event pending or failed
    }
    snapshot = await restarted.load_open(told_since=T0)
    assert snapshot.open_incidents == ()
    reloaded = {s.incident.id: s for s in snapshot.pending_resolutions}
    assert set(reloaded) == {pending.incident.id, owed.incident.id}
    resolution = reloaded[pending.incident.id]
    assert resolution.delivered_revisions == (1,)
    assert [(e.type, e.state) for e in resolution.events] == [
        (EventType.OPEN, EventState.DELIVERED),
        (EventType.RESOLVED, EventState.PENDING),
    ]
    assert [(e.type, e.state) for e in reloaded[owed.incident.id].events] == [
        (EventType.OPEN, EventState.DELIVERED)
    ]
    (claim,) = await restarted.claim_due("worker-b", now=T0, lease=LEASE)
    assert (claim.type, claim.revision) == (EventType.RESOLVED, 2)
    assert claim.payload == {"event": "resolved", "severity": "critical"}


async def test_lease_owners_and_failure_classes_are_plain_codes(journal_kit: JournalKit) -> None:
    """A lease owner with spaces or a newline, and a failure that is free text rather than a
    code, are refused."""
    journal = journal_kit.build()
    await journal.record(opened(), [event()], now=T0)
    with pytest.raises(JournalRefusedError):
        await journal.claim_due("worker a\n", now=T0, lease=LEASE)
    (claim,) = await journal.claim_due("worker-a", now=T0, lease=LEASE)
    with pytest.raises(JournalRefusedError):
        await journal.fail(claim, now=T0, failure="Traceback (most recent call last): ...")


@pytest.mark.parametrize(
    ("ci", "outcome"), [("", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_a_missing_postgres_skips_locally_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    """Without the server the PostgreSQL cases skip with a reason, except under CI=true."""
    from tests.contract.journal_fixtures import postgres_reachable, require_postgres  # noqa: PLC0415

    monkeypatch.setenv("CI", ci)
    assert not postgres_reachable("127.0.0.1", 9)
    with pytest.raises(outcome, match="PostgreSQL is not reachable"):
        require_postgres(False)
    assert T0.tzinfo is UTC
