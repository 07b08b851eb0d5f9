"""Unit 5 criterion 10's retry table end to end: the delivery worker, the httpx sender and a real
HTTP receiver on 127.0.0.1, on the fake clock. Every request the receiver gets is checked with
the ``standardwebhooks`` reference library at the receiver's (fake) time."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from fleetd.clock import FakeClock
from fleetd.compose import WEBHOOK_PASS_SECONDS
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventState, StoredEvent
from fleetd.notify.core.retry import MAX_DELAY
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.sink import SinkTarget
from fleetd.notify.worker import SinkWorker
from tests.contract.journal_cases import T0
from tests.integration.hook_server import HookServer, Received, Reply
from tests.unit.notify.sink_kit import (
    OTHER_SECRET_TEXT,
    SECRET_TEXT,
    human_incident,
    make_leg,
    make_worker,
    open_incident,
    target,
    verify,
)


def http_date(moment: datetime) -> str:
    return moment.strftime("%a, %d %b %Y %H:%M:%S GMT")


@dataclass
class Rig:
    journal: InMemoryJournal
    clock: FakeClock
    sender: HttpWebhookSender
    server: HookServer

    def worker(self, sink: SinkTarget | None = None, **options: object) -> SinkWorker:
        return make_worker(
            self.journal,
            self.sender,
            self.clock,
            sink=sink or target(self.server.url),
            **options,  # type: ignore[arg-type]
        )

    async def event(self, incident_id: str) -> StoredEvent:
        stored = await self.journal.get(incident_id)
        assert stored is not None
        return stored.events[0]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    clock = FakeClock(T0)
    sender = HttpWebhookSender(clock=clock)
    async with HookServer() as server:
        yield Rig(journal=InMemoryJournal(), clock=clock, sender=sender, server=server)
    await sender.aclose()


def checked(received: Received, at: datetime, secret: str = SECRET_TEXT) -> dict[str, object]:
    """The receiver's view: the reference library accepts it, and both ids agree with the body."""
    document = verify(received.body, received.headers, now=at, secret=secret)
    assert received.headers["webhook-id"] == received.headers["idempotency-key"]
    assert document["eventId"] == received.headers["webhook-id"]
    return document


RETRYABLE = [
    pytest.param(Reply(status=408), "http_408", 408, timedelta(seconds=2.5), id="408"),
    pytest.param(Reply(status=429), "http_429", 429, timedelta(seconds=2.5), id="429"),
    pytest.param(Reply(status=500), "http_5xx", 500, timedelta(seconds=2.5), id="500"),
    pytest.param(Reply(status=503), "http_5xx", 503, timedelta(seconds=2.5), id="503"),
    pytest.param(Reply(reset=True), "network", None, timedelta(seconds=2.5), id="reset"),
    pytest.param(
        Reply(status=429, headers={"Retry-After": "7"}),
        "http_429",
        429,
        timedelta(seconds=7),
        id="retry-after-seconds",
    ),
    pytest.param(
        Reply(status=503, headers={"Retry-After": "3600"}),
        "http_5xx",
        503,
        MAX_DELAY,
        id="retry-after-seconds-capped",
    ),
    pytest.param(
        Reply(status=503, headers={"Retry-After": http_date(T0 + timedelta(seconds=120))}),
        "http_5xx",
        503,
        timedelta(seconds=120),
        id="retry-after-date",
    ),
    pytest.param(
        Reply(status=429, headers={"Retry-After": http_date(T0 + timedelta(hours=2))}),
        "http_429",
        429,
        MAX_DELAY,
        id="retry-after-date-capped",
    ),
    pytest.param(
        Reply(status=503, headers={"Retry-After": http_date(T0 - timedelta(hours=1))}),
        "http_5xx",
        503,
        timedelta(seconds=2.5),
        id="retry-after-date-past",
    ),
    pytest.param(
        Reply(status=429, headers={"Retry-After": "0"}),
        "http_429",
        429,
        timedelta(seconds=2.5),
        id="retry-after-zero",
    ),
]


