"""Ordered webhook receivers end to end: the delivery worker, the httpx sender and two real HTTP
receivers on 127.0.0.1, on the fake clock. Every request a receiver gets is checked with the
``standardwebhooks`` reference library at the time it was signed."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.clock import FakeClock
from fleetd.compose import Fleetd
from fleetd.journal.memory import InMemoryJournal
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.worker import PassReport, SinkWorker
from fleetd.resilience import BreakerState
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.contract.journal_cases import T0
from tests.integration.hook_server import HookServer, Received, Reply
from tests.unit.notify.sink_kit import (
    SECRET_TEXT,
    human_incident,
    make_worker,
    open_incident,
    verify,
)
from tests.unit.notify.sink_kit import target as sink_target


@dataclass
class Pair:
    """Two receivers, primary first, and a worker that fails over between them."""

    journal: InMemoryJournal
    clock: FakeClock
    primary: HookServer
    second: HookServer
    worker: SinkWorker

    async def incidents(self, *subjects: str) -> None:
        for subject in subjects:
            await open_incident(self.journal, human_incident(subject), at=self.clock.now())

    def states(self) -> tuple[BreakerState, ...]:
        report = self.worker.receivers()
        assert report is not None
        return tuple(e.breaker.state_at(self.clock.now()) for e in report.pool.endpoints)


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    clock = FakeClock(T0)
    sender = HttpWebhookSender(clock=clock)
    journal = InMemoryJournal()
    async with HookServer() as primary, HookServer() as second:
        sink = sink_target(primary.url, second.url)
        worker = make_worker(journal, sender, clock, sink=sink, draws=[0.0] * 20)
        yield Pair(journal=journal, clock=clock, primary=primary, second=second, worker=worker)
    await sender.aclose()


def event_id(received: Received, secret: str = SECRET_TEXT) -> str:
    """The reference library accepts the request at its signing time; its id, which is the
    Idempotency-Key and the body's eventId."""
    signed_at = datetime.fromtimestamp(int(received.headers["webhook-timestamp"]), UTC)
    document = verify(received.body, received.headers, now=signed_at, secret=secret)
    assert received.headers["webhook-id"] == received.headers["idempotency-key"]
    assert document["eventId"] == received.headers["webhook-id"]
    return received.headers["webhook-id"]


async def test_a_failing_primary_opens_its_breaker_and_returns_after_one_probe(
    pair: Pair,
) -> None:
    """The primary answers 503 three times: each of the three events goes on to the second
    receiver with the same webhook-id, and the primary's breaker opens. While it is open the
    second takes every event. After the 5 s cooldown the primary is probed exactly once (an
    event in the same pass goes to the second); its answer closes the breaker and the primary
    takes the traffic again."""
    pair.primary.answer(*[Reply(status=503)] * 3)
    await pair.incidents("sess_1", "sess_2", "sess_3")
    assert (await pair.worker.step()).delivered == 3
    refused = [event_id(r) for r in pair.primary.received]
    taken = [event_id(r) for r in pair.second.received]
    assert len(set(refused)) == 3
    assert sorted(refused) == sorted(taken)
    assert [r.body for r in sorted(pair.primary.received, key=event_id)] == [
        r.body for r in sorted(pair.second.received, key=event_id)
    ]
    assert pair.states() == (BreakerState.OPEN, BreakerState.CLOSED)
    assert pair.worker.health.ok

    await pair.incidents("sess_4")
    assert (await pair.worker.step()).delivered == 1
    assert (len(pair.primary.received), len(pair.second.received)) == (3, 4)

    pair.clock.advance(5)
    await pair.incidents("sess_5", "sess_6")
    assert (await pair.worker.step()).delivered == 2
    assert (len(pair.primary.received), len(pair.second.received)) == (4, 5)
    probe, beside = pair.primary.received[-1], pair.second.received[-1]
    assert event_id(probe) != event_id(beside)
    assert pair.states() == (BreakerState.CLOSED, BreakerState.CLOSED)

    await pair.incidents("sess_7", "sess_8")
    assert (await pair.worker.step()).delivered == 2
    assert (len(pair.primary.received), len(pair.second.received)) == (6, 5)
    report = pair.worker.receivers()
    assert report is not None
    assert report.active == 0


