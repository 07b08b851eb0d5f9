"""alertmanager mode end to end against a real Alertmanager: a sole lead's failure, taken by the
one delivery path ``fleetd serve`` runs (the service's escalation shell, then the delivery worker
over the configured target, on the fake clock), reaches the Alertmanager as a firing alert, is
re-posted while open, and resolves; the Alertmanager groups it by ``alertname`` and tells its
own webhook receiver (a local :class:`HookServer`) firing, then resolved. The waits are on that
receiver's arrivals, bounded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.identity import Caller, Role
from fleetd.notify.alertmanager import ALERTNAME
from fleetd.notify.http import HttpWebhookSender
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.integration.alertmanager_process import Alertmanager
from tests.integration.hook_server import HookServer, Reply
from tests.integration.test_notify_sink_fleet import deliver, sink_worker, ticks

NOTIFY_LIMIT = 30.0
"""How long the Alertmanager may take to notify its receiver (group_wait and group_interval
are 1 s)."""


def alertmanager_fleet(tmp_path: Path, url: str) -> TestFleet:
    """One lead (no peer), health on, alertmanager mode posting to the Alertmanager at ``url``."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": {"mode": "alertmanager", "webhookUrlEnvs": ["AM_URL"]},
    }
    return build_test_fleet(tmp_path, document=document, environ={"AM_URL": url})


async def notification(receiver: HookServer, status: str) -> dict[str, Any]:
    """The first Alertmanager notification with ``status`` the receiver got (waiting for it)."""

    async def arrival() -> dict[str, Any]:
        while True:
            for request in receiver.received:
                document: dict[str, Any] = json.loads(request.body)
                if document["status"] == status:
                    return document
            receiver.arrived.clear()
            await receiver.arrived.wait()

    return await asyncio.wait_for(arrival(), NOTIFY_LIMIT)


async def test_alertmanager_groups_fleetd_s_alert_and_reports_it_resolved(tmp_path: Path) -> None:
    """open → a firing alert Alertmanager groups under alertname and notifies; a re-post every
    alertmanagerRepostSeconds keeps it there; resolved → endsAt, and Alertmanager notifies the
    group resolved, with fleetd's labels on the alert throughout."""
    async with HookServer() as receiver, Alertmanager(tmp_path / "am", receiver.url) as am:
        fleet = alertmanager_fleet(tmp_path / "fleet", am.url)
        sender = HttpWebhookSender(clock=fleet.clock)
        worker = sink_worker(fleet, sender)
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await ticks(fleet, 3)
        assert (await deliver(fleet, worker)).delivered == 1
        firing = await notification(receiver, "firing")
        [held] = await am.alerts()
        fleet.clock.advance(59)
        assert (await deliver(fleet, worker)).claimed == 0
        fleet.clock.advance(1)
        assert (await deliver(fleet, worker)).delivered == 1  # the re-post
        [again] = await am.alerts()
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await ticks(fleet, 2)
        assert (await deliver(fleet, worker)).delivered == 1
        resolved = await notification(receiver, "resolved")
        await sender.aclose()
    assert firing["groupLabels"] == {"alertname": ALERTNAME}
    [alert] = firing["alerts"]
    labels = alert["labels"]
    assert set(labels) == {"alertname", "scope", "state", "severity", "fleetdInstance", "incident"}
    assert (labels["state"], labels["scope"], labels["severity"]) == (
        "LEAD_UNREACHABLE",
        "lead",
        "critical",
    )
    assert "LEAD_UNREACHABLE" in alert["annotations"]["summary"]
    assert held["labels"] == again["labels"] == labels
    assert held["status"]["state"] == again["status"]["state"] == "active"  # type: ignore[index]
    assert str(again["updatedAt"]) >= str(held["updatedAt"])  # ISO-8601 instants
    assert resolved["groupLabels"] == {"alertname": ALERTNAME}
    [closed] = resolved["alerts"]
    assert closed["status"] == "resolved"
    assert closed["labels"] == labels
    assert closed["startsAt"] == alert["startsAt"]


async def test_the_surfaces_name_the_sink_by_its_kind_when_every_alertmanager_is_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An Alertmanager that answers 503 to everything, behind the service's own delivery worker:
    ``fleet_list`` shows the human sink as ``alertmanager`` with every receiver down, the
    coverage reason names the alertmanager sink, and the dependency series carry
    ``kind="alertmanager"`` (what the shipped rule ``FleetdWebhookReceiversDown`` matches), and
    the log's breaker line names an alertmanager receiver."""
    async with HookServer() as receiver:
        receiver.judge = lambda _: Reply(status=503)
        fleet = alertmanager_fleet(tmp_path, receiver.url)
        service = fleet.service
        escalation = service.health.escalation
        assert escalation is not None
        await service.own_lead_keys()
        fleet.control.remove("lead")
        await ticks(fleet, 3)
        for _ in range(12):
            await escalation.step(fleet.clock.now())
            await service.sink.step()
            fleet.clock.advance(30)
        operator = Caller(role=Role.OPERATOR, name="operator")
        fleet_view = await fleet.ok("fleet_list", operator)
        exposition = service.metrics.exposition().decode()
    assert receiver.received, "the worker never dialled the Alertmanager"
    sink = fleet_view["dependencies"]["webhook"]
    assert (sink["kind"], sink["allDown"]) == ("alertmanager", True)
    assert {endpoint["kind"] for endpoint in sink["endpoints"]} == {"alertmanager"}
    assert "alertmanager sink failing" in fleet_view["healthCoverage"]["reason"]
    assert 'fleetd_dependency_all_down{kind="alertmanager"} 1.0' in exposition
    assert 'kind="webhook"' not in exposition
    breakers = [r.getMessage() for r in caplog.records if "breaker open" in r.getMessage()]
    assert breakers
    assert all(line.startswith("alertmanager receiver 0:") for line in breakers)
