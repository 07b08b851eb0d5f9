"""The delivery worker on the fake journal and a scripted sender, on the fake clock: one pass sends
what is due, records each outcome and says how the sink is doing; with the escalation shell before
it, as the webhook loop runs them, a new target re-arms what the old one refused, reminders follow
the last delivery, and an ``open`` cancelled in flight is followed by its ``resolved``."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from fleetd.clock import FakeClock
from fleetd.errors import ConfigError, JournalUnavailableError
from fleetd.health.incidents import ResolveReason
from fleetd.health.states import Severity
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventState, EventType, IncidentChange, NewEvent, StoredEvent
from fleetd.metrics import Metrics
from fleetd.notify.core.retry import PostResult, TransportFailure
from fleetd.notify.core.signing import HEADER_ID, HEADER_IDEMPOTENCY_KEY
from fleetd.notify.sink_status import SinkReason, SinkStatus
from fleetd.notify.worker import LEASE_MARGIN
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import (
    LIMIT,
    OTHER_SECRET_TEXT,
    REPEAT,
    RoutedSender,
    ScriptedSender,
    body_of,
    human_incident,
    make_leg,
    make_worker,
    open_incident,
    payload,
    target,
    verify,
)

SECOND = timedelta(seconds=1)


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    registry: CollectorRegistry = metrics.registry
    return registry.get_sample_value(name, labels)


async def test_a_due_event_is_sent_at_once_signed_under_its_key() -> None:
    """First attempt in the first pass; webhook-id, Idempotency-Key and eventId are the journal's
    key, and the reference library accepts the signature."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    report = await make_worker(journal, sender, clock).step()
    assert (report.claimed, report.delivered) == (1, 1)
    (request,) = sender.requests
    stored = await journal.get(incident.id)
    assert stored is not None
    key = stored.events[0].idempotency_key
    assert request.headers[HEADER_ID] == request.headers[HEADER_IDEMPOTENCY_KEY] == key
    document = verify(request.body, request.headers, now=T0)
    assert (document["eventId"], document["eventRevision"]) == (key, 1)
    assert stored.events[0].state is EventState.DELIVERED
    assert stored.events[0].delivered_at == T0


async def test_the_journal_revision_is_stamped_over_the_payload_s() -> None:
    """A payload built with a stale revision is sent with the journal's revision and key."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    stale = payload(incident, EventType.REMINDER, revision=7, at=T0)
    await journal.record(
        IncidentChange(incident=incident),
        [NewEvent(type=EventType.REMINDER, payload=stale)],
        now=T0,
    )
    await make_worker(journal, sender, clock).step()
    revisions = [body_of(r)["eventRevision"] for r in sender.requests]
    assert revisions == [1, 2]
    assert body_of(sender.requests[1])["eventId"] == sender.requests[1].headers[HEADER_ID]


async def test_disabled_mode_claims_nothing_and_resumes_when_enabled() -> None:
    """No target: nothing is claimed and the event waits; with a target it goes out."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    metrics = Metrics()
    current = {"target": None}
    worker = make_worker(journal, sender, clock, sink=lambda: current["target"], metrics=metrics)
    await open_incident(journal, human_incident(), at=T0)
    report = await worker.step()
    assert (report.claimed, sender.requests) == (0, [])
    assert worker.health.status is SinkStatus.DISABLED
    assert sample(metrics, "fleet_health_notification_queue_depth") == 1
    current["target"] = target()  # type: ignore[assignment]
    clock.advance(60)
    assert (await worker.step()).delivered == 1
    health = worker.health  # read after the step
    assert health.status is SinkStatus.OK
    assert sample(metrics, "fleet_health_notification_queue_depth") == 0
    assert (
        sample(metrics, "fleet_health_notification_last_success_seconds") == clock.now().timestamp()
    )


