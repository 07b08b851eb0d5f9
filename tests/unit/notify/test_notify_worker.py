"""The delivery worker on the fake journal and a scripted sender, on the fake clock: one pass sends
what is due, records each outcome, re-arms on a target change, adds reminders, and says how the
sink is doing."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from prometheus_client import CollectorRegistry

from fleetd.clock import FakeClock
from fleetd.errors import ConfigError, JournalUnavailableError
from fleetd.health.incidents import ResolveReason
from fleetd.health.states import Severity
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.records import EventState, EventType, IncidentChange, NewEvent
from fleetd.metrics import Metrics
from fleetd.notify.retry import AttemptOutcome, TransportFailure
from fleetd.notify.signing import HEADER_ID, HEADER_IDEMPOTENCY_KEY
from fleetd.notify.sink_health import SinkReason, SinkStatus
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
    stale = payload(incident, EventType.SEVERITY_CHANGED, revision=7, at=T0)
    await journal.record(
        IncidentChange(incident=incident),
        [NewEvent(type=EventType.SEVERITY_CHANGED, payload=stale)],
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
    assert worker.health.status is SinkStatus.OK
    assert sample(metrics, "fleet_health_notification_queue_depth") == 0
    assert (
        sample(metrics, "fleet_health_notification_last_success_seconds") == clock.now().timestamp()
    )


async def test_a_retryable_failure_waits_a_drawn_backoff_with_the_same_key() -> None:
    """503 then timeout: waits of draw x 5 s and draw x 15 s; every attempt has the same id."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(
        AttemptOutcome(status=503), AttemptOutcome(failure=TransportFailure.TIMEOUT)
    )
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
    """404: failed and not sent again; the same target after a restart keeps it failed; a new
    target re-arms it at once."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(AttemptOutcome(status=404))
    worker = make_worker(journal, sender, clock)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    assert (await worker.step()).failed == 1
    assert worker.health.reason is SinkReason.PERMANENT_FAILURE
    clock.advance(3600)
    assert (await worker.step()).claimed == 0
    restarted = make_worker(journal, sender, clock, owner="fleetd-b")
    assert (await restarted.step()).rearmed == 0
    moved = make_worker(journal, sender, clock, sink=target(secret=OTHER_SECRET_TEXT))
    report = await moved.step()
    assert (report.rearmed, report.delivered) == (1, 1)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert (stored.events[0].state, stored.events[0].attempts) == (EventState.DELIVERED, 2)
    assert moved.health.status is SinkStatus.OK


async def test_a_config_change_while_running_re_arms() -> None:
    """The worker notices the target's generation change between passes."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender(AttemptOutcome(status=410))
    current = {"target": target()}
    worker = make_worker(journal, sender, clock, sink=lambda: current["target"])
    await open_incident(journal, human_incident(), at=T0)
    assert (await worker.step()).failed == 1
    current["target"] = target("http://127.0.0.1:9/other")
    report = await worker.step()
    assert (report.rearmed, report.delivered) == (1, 1)


async def test_a_new_target_generation_re_enables_a_receiver_a_410_disabled() -> None:
    """5i: the primary answers 410 and is skipped from then on; the same URLs under a new
    secret (a new generation, no list change) give it back: the next event goes to it."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    primary, second = "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"
    sender = RoutedSender({primary: [AttemptOutcome(status=410)]})
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


async def test_a_reminder_follows_the_last_delivery_after_the_repeat_period() -> None:
    """Critical, human-routed, delivered at T0: nothing before REPEAT, a reminder revision at
    REPEAT (sent in the same pass), the next one a REPEAT after that."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    worker = make_worker(journal, sender, clock)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    await worker.step()
    clock.advance((REPEAT - SECOND).total_seconds())
    assert (await worker.step()).reminders == 0
    clock.advance(1)
    report = await worker.step()
    assert (report.reminders, report.delivered) == (1, 1)
    reminder = body_of(sender.requests[-1])
    assert (reminder["eventType"], reminder["eventRevision"]) == ("reminder", 2)
    assert reminder["incident"]["id"] == incident.id
    clock.advance(REPEAT.total_seconds())
    assert (await worker.step()).reminders == 1
    assert [body_of(r)["eventRevision"] for r in sender.requests] == [1, 2, 3]


async def test_no_reminder_while_an_event_is_pending_or_for_a_warning() -> None:
    """A failing sink holds one outstanding event per incident; warnings are never repeated."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = ScriptedSender()
    worker = make_worker(journal, sender, clock)
    critical = human_incident("sess_1")
    warning = dataclasses.replace(human_incident("sess_2"), severity=Severity.WARNING)
    await open_incident(journal, critical, at=T0)
    await open_incident(journal, warning, at=T0)
    await worker.step()
    sender.answer(*[AttemptOutcome(status=503)] * 50)
    for _ in range(6):
        clock.advance(REPEAT.total_seconds())
        await worker.step()
    stored = await journal.get(critical.id)
    assert stored is not None
    assert [e.type for e in stored.events] == [EventType.OPEN, EventType.REMINDER]
    quiet = await journal.get(warning.id)
    assert quiet is not None
    assert len(quiet.events) == 1


async def test_two_workers_add_one_reminder() -> None:
    """Two fleetd instances that see the same due incident: one reminder revision."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    first = make_worker(journal, sender, clock, owner="fleetd-a")
    second = make_worker(journal, sender, clock, owner="fleetd-b")
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    await first.step()
    clock.advance(REPEAT.total_seconds())
    stored = await journal.get(incident.id)
    assert stored is not None
    reports = [await first.step(), await second.step()]
    assert sum(r.reminders for r in reports) == 1


async def test_an_open_cancelled_while_in_flight_is_followed_by_resolved() -> None:
    """The dispatcher cancels an open it thinks undelivered; it was delivered meanwhile, so the
    worker owes (and sends) the resolution once."""
    journal, sender, clock = InMemoryJournal(), ScriptedSender(), FakeClock(T0)
    incident = human_incident()
    change = await open_incident(journal, incident, at=T0)
    resolved = dataclasses.replace(
        change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED, cancel_pending=True
    )

    async def resolve_meanwhile(_request: object) -> None:
        sender.during = None
        await journal.record(resolved, now=T0)

    sender.during = resolve_meanwhile
    worker = make_worker(journal, sender, clock)
    assert (await worker.step()).late_resolved == 1
    await worker.step()
    await worker.step()
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "resolved"]
    closing = body_of(sender.requests[1])
    assert closing["incident"]["resolveReason"] == "cleared"


async def test_a_payload_outside_the_contract_is_never_sent() -> None:
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
    network = AttemptOutcome(failure=TransportFailure.NETWORK)
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
    busy = AttemptOutcome(status=503, retry_after=timedelta(seconds=1))
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
    assert worker.health.reason is SinkReason.JOURNAL_FAILING
    assert worker.health.since == clock.now() != since
    journal.fail_with = None
    assert (await worker.step()).delivered == 1
    assert worker.health.status is SinkStatus.OK


async def test_an_unresolvable_target_is_degraded_not_disabled() -> None:
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
        [NewEvent(type=EventType.SEVERITY_CHANGED, payload=payload(incident, at=T0))],
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
    journal, clock = InMemoryJournal(), FakeClock(T0)
    metrics = Metrics()
    sender = ScriptedSender(AttemptOutcome(status=429), AttemptOutcome(status=200))
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
