"""The delivery worker over several receivers, on the fake journal and clock: an attempt fails
over to the next receiver with the same id, a 4xx does not, every receiver down degrades the sink
and the event is delivered once after recovery, and a reload swaps the list between passes."""

from __future__ import annotations

from datetime import timedelta

from fleetd.clock import FakeClock
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventState
from fleetd.notify.core.retry import PostResult, TransportFailure
from fleetd.notify.core.signing import HEADER_ID
from fleetd.notify.request import WebhookRequest
from fleetd.notify.sink import SinkTarget
from fleetd.notify.sink_status import SinkReason, SinkStatus
from fleetd.resilience import BreakerState
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import (
    RoutedSender,
    human_incident,
    make_leg,
    make_worker,
    open_incident,
    target,
    verify,
)

PRIMARY, SECOND, THIRD = (f"http://127.0.0.1:9/hooks/{n}" for n in ("a", "b", "c"))
BUSY = PostResult(status=503)
REFUSED = PostResult(failure=TransportFailure.NETWORK)


async def test_a_failed_primary_hands_the_same_attempt_to_the_second() -> None:
    """503 from the primary: the second receiver gets the same event, same webhook-id, signed
    anew; one journal attempt, delivered."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = RoutedSender({PRIMARY: [BUSY]})
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    worker = make_worker(journal, sender, clock, sink=target(PRIMARY, SECOND))
    report = await worker.step()
    assert (report.claimed, report.delivered, report.retried) == (1, 1, 0)
    first, second = sender.requests
    assert (first.url, second.url) == (PRIMARY, SECOND)
    assert first.headers[HEADER_ID] == second.headers[HEADER_ID]
    assert first.body == second.body
    verify(second.body, second.headers, now=T0)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert (stored.events[0].state, stored.events[0].attempts) == (EventState.DELIVERED, 1)
    assert worker.health.status is SinkStatus.OK


async def test_a_request_error_is_permanent_and_never_fails_over() -> None:
    """404 from the primary: failed for the event, named by the list's generation; the second
    receiver is never asked."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = RoutedSender({PRIMARY: [PostResult(status=404)]})
    sink = target(PRIMARY, SECOND)
    incident = human_incident()
    await open_incident(journal, incident, at=T0)
    worker = make_worker(journal, sender, clock, sink=sink)
    assert (await worker.step()).failed == 1
    assert sender.to(SECOND) == []
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events[0].state is EventState.FAILED
    assert worker.health.reason is SinkReason.PERMANENT_FAILURE


async def test_one_receiver_down_is_not_degraded_and_every_receiver_down_is() -> None:
    """The primary's breaker open while the second serves: ok. Both refusing three times: no
    breaker closed, all_receivers_down, nothing claimed; after the cooldown one event probes,
    and once a receiver answers every event is delivered exactly once."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = RoutedSender({PRIMARY: [REFUSED] * 3})
    worker = make_worker(journal, sender, clock, sink=target(PRIMARY, SECOND), draws=[0.0] * 9)
    for n in range(3):
        await open_incident(journal, human_incident(f"sess_{n}"), at=T0)
    assert (await worker.step()).delivered == 3
    receivers = worker.receivers()
    assert receivers is not None
    assert (receivers.active, receivers.all_down) == (1, False)
    assert worker.health.status is SinkStatus.OK
    sender.answer(PRIMARY, REFUSED)  # its probe, once the cooldown has passed
    sender.answer(SECOND, *[REFUSED] * 3)
    for n in range(3, 6):
        await open_incident(journal, human_incident(f"sess_{n}"), at=T0)
    clock.advance(5)
    report = await worker.step()  # the primary probed and failed, the second refused thrice
    assert report.retried == 3
    assert (worker.health.status, worker.health.reason) == (
        SinkStatus.DEGRADED,
        SinkReason.ALL_RECEIVERS_DOWN,
    )
    receivers = worker.receivers()
    assert receivers is not None
    assert receivers.all_down
    assert (await worker.step()).claimed == 0
    clock.advance(5)  # the second's cooldown ends (the primary's, doubled, runs to 10 s)
    probe = await worker.step()
    assert (probe.claimed, probe.delivered) == (1, 1)
    assert worker.health.status is SinkStatus.OK
    assert (await worker.step()).delivered == 2
    delivered = [r.headers[HEADER_ID] for r in sender.to(SECOND)[-3:]]
    assert len(set(delivered)) == 3
    assert (await journal.stats()).queue_depth == 0


async def test_a_reload_swaps_the_list_between_passes() -> None:
    """A new list is taken at the next pass of the webhook loop: the receiver still listed keeps
    its open breaker, the new one starts closed and takes the event; the list's new generation
    re-arms the event the old list refused."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = RoutedSender({PRIMARY: [REFUSED] * 3, SECOND: [PostResult(status=404)]})
    current: dict[str, SinkTarget] = {"target": target(PRIMARY, SECOND)}
    leg = make_leg(journal, sender, clock, sink=lambda: current["target"], draws=[0.0] * 3)
    worker = leg.worker
    for n in range(3):
        await open_incident(journal, human_incident(f"sess_{n}"), at=T0)
    report = await leg.step()
    assert (report.delivered, report.failed) == (2, 1)
    current["target"] = target(THIRD, PRIMARY)
    report = await leg.step()
    assert (report.claimed, report.delivered) == (1, 1)
    assert sender.requests[-1].url == THIRD
    receivers = worker.receivers()
    assert receivers is not None
    fresh, kept = receivers.pool.endpoints
    assert fresh.breaker.state is BreakerState.CLOSED
    assert kept.breaker.state is BreakerState.OPEN
    assert (fresh.health.calls, kept.health.calls) == (1, 3)


async def test_disabling_forgets_the_receivers() -> None:
    """Notifications off: no receivers to report; on again: every receiver starts afresh."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    sender = RoutedSender({PRIMARY: [REFUSED] * 3})
    current: dict[str, SinkTarget | None] = {"target": target(PRIMARY, SECOND)}
    worker = make_worker(journal, sender, clock, sink=lambda: current["target"])
    for n in range(3):
        await open_incident(journal, human_incident(f"sess_{n}"), at=T0)
    await worker.step()
    before = worker.receivers()
    assert before is not None
    assert before.pool.endpoints[0].breaker.state is BreakerState.OPEN
    current["target"] = None
    await worker.step()
    assert worker.receivers() is None
    current["target"] = target(PRIMARY, SECOND)
    await worker.step()
    after = worker.receivers()
    assert after is not None
    assert after.pool.endpoints[0].breaker.state is BreakerState.CLOSED


async def test_slow_receivers_leave_the_lease_enough_time_for_the_last() -> None:
    """The lease holds one request limit per receiver and one more: two receivers that time out
    after the whole limit still let the third take the event in the same attempt."""
    journal, clock = InMemoryJournal(), FakeClock(T0)
    limit = timedelta(seconds=30)
    timeout = PostResult(failure=TransportFailure.TIMEOUT)

    class Slow(RoutedSender):
        async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
            if request.url != THIRD:
                clock.advance(limit.total_seconds())
            return await super().send(request, limit=limit)

    sender = Slow({PRIMARY: [timeout], SECOND: [timeout]})
    await open_incident(journal, human_incident(), at=T0)
    sink = target(PRIMARY, SECOND, THIRD, limit=limit)
    worker = make_worker(journal, sender, clock, sink=sink)
    assert (await worker.step()).delivered == 1
    assert [r.url for r in sender.requests] == [PRIMARY, SECOND, THIRD]