async def test_a_retryable_failure_waits_a_drawn_backoff_with_the_same_key() -> None:
    """503 then timeout: waits of draw x 5 s and draw x 15 s; every attempt has the same id."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(PostResult(status=503), PostResult(failure=TransportFailure.TIMEOUT))
    worker = make_worker(journal, sender, clock, draws=[0.5, 0.2])
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    assert (await worker.step()).retried == 1
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events[0].due_at == T0 + timedelta(seconds=2.5)
    assert (stored.events[0].last_failure, stored.events[0].last_http_status) == ("http_5xx", 503)
    clock.advance(2)
    assert (await worker.step()).claimed == 0
    clock.advance(0.5)
    assert (await worker.step()).retried == 1
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events[0].due_at == clock.now() + timedelta(seconds=3)
    clock.advance(3)
    assert (await worker.step()).delivered == 1
    assert len({r.headers[HEADER_ID] for r in sender.requests}) == 1
    assert len({r.headers["webhook-timestamp"] for r in sender.requests}) == 3


async def test_a_permanent_refusal_waits_for_another_target() -> None:
    """404: failed and not sent again; the same target after a restart keeps it failed; a restart
    with a new target re-arms it at once."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(PostResult(status=404))
    leg = make_leg(journal, sender, clock)
    incident = human_incident()
    leg.escalation.note(incident)
    assert (await leg.step()).failed == 1
    assert leg.worker.health.reason is SinkReason.PERMANENT_FAILURE
    clock.advance(3600)
    assert (await leg.step()).claimed == 0
    restarted = make_leg(journal, sender, clock, owner="fleetd-b")
    assert (await restarted.step()).claimed == 0
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events[0].state is EventState.FAILED
    moved = make_leg(journal, sender, clock, sink=target(secret=OTHER_SECRET_TEXT))
    report = await moved.step()
    assert (report.claimed, report.delivered) == (1, 1)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.state, e.attempts) for e in stored.events] == [(EventState.DELIVERED, 2)]
    assert moved.worker.health.status is SinkStatus.OK


async def test_a_config_change_while_running_re_arms() -> None:
    """The webhook loop notices the target's generation change between passes: the refused
    event goes out again, to the new target, in the next pass."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(PostResult(status=410))
    current = {"target": target()}
    leg = make_leg(journal, sender, clock, sink=lambda: current["target"])
    leg.escalation.note(human_incident())
    assert (await leg.step()).failed == 1
    assert (await leg.step()).claimed == 0
    current["target"] = target("http://127.0.0.1:9/other")
    report = await leg.step()
    assert (report.claimed, report.delivered) == (1, 1)
    assert [r.url for r in sender.requests] == [
        "http://127.0.0.1:9/hooks",
        "http://127.0.0.1:9/other",
    ]


async def test_a_new_target_generation_re_enables_a_receiver_a_410_disabled() -> None:
    """5i: the primary answers 410 and is skipped from then on; the same URLs under a new
    secret (a new generation, no list change) give it back: the next event goes to it."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    primary, second = "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"
    sender = RoutedSender({primary: [PostResult(status=410)]})
    current = {"target": target(primary, second)}
    worker = make_worker(journal, sender, clock, sink=lambda: current["target"])
    for subject in ("sess_1", "sess_2"):
        await open_incident(journal, human_incident(subject), at=clock.now())
        assert (await worker.step()).delivered == 1
    assert [r.url for r in sender.requests] == [primary, second, second]
    report = worker.receivers()
    assert report is not None
    assert (report.disabled, report.active) == (frozenset({0}), 1)
    current["target"] = target(primary, second, secret=OTHER_SECRET_TEXT)
    await open_incident(journal, human_incident("sess_3"), at=clock.now())
    assert (await worker.step()).delivered == 1
    assert sender.requests[-1].url == primary
    report = worker.receivers()
    assert report is not None
    assert (report.disabled, report.active) == (frozenset(), 0)
    assert worker.enable_receivers() == 0


