"""slack mode end to end on the fake clock: a sole lead's failure reaches local incoming
webhooks that check each message's ``text`` and ``blocks`` as Slack documents them and answer
Slack's documented errors — 200 ``ok``, 400 ``invalid_payload`` (fleetd's bug), 404
``no_service``, 410 ``channel_is_archived``, 429 with Retry-After, 500 ``rollup_error`` —
through the one delivery path ``fleetd serve`` runs."""

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
from tests.integration.sink_receivers import slack_judge, slack_problems
from tests.integration.test_notify_sink_fleet import deliver, sink_worker, ticks


def slack_fleet(tmp_path: Path, *urls: str) -> TestFleet:
    """One lead (no peer), health on, slack mode posting to ``urls`` (failover order)."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    names = [f"SLACK_URL_{index}" for index in range(len(urls))]
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": {"mode": "slack", "webhookUrlEnvs": names},
    }
    return build_test_fleet(
        tmp_path, document=document, environ=dict(zip(names, urls, strict=True))
    )


async def _lead_fails(fleet: TestFleet) -> None:
    await fleet.service.own_lead_keys()
    fleet.control.remove("lead")
    await ticks(fleet, 3)


async def _lead_returns(fleet: TestFleet) -> None:
    fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
    await ticks(fleet, 2)


async def test_slack_hears_the_open_after_a_throttle_and_an_outage_then_the_resolution(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """429 (Retry-After honoured) and 500 rollup_error are retried; the open and the resolved
    message each pass Slack's checks; the incoming-webhook URL appears in no log line."""
    caplog.set_level(logging.DEBUG)
    async with HookServer() as server:
        server.judge = slack_judge
        url = server.url
        fleet = slack_fleet(tmp_path, url)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await _lead_fails(fleet)
        server.answer(Reply(status=429, headers={"retry-after": "4"}, body=b"rate_limited"))
        assert (await deliver(fleet, worker)).retried == 1
        fleet.clock.advance(3)
        assert (await deliver(fleet, worker)).claimed == 0
        fleet.clock.advance(1)
        server.answer(Reply(status=500, body=b"rollup_error"))
        assert (await deliver(fleet, worker)).retried == 1
        fleet.clock.advance(8)
        assert (await deliver(fleet, worker)).delivered == 1
        await _lead_returns(fleet)
        assert (await deliver(fleet, worker)).delivered == 1
        received = list(server.received)
        await sender.aclose()
    assert [slack_problems(r) for r in received] == [[]] * 4
    messages = [json.loads(r.body) for r in received]
    headers = [m["blocks"][0]["text"]["text"] for m in messages]
    assert headers == ["fleetd incident opened"] * 3 + ["fleetd incident resolved"]
    assert "LEAD_UNREACHABLE" in messages[0]["text"]
    assert url not in caplog.text


async def test_an_archived_channel_moves_the_message_to_the_next_webhook(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """410 channel_is_archived disables that webhook and the same message goes to the next one;
    the next one's 404 no_service is a permanent refusal of that event (a WARNING, not a bug)."""
    caplog.set_level(logging.DEBUG)
    async with HookServer() as first, HookServer() as second:
        first.judge = second.judge = slack_judge
        fleet = slack_fleet(tmp_path, first.url, second.url)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await _lead_fails(fleet)
        first.answer(Reply(status=410, body=b"channel_is_archived"))
        assert (await deliver(fleet, worker)).delivered == 1
        receivers = worker.receivers()
        assert receivers is not None
        assert receivers.disabled == frozenset({0})
        await _lead_returns(fleet)
        second.answer(Reply(status=404, body=b"no_service"))
        assert (await deliver(fleet, worker)).failed == 1
        opened, resolved = second.received
        await sender.aclose()
    assert len(first.received) == 1
    assert first.received[0].body == opened.body
    assert slack_problems(resolved) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "http_4xx" in caplog.text


async def test_invalid_payload_is_fleetd_s_bug_never_the_webhook_s_fault(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """400 invalid_payload fails that message as payload_bug with one ERROR and a metric; the
    webhook keeps its standing (not disabled, no failover, nothing sent again)."""
    caplog.set_level(logging.DEBUG)
    async with HookServer() as first, HookServer() as second:
        fleet = slack_fleet(tmp_path, first.url, second.url)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await _lead_fails(fleet)
        first.answer(Reply(status=400, body=b"invalid_payload"))
        assert (await deliver(fleet, worker)).failed == 1
        fleet.clock.advance(900)
        assert (await deliver(fleet, worker)).claimed == 0
        await sender.aclose()
    assert (len(first.received), len(second.received)) == (1, 0)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "fleetd bug" in errors[0]
    exposition = fleet.service.metrics.exposition().decode()
    assert 'fleet_health_notifications_total{event="open",outcome="payload_bug"} 1.0' in exposition
    receivers = worker.receivers()
    assert receivers is not None
    assert not receivers.disabled