@pytest.mark.parametrize(("reply", "failure", "status", "delay"), RETRYABLE)
async def test_a_retryable_answer_schedules_the_next_attempt(
    rig: Rig, reply: Reply, failure: str, status: int | None, delay: timedelta
) -> None:
    """One attempt, then exactly one outstanding attempt due after the drawn wait (draw 0.5 of
    5 s), or the server's when that is longer; the next attempt carries the same id and
    verifies."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(reply)
    worker = rig.worker(draws=[0.5])
    assert (await worker.step()).retried == 1
    event = await rig.event(incident.id)
    assert (event.state, event.attempts, event.due_at) == (EventState.PENDING, 2, T0 + delay)
    assert (event.last_failure, event.last_http_status) == (failure, status)
    assert (await rig.journal.stats()).queue_depth == 1
    rig.clock.advance(delay.total_seconds())
    assert (await worker.step()).delivered == 1
    first, second = rig.server.received
    checked(first, T0)
    checked(second, T0 + delay)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.body == second.body


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422, 307])
async def test_other_answers_are_permanent_for_the_event(rig: Rig, status: int) -> None:
    """4xx (and an unfollowed redirect): failed, no further attempt, however long one waits."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(Reply(status=status, headers={"Location": "http://127.0.0.1:1/x"}))
    worker = rig.worker()
    assert (await worker.step()).failed == 1
    rig.clock.advance(MAX_DELAY.total_seconds() * 4)
    assert (await worker.step()).claimed == 0
    event = await rig.event(incident.id)
    assert (event.state, event.attempts, event.due_at) == (EventState.FAILED, 1, None)
    assert event.last_http_status == status
    assert len(rig.server.received) == 1


async def test_a_refused_connection_is_retried(rig: Rig) -> None:
    """Nobody listening: network failure, retried after the drawn wait."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/hooks"
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    worker = rig.worker(target(closed), draws=[1.0])
    assert (await worker.step()).retried == 1
    event = await rig.event(incident.id)
    assert (event.last_failure, event.due_at) == ("network", T0 + timedelta(seconds=5))


async def test_a_hanging_receiver_times_out_and_stays_the_one_outstanding_attempt(
    rig: Rig,
) -> None:
    """While the first attempt hangs, a second worker claims nothing for the event; at
    requestTimeoutMs on the fake clock the attempt ends as a timeout and one retry is due."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(Reply(hang=True))
    limit = timedelta(seconds=2)
    worker = rig.worker(target(rig.server.url, limit=limit), draws=[1.0])
    other = rig.worker(target(rig.server.url, limit=limit), owner="fleetd-b")
    running = asyncio.ensure_future(worker.step())
    await rig.server.arrived.wait()
    assert (await other.step()).claimed == 0
    assert (await rig.journal.stats()).queue_depth == 1
    rig.clock.advance(limit.total_seconds())
    report = await running
    assert report.retried == 1
    event = await rig.event(incident.id)
    assert (event.last_failure, event.attempts) == ("timeout", 2)
    assert event.due_at == T0 + limit + timedelta(seconds=5)
    assert (await rig.journal.stats()).queue_depth == 1


