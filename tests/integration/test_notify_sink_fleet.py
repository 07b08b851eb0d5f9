"""The whole human leg on the fake clock: the monitor ``fleetd serve`` runs detects a sole lead's
failure, the webhook loop records it and takes it to a real HTTP receiver, and ``/v1/incidents``
shows it.

Each pass is the webhook loop's: the service's own escalation shell, then a delivery worker built
here from the service's journal and the configured target, handing its deliveries to the shell
(as the composition root wires it, with a fixed jitter draw); the receiver checks every
signature with ``standardwebhooks``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from fleetd.api.app import create_app
from fleetd.herdr.model import AgentStatus
from fleetd.journal.port import Journal
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.sink import resolve_sink
from fleetd.notify.worker import PassReport, SinkWorker
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer, Reply
from tests.unit.notify.sink_kit import verify

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()


def webhook_fleet(
    tmp_path: Path, url: str, journal: Journal | None = None, *, instance: str | None = None
) -> TestFleet:
    """One lead (no peer), health on, webhook mode pointing at ``url`` (on ``journal``, default
    a fresh in-memory one), named ``instance`` when given."""
    document: dict[str, Any] = sample_document(tmp_path)
    if instance is not None:
        document["instance"] = instance
    document["leads"] = document["leads"][:1]
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_KEY"},
    }
    env = {"HOOK_URL": url, "HOOK_KEY": SECRET}
    return build_test_fleet(tmp_path, document=document, environ=env, journal=journal)


def sink_worker(fleet: TestFleet, sender: HttpWebhookSender) -> SinkWorker:
    service = fleet.service
    journal = service.health.journal
    escalation = service.health.escalation
    assert journal is not None
    assert escalation is not None
    return SinkWorker(
        journal=journal,
        target=lambda: resolve_sink(service.config.current.health.notifications, service.environ),
        sender=sender,
        clock=fleet.clock,
        draw=lambda: 0.5,
        metrics=service.metrics,
        owner="fleetd-test",
        settled=escalation.settled,
    )


async def deliver(fleet: TestFleet, worker: SinkWorker) -> PassReport:
    """One pass of the webhook loop: the escalation step, then the worker's."""
    escalation = fleet.service.health.escalation
    assert escalation is not None
    await escalation.step(fleet.clock.now())
    return await worker.step()


async def ticks(fleet: TestFleet, count: int) -> None:
    for _ in range(count):
        fleet.clock.advance(15)
        await fleet.service.health.tick()


async def test_a_sole_lead_failure_reaches_the_receiver_and_its_recovery_follows(
    tmp_path: Path,
) -> None:
    """open (after one 503 and its retry), then resolved when the lead is back; the operator's
    list shows both delivered; the metrics count them."""
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await ticks(fleet, 3)
        server.answer(Reply(status=503))
        assert (await deliver(fleet, worker)).retried == 1
        fleet.clock.advance(2.5)
        assert (await deliver(fleet, worker)).delivered == 1
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await ticks(fleet, 2)
        assert (await deliver(fleet, worker)).delivered == 1
        received = list(server.received)
        transport = httpx.ASGITransport(app=create_app(fleet.service))
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
            listed = await http.get(
                "/v1/incidents", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}
            )
        await sender.aclose()
    documents = []
    for request in received:
        sent_at = datetime.fromtimestamp(int(request.headers["webhook-timestamp"]), UTC)
        documents.append(verify(request.body, request.headers, now=sent_at, secret=SECRET))
    assert [d["eventType"] for d in documents] == ["open", "open", "resolved"]
    assert documents[0]["incident"]["state"] == "LEAD_UNREACHABLE"
    assert documents[0]["eventId"] == documents[1]["eventId"] != documents[2]["eventId"]
    [row] = listed.json()["result"]["incidents"]
    assert (row["status"], row["delivery"]) == ("resolved", "delivered")
    assert [(e["type"], e["attempts"]) for e in row["events"]] == [("open", 2), ("resolved", 1)]
    text = fleet.service.metrics.exposition().decode()
    assert 'fleet_health_notifications_total{event="open",outcome="http_5xx"} 1.0' in text
    assert 'fleet_health_notifications_total{event="resolved",outcome="delivered"} 1.0' in text