async def test_events_of_one_incident_go_in_revision_order() -> None:
    """open, then resolved: sent in that order in one pass."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    incident = human_incident()
    change = await open_incident(journal, incident, at=T0)
    resolved = dataclasses.replace(change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED)
    await journal.record(
        resolved,
        [
            NewEvent(
                type=EventType.RESOLVED, payload=payload(incident, EventType.RESOLVED, 2, at=T0)
            )
        ],
        now=T0,
    )
    await make_worker(journal, sender, clock).step()
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "resolved"]


def _kinds(events: tuple[StoredEvent, ...]) -> list[EventType]:
    return [e.type for e in events]


async def test_a_reminder_follows_the_last_delivery_after_the_repeat_period() -> None:
    """Critical, human-routed, delivered at T0: nothing before REPEAT, a reminder revision at
    REPEAT (sent in the same pass), the next one a REPEAT after that."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    leg = make_leg(journal, sender, clock)
    incident = human_incident()
    leg.escalation.note(incident)
    assert (await leg.step()).delivered == 1
    for _ in range(4):
        clock.advance((REPEAT - SECOND).total_seconds() / 4)
        assert (await leg.step()).claimed == 0
    clock.advance(1)
    report = await leg.step()
    assert (report.claimed, report.delivered) == (1, 1)
    reminder = body_of(sender.requests[-1])
    assert (reminder["eventType"], reminder["eventRevision"]) == ("reminder", 2)
    assert reminder["incident"]["id"] == incident.id
    clock.advance(REPEAT.total_seconds())
    assert (await leg.step()).delivered == 1
    assert [body_of(r)["eventRevision"] for r in sender.requests] == [1, 2, 3]
    stored = await journal.get(incident.id)
    assert stored is not None
    assert _kinds(stored.events) == [EventType.OPEN, EventType.REMINDER, EventType.REMINDER]


async def test_no_reminder_while_an_event_is_pending_or_for_a_warning() -> None:
    """A failing sink holds one outstanding event per incident; warnings are never repeated."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender()
    leg = make_leg(journal, sender, clock)
    critical = human_incident("sess_1")
    warning = dataclasses.replace(human_incident("sess_2"), severity=Severity.WARNING)
    leg.escalation.note(critical)
    leg.escalation.note(warning)
    assert (await leg.step()).delivered == 2
    sender.answer(*[PostResult(status=503)] * 50)
    for _ in range(6):
        clock.advance(REPEAT.total_seconds())
        await leg.step()
    stored = await journal.get(critical.id)
    assert stored is not None
    assert _kinds(stored.events) == [EventType.OPEN, EventType.REMINDER]
    assert stored.events[1].state is EventState.PENDING
    quiet = await journal.get(warning.id)
    assert quiet is not None
    assert _kinds(quiet.events) == [EventType.OPEN]


class _WritesAfter:
    """A journal whose next ``settle`` first lets ``before`` run: another fleetd instance that
    read the same state writes in between."""

    def __init__(self, journal: InMemoryJournal) -> None:
        self.journal = journal
        self.before: Callable[[], Awaitable[object]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.journal, name)

    async def settle(self, incident_id: str, **kwargs: Any) -> Any:
        before, self.before = self.before, None
        if before is not None:
            await before()
        return await self.journal.settle(incident_id, **kwargs)


async def test_two_instances_add_one_reminder() -> None:
    """Two fleetd instances whose webhook loops see the same incident due, the second writing
    between the first one's read and its write: one reminder revision, sent once."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    racing = _WritesAfter(journal)
    first = make_leg(racing, sender, clock, owner="fleetd-a")
    second = make_leg(journal, sender, clock, owner="fleetd-b")
    incident = human_incident()
    first.escalation.note(incident)
    assert (await first.step()).delivered == 1
    clock.advance(REPEAT.total_seconds())
    racing.before = second.step
    await first.step()
    assert racing.before is None  # the second instance did write in between
    await second.step()
    stored = await journal.get(incident.id)
    assert stored is not None
    assert _kinds(stored.events) == [EventType.OPEN, EventType.REMINDER]
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "reminder"]