async def test_the_backoff_grows_by_three_up_to_the_cap_with_one_id(rig: Rig) -> None:
    """503 eight times with the largest draw: waits 5, 15, 45, 135, 405 s, then 15 min each
    time; the ninth attempt is delivered. One webhook-id, one body, nine valid signatures."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(*[Reply(status=503)] * 8)
    worker = rig.worker()
    waits = []
    for _ in range(8):
        before = rig.clock.now()
        assert (await worker.step()).retried == 1
        event = await rig.event(incident.id)
        assert event.due_at is not None
        waits.append(event.due_at - before)
        rig.clock.advance((event.due_at - before).total_seconds())
    assert (await worker.step()).delivered == 1
    assert [w.total_seconds() for w in waits] == [5, 15, 45, 135, 405, 900, 900, 900]
    received = rig.server.received
    assert len({r.headers["webhook-id"] for r in received}) == 1
    assert len({r.body for r in received}) == 1
    at = T0
    for request, wait in zip(received, [timedelta(0), *waits], strict=True):
        at += wait
        checked(request, at)


async def test_retry_after_zero_keeps_the_backoff_schedule_and_its_cap(rig: Rig) -> None:
    """2b: a receiver answering 429 and 503 with Retry-After: 0 (and a date already past) to
    every request, with the worker passing every 0.5 s as `fleetd serve` does, is asked on the
    backoff schedule (5, 15, 45, 135, 405 s, then the 15-minute cap), not on every pass; every
    throttled attempt counts in the event's attempt number; one webhook-id throughout."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    now_please = [
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(status=503, headers={"Retry-After": "0"}),
        Reply(status=429, headers={"Retry-After": http_date(T0 - timedelta(hours=1))}),
    ]
    rig.server.answer(*(now_please * 3)[:7])
    worker = rig.worker()  # every draw 1.0: the ceiling of each attempt's backoff
    sent_at: list[timedelta] = []
    passes = 0
    while len(rig.server.received) < 8:
        before = len(rig.server.received)
        await worker.step()
        if len(rig.server.received) > before:
            sent_at.append(rig.clock.now() - T0)
        rig.clock.advance(WEBHOOK_PASS_SECONDS)
        passes += 1
        assert passes < 10_000, "the event was never delivered"
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(sent_at)]
    assert gaps == [5, 15, 45, 135, 405, 900, 900]
    assert sum(1 for at in sent_at if at <= timedelta(seconds=20)) == 3
    event = await rig.event(incident.id)
    assert (event.state, event.attempts) == (EventState.DELIVERED, 8)
    assert len({r.headers["webhook-id"] for r in rig.server.received}) == 1


async def test_jitter_draws_fall_between_zero_and_the_ceiling(rig: Rig) -> None:
    """Draws 0, 0.37 and 1 on three first failures: waits 0, 1.85 and 5 seconds."""
    incidents = [human_incident(f"sess_{n}") for n in range(3)]
    for incident in incidents:
        await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(*[Reply(status=500)] * 3)
    worker = rig.worker(draws=[0.0, 0.37, 1.0])
    assert (await worker.step()).retried == 3
    dues = sorted([due for i in incidents if (due := (await rig.event(i.id)).due_at) is not None])
    assert [d - T0 for d in dues] == [
        timedelta(0),
        timedelta(seconds=1.85),
        timedelta(seconds=5),
    ]


async def test_a_config_change_re_arms_a_permanent_failure_for_the_new_target(rig: Rig) -> None:
    """404 from the first target; the config now names another URL and secret: the webhook
    loop's next pass re-arms the event and delivers it there, with the same id, signed with the
    new secret."""
    incident = human_incident()
    rig.server.answer(Reply(status=404))
    current = {"target": target(rig.server.url)}
    leg = make_leg(rig.journal, rig.sender, rig.clock, sink=lambda: current["target"])
    leg.escalation.note(incident)
    assert (await leg.step()).failed == 1
    async with HookServer() as moved:
        current["target"] = target(moved.url, secret=OTHER_SECRET_TEXT)
        rig.clock.advance(60)
        report = await leg.step()
        assert (report.claimed, report.delivered) == (1, 1)
        (delivered,) = moved.received
    document = checked(delivered, T0 + timedelta(seconds=60), secret=OTHER_SECRET_TEXT)
    assert document["eventId"] == rig.server.received[0].headers["webhook-id"]
    event = await rig.event(incident.id)
    assert (event.state, event.attempts) == (EventState.DELIVERED, 2)


async def test_the_response_body_cannot_steer_the_worker(rig: Rig) -> None:
    """A 200 whose body asks for more is one delivery; nothing else is sent or changed."""
    incident = human_incident()
    await open_incident(rig.journal, incident, at=T0)
    rig.server.answer(Reply(status=200, body=b'{"replay": true, "resend": "all"}'))
    worker = rig.worker()
    assert (await worker.step()).delivered == 1
    rig.clock.advance(60)
    assert (await worker.step()).claimed == 0
    assert len(rig.server.received) == 1