async def test_a_throttling_primary_never_opens_its_breaker(pair: Pair) -> None:
    """429 with Retry-After from the primary, event after event: each event goes on to the
    second receiver, the primary's breaker stays closed, and the primary is asked first every
    time (it takes the next event once it answers)."""
    pair.primary.answer(*[Reply(status=429, headers={"Retry-After": "30"})] * 4)
    for n in range(4):
        await pair.incidents(f"sess_{n}")
        assert (await pair.worker.step()).delivered == 1
        assert pair.states() == (BreakerState.CLOSED, BreakerState.CLOSED)
    assert [event_id(r) for r in pair.primary.received] == [
        event_id(r) for r in pair.second.received
    ]
    await pair.incidents("sess_last")
    assert (await pair.worker.step()).delivered == 1
    assert (len(pair.primary.received), len(pair.second.received)) == (5, 4)
    report = pair.worker.receivers()
    assert report is not None
    assert report.pool.endpoints[0].health.failures == 4  # throttles, counted, never struck


SECRET = "whsec_" + base64.b64encode(b"r" * 32).decode()


def two_receiver_fleet(tmp_path: Path, primary: str, second: str) -> TestFleet:
    """One lead (no peer), health on, webhook mode with two receivers."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": {
            "mode": "webhook",
            "webhookUrlEnvs": ["HOOK_PRIMARY", "HOOK_SECOND"],
            "secretEnv": "HOOK_KEY",
        },
    }
    env = {"HOOK_PRIMARY": primary, "HOOK_SECOND": second, "HOOK_KEY": SECRET}
    return build_test_fleet(tmp_path, document=document, environ=env)


async def webhook_pass(service: Fleetd) -> PassReport:
    """One pass of the service's webhook loop as ``compose`` schedules it: the escalation shell
    records what is owed, then the service's own worker delivers (its report)."""
    escalation = service.health.escalation
    assert escalation is not None
    await escalation.step(service.clock.now())
    return await service.sink.step()


async def fleet_view(fleet: TestFleet) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
        answer = await http.get("/v1/fleet", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    result = answer.json()["result"]
    assert isinstance(result, dict)
    return result


async def test_every_receiver_down_degrades_coverage_and_the_event_goes_out_once_after(
    tmp_path: Path,
) -> None:
    """The service's own webhook loop: a sole lead's failure is an event; both receivers answer 503
    to three attempts, so both breakers open — coverage is degraded (all_receivers_down),
    fleet_list shows allDown, and nothing is claimed while they cool down. Once they answer,
    the primary's probe delivers the event exactly once and coverage is full again."""
    async with HookServer() as primary, HookServer() as second:
        fleet = two_receiver_fleet(tmp_path, primary.url, second.url)
        service = fleet.service
        primary.answer(*[Reply(status=503)] * 3)
        second.answer(*[Reply(status=503)] * 3)
        await service.own_lead_keys()
        fleet.control.remove("lead")
        for _ in range(3):
            fleet.clock.advance(15)
            await service.health.tick()
        assert service.health.coverage().status == "full"
        for attempt in range(3):
            if attempt:
                fleet.clock.advance(15 * 60)  # past any retry wait; the breakers stay closed
            report = await webhook_pass(service)
            assert (report.claimed, report.retried) == (1, 1)
        assert (len(primary.received), len(second.received)) == (3, 3)

        coverage = service.health.coverage()
        assert coverage.status == "degraded"
        assert "all_receivers_down" in str(coverage.reason)
        webhook = (await fleet_view(fleet))["dependencies"]["webhook"]
        assert (webhook["kind"], webhook["allDown"], webhook["active"]) == ("webhook", True, None)
        assert [e["breaker"] for e in webhook["endpoints"]] == ["open", "open"]
        assert "://" not in str(webhook)
        text = service.metrics.exposition().decode()
        assert 'fleetd_dependency_all_down{kind="webhook"} 1.0' in text

        assert (await webhook_pass(service)).claimed == 0
        fleet.clock.advance(15 * 60)  # the cooldowns and the event's retry wait have passed
        report = await webhook_pass(service)
        assert (report.claimed, report.delivered) == (1, 1)
        assert (len(primary.received), len(second.received)) == (4, 3)
        assert service.health.coverage().status == "full"
        assert (await fleet_view(fleet))["dependencies"]["webhook"]["active"] == 0
        fleet.clock.advance(60)
        assert (await webhook_pass(service)).claimed == 0
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
            listed = await http.get(
                "/v1/incidents", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}
            )
        await service.sender.aclose()
    ids = {event_id(r, SECRET) for r in [*primary.received, *second.received]}
    assert len(ids) == 1
    [row] = listed.json()["result"]["incidents"]
    assert row["delivery"] == "delivered"
    assert [(e["type"], e["attempts"]) for e in row["events"]] == [("open", 4)]