async def test_an_open_cancelled_while_in_flight_is_followed_by_resolved() -> None:
    """Another instance records the resolution while the ``open`` is in flight, which cancels
    it as undelivered and, the ``open`` being in doubt, records the ``resolved`` at once; the
    delivery is still recorded, and the webhook loop sends the resolution, once."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    leg = make_leg(journal, sender, clock)
    other = make_leg(journal, sender, clock, owner="fleetd-b").escalation
    incident = human_incident()
    leg.escalation.note(incident)

    async def resolve_meanwhile(_request: object) -> None:
        sender.during = None
        other.note_resolved(incident, reason=ResolveReason.CLEARED, resolved_at=clock.now())
        await other.step(clock.now())

    sender.during = resolve_meanwhile
    assert (await leg.step()).delivered == 1
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.resolved_at is not None
    assert [(e.type, e.state) for e in stored.events] == [
        (EventType.OPEN, EventState.DELIVERED),
        (EventType.RESOLVED, EventState.PENDING),
    ]
    for _ in range(3):
        await leg.step()
        clock.advance(60)
        await other.step(clock.now())
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "resolved"]
    closing = body_of(sender.requests[1])
    assert closing["incident"]["resolveReason"] == "cleared"


async def test_an_open_whose_sender_died_in_flight_is_followed_by_resolved() -> None:
    """An instance leased the ``open`` and died with its request out (the receiver may hold it,
    or have answered 2xx: nothing was recorded), and the incident resolves before that lease
    expires. The person may have been told, so the resolution records a ``resolved`` at once and
    it is sent, once; the cancelled ``open`` is never sent again."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    leg = make_leg(journal, sender, clock)
    incident = human_incident()
    leg.escalation.note(incident)
    await leg.escalation.step(clock.now())  # the open is recorded; the dead instance takes it
    (dead,) = await journal.claim_due("fleetd-gone", now=clock.now(), lease=LEASE_MARGIN)
    clock.advance(5)
    leg.escalation.note_resolved(incident, reason=ResolveReason.CLEARED, resolved_at=clock.now())
    for _ in range(3):
        await leg.step()
        clock.advance(LEASE_MARGIN.total_seconds())
    assert [body_of(r)["eventType"] for r in sender.requests] == ["resolved"]
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [
        (EventType.OPEN, EventState.CANCELLED),
        (EventType.RESOLVED, EventState.DELIVERED),
    ]
    late = await journal.complete(dead, now=clock.now(), http_status=200)  # had it been slow
    assert late
    await leg.step()
    assert [body_of(r)["eventType"] for r in sender.requests] == ["resolved"]  # nothing more


async def test_a_payload_outside_the_contract_is_never_sent() -> None:
    """An event payload that fails the v1 contract is never sent; it counts as payload_refused."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    metrics = Metrics()
    incident = human_incident()
    await journal.record(
        IncidentChange(incident=incident),
        [NewEvent(type=EventType.OPEN, payload={"note": "not a v1 event"})],
        now=T0,
    )
    report = await make_worker(journal, sender, clock, metrics=metrics).step()
    assert (report.failed, sender.requests) == (1, [])
    assert (
        sample(metrics, "fleet_health_notifications_total", event="open", outcome="payload_refused")
        == 1
    )


async def test_blind_failures_open_the_breaker_and_one_probe_closes_it() -> None:
    """Three refused connections: degraded (all_receivers_down: the one receiver's breaker is
    open), nothing claimed during the cooldown,
    then one claim probes and its success closes the breaker."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    network = PostResult(failure=TransportFailure.NETWORK)
    sender = ScriptedSender(network, network, network)
    worker = make_worker(journal, sender, clock, draws=[0.0] * 3)
    for n in range(4):
        await open_incident(journal, human_incident(f"sess_{n}"), at=T0)
    report = await worker.step()
    assert (report.retried, report.released) == (3, 1)
    assert (worker.health.status, worker.health.reason) == (
        SinkStatus.DEGRADED,
        SinkReason.ALL_RECEIVERS_DOWN,
    )
    assert (await worker.step()).claimed == 0
    clock.advance(5)
    probe = await worker.step()
    assert (probe.claimed, probe.delivered) == (1, 1)
    assert worker.health.status is SinkStatus.OK
    assert (await worker.step()).delivered == 3


