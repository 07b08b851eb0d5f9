"""pagerduty mode end to end on the fake clock: a sole lead's failure reaches a local receiver
that checks each Events API v2 ``enqueue`` request field by field and answers as PagerDuty
documents (202, 400 invalid event, 429, 5xx), through the one delivery path ``fleetd serve``
runs (the service's escalation shell, then the delivery worker over the configured target)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.notify.http import HttpWebhookSender
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer, Reply
from tests.integration.sink_receivers import pagerduty_judge, pagerduty_problems
from tests.integration.test_notify_sink_fleet import deliver, sink_worker, ticks

ROUTING_KEY = "R0utingKeyOfTheFleetdService0123"


def pagerduty_fleet(tmp_path: Path, url: str, routing_key: str = ROUTING_KEY) -> TestFleet:
    """One lead (no peer), health on, pagerduty mode sending to ``url``."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": {
            "mode": "pagerduty",
            "webhookUrlEnv": "PD_URL",
            "routingKeyEnv": "PD_KEY",
        },
    }
    env = {"PD_URL": url, "PD_KEY": routing_key}
    return build_test_fleet(tmp_path, document=document, environ=env)


def enqueue_url(server: HookServer) -> str:
    return server.url.removesuffix("/hooks/fleetd") + "/v2/enqueue"


async def test_a_lead_failure_triggers_and_resolves_one_pagerduty_alert(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """trigger (after a 429 with Retry-After and a 502, both retried), then resolve under the
    same dedup_key when the lead is back; every request has PagerDuty's shape; the routing key
    is in the bodies and in no log line."""
    caplog.set_level(logging.DEBUG)
    async with HookServer() as server:
        server.judge = pagerduty_judge(ROUTING_KEY)
        fleet = pagerduty_fleet(tmp_path, enqueue_url(server))
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await ticks(fleet, 3)
        server.answer(Reply(status=429, headers={"retry-after": "3"}))
        assert (await deliver(fleet, worker)).retried == 1
        fleet.clock.advance(2)
        assert (await deliver(fleet, worker)).claimed == 0  # Retry-After is not over
        fleet.clock.advance(1)
        server.answer(Reply(status=502))
        assert (await deliver(fleet, worker)).retried == 1
        fleet.clock.advance(8)
        assert (await deliver(fleet, worker)).delivered == 1
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await ticks(fleet, 2)
        assert (await deliver(fleet, worker)).delivered == 1
        received = list(server.received)
        await sender.aclose()
    assert [pagerduty_problems(r, routing_key=ROUTING_KEY) for r in received] == [[]] * 4
    events = [json.loads(r.body) for r in received]
    assert [e["event_action"] for e in events] == ["trigger"] * 3 + ["resolve"]
    [incident_id] = {e["dedup_key"] for e in events}
    assert incident_id.startswith("inc_")
    trigger = events[0]["payload"]
    assert (trigger["severity"], trigger["class"]) == ("critical", "LEAD_UNREACHABLE")
    assert ROUTING_KEY not in caplog.text


async def test_a_refused_routing_key_fails_the_event_as_fleetd_s_bug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PagerDuty's 400 "Event object is invalid" is never retried: the event fails as
    payload_bug with one ERROR (no key in it), the metric counts it, and the receiver stays."""
    caplog.set_level(logging.DEBUG)
    wrong = "NotTheIntegrationKeyOfThisService"
    async with HookServer() as server:
        server.judge = pagerduty_judge(ROUTING_KEY)
        fleet = pagerduty_fleet(tmp_path, enqueue_url(server), routing_key=wrong)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await ticks(fleet, 3)
        assert (await deliver(fleet, worker)).failed == 1
        fleet.clock.advance(900)
        assert (await deliver(fleet, worker)).claimed == 0
        assert len(server.received) == 1
        await sender.aclose()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "fleetd bug" in errors[0]
    assert wrong not in caplog.text
    exposition = fleet.service.metrics.exposition().decode()
    assert 'fleet_health_notifications_total{event="open",outcome="payload_bug"} 1.0' in exposition
    receivers = worker.receivers()
    assert receivers is not None
    assert not receivers.disabled