async def test_failing_attempts_and_a_failing_journal_degrade_the_sink() -> None:
    """Answered 5xx with Retry-After never open the breaker but three in a row are
    attempts_failing; a journal that fails is journal_failing; a delivery clears both."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    busy = PostResult(status=503, retry_after=timedelta(seconds=1))
    sender = ScriptedSender(busy, busy, busy)
    worker = make_worker(journal, sender, clock)
    await open_incident(journal, human_incident(), at=T0)
    for _ in range(3):
        await worker.step()
        clock.advance(45)  # the backoff of the third attempt (draw 1.0)
    assert worker.health.reason is SinkReason.ATTEMPTS_FAILING
    since = worker.health.since
    journal.fail_with = JournalUnavailableError("claim", "unreachable")
    await worker.step()
    health = worker.health  # read after the step
    assert health.reason is SinkReason.JOURNAL_FAILING
    assert health.since == clock.now() != since
    journal.fail_with = None
    assert (await worker.step()).delivered == 1
    assert worker.health.status is SinkStatus.OK


async def test_an_unresolvable_target_is_degraded_not_disabled() -> None:
    """A sink target that cannot be resolved makes the sink degraded (sink_unresolved), not
    disabled."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)

    def broken() -> None:
        raise ConfigError("health.notifications.webhookUrlEnv", "environment variable unset")

    worker = make_worker(journal, sender, clock, sink=broken)
    await worker.step()
    assert (worker.health.status, worker.health.reason) == (
        SinkStatus.DEGRADED,
        SinkReason.SINK_UNRESOLVED,
    )


async def test_a_lease_too_short_for_another_request_is_given_back() -> None:
    """Two events of one incident; the first request eats the lease: the second is released
    unsent and goes out in the next pass."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    await journal.record(
        IncidentChange(incident=incident),
        [
            NewEvent(
                type=EventType.REMINDER, payload=payload(incident, EventType.REMINDER, 2, at=T0)
            )
        ],
        now=T0,
    )
    sender.during = lambda _r: clock.advance((LIMIT + LEASE_MARGIN + SECOND).total_seconds())
    worker = make_worker(journal, sender, clock)
    report = await worker.step()
    assert (report.delivered, report.released) == (1, 1)
    sender.during = None
    assert (await worker.step()).delivered == 1
    assert len(sender.requests) == 2


async def test_metrics_count_attempts_by_event_and_bounded_outcome() -> None:
    """Attempts are counted by event and a bounded outcome (http_429, delivered); no incident id
    or address enters the exposition."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    metrics = Metrics()
    sender = ScriptedSender(PostResult(status=429), PostResult(status=200))
    worker = make_worker(journal, sender, clock, metrics=metrics, draws=[0.0])
    await open_incident(journal, human_incident(), at=T0)
    await worker.step()
    await worker.step()
    assert (
        sample(metrics, "fleet_health_notifications_total", event="open", outcome="http_429") == 1
    )
    assert (
        sample(metrics, "fleet_health_notifications_total", event="open", outcome="delivered") == 1
    )
    text = metrics.exposition().decode()
    assert "inc_" not in text
    assert "127.0.0.1" not in text


async def test_a_refused_reminder_is_not_followed_by_one_every_sweep() -> None:
    """A reminder refused for good waits for a new receiver list or a replay, like any other
    permanent failure (§10.4): no new reminder is recorded after it at every sweep."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    leg = make_leg(journal, sender, clock)
    incident = human_incident()
    leg.escalation.note(incident)
    await leg.step()
    sender.answer(*[PostResult(status=404)] * 100)
    clock.advance(REPEAT.total_seconds())
    for _ in range(10):
        await leg.step()
        clock.advance(31)
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "reminder"]
