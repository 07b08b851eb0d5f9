"""What the surfaces say of each webhook receiver, through the service `fleetd serve` builds: two
real HTTP receivers on 127.0.0.1, the service's own delivery worker, `/v1/fleet`, `/metrics`
and the replay endpoint, on the fake clock."""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventState
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer, Reply
from tests.unit.notify.sink_kit import human_incident, open_incident

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@dataclass
class Served:
    """A service whose webhook lists two receivers, its journal, and its HTTP face."""

    fleet: TestFleet
    journal: InMemoryJournal
    http: httpx.AsyncClient

    async def webhook(self) -> dict[str, Any]:
        answer = await self.http.get("/v1/fleet", headers=OPERATOR)
        block = answer.json()["result"]["dependencies"]["webhook"]
        assert isinstance(block, dict)
        return block

    async def metrics(self) -> str:
        return (await self.http.get("/metrics")).text

    async def incident(self, subject: str) -> str:
        incident = human_incident(subject)
        await open_incident(self.journal, incident, at=self.fleet.clock.now())
        return incident.id


def served(tmp_path: Path, primary: str, second: str) -> Served:
    document: dict[str, Any] = sample_document(tmp_path)
    document["health"] = {
        "notifications": {
            "mode": "webhook",
            "webhookUrlEnvs": ["HOOK_PRIMARY", "HOOK_SECOND"],
            "secretEnv": "HOOK_KEY",
        },
    }
    env = {"HOOK_PRIMARY": primary, "HOOK_SECOND": second, "HOOK_KEY": SECRET}
    journal = InMemoryJournal()
    fleet = build_test_fleet(tmp_path, document=document, environ=env, journal=journal)
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    http = httpx.AsyncClient(transport=transport, base_url="http://fleetd")
    return Served(fleet=fleet, journal=journal, http=http)


@pytest.fixture
async def pair() -> AsyncIterator[tuple[HookServer, HookServer]]:
    async with HookServer() as primary, HookServer() as second:
        yield primary, second


async def test_a_receiver_never_tried_reads_up(
    tmp_path: Path, pair: tuple[HookServer, HookServer]
) -> None:
    """5c: after the worker's first pass with nothing to send, both receivers' endpoint_up is 1
    (never tried is not down, so an alert on `== 0` stays quiet on an idle sink); a receiver
    that refuses a connection reads 0, one that answers reads 1."""
    primary, _ = pair
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{probe.getsockname()[1]}/hooks"
    rig = served(tmp_path, refused, primary.url)
    try:
        await rig.fleet.service.sink.step()
        text = await rig.metrics()
        assert 'fleetd_dependency_endpoint_up{endpoint="0",kind="webhook"} 1.0' in text
        assert 'fleetd_dependency_endpoint_up{endpoint="1",kind="webhook"} 1.0' in text
        assert [e["reachable"] for e in (await rig.webhook())["endpoints"]] == [None, None]

        await rig.incident("sess_1")
        assert (await rig.fleet.service.sink.step()).delivered == 1
        text = await rig.metrics()
        assert 'fleetd_dependency_endpoint_up{endpoint="0",kind="webhook"} 0.0' in text
        assert 'fleetd_dependency_endpoint_up{endpoint="1",kind="webhook"} 1.0' in text
    finally:
        await rig.http.aclose()


async def test_a_410_disables_its_receiver_until_an_operator_replays(
    tmp_path: Path, pair: tuple[HookServer, HookServer], caplog: pytest.LogCaptureFixture
) -> None:
    """5i: the primary answers 410 Gone: the same attempt goes on to the second receiver and is
    delivered; the primary is disabled — one WARN, `disabled` in fleet_list, the disabled gauge
    at 1, coverage still full — and no later event dials it (one the second refuses with 404
    fails permanently). A replay of that incident re-enables the primary, which takes it."""
    caplog.set_level(logging.INFO, logger="fleetd")
    primary, second = pair
    primary.answer(Reply(status=410))
    rig = served(tmp_path, primary.url, second.url)
    service = rig.fleet.service
    try:
        await rig.incident("sess_1")
        assert (await service.sink.step()).delivered == 1
        assert (len(primary.received), len(second.received)) == (1, 1)
        assert primary.received[0].headers["webhook-id"] == second.received[0].headers["webhook-id"]
        webhook = await rig.webhook()
        assert [e["standing"] for e in webhook["endpoints"]] == ["disabled", "active"]
        assert (webhook["active"], webhook["allDown"]) == (1, False)
        text = await rig.metrics()
        assert 'fleetd_dependency_endpoint_disabled{endpoint="0",kind="webhook"} 1.0' in text
        assert 'fleetd_dependency_endpoint_disabled{endpoint="1",kind="webhook"} 0.0' in text
        assert service.sink.health.ok

        second.answer(Reply(status=404))
        refused = await rig.incident("sess_2")
        rig.fleet.clock.advance(60)
        assert (await service.sink.step()).failed == 1
        await rig.incident("sess_3")
        assert (await service.sink.step()).delivered == 1
        assert (len(primary.received), len(second.received)) == (1, 3)
        gone = [r for r in caplog.records if "410" in r.getMessage()]
        assert [r.levelno for r in gone] == [logging.WARNING]

        replay = await rig.http.post(f"/v1/incidents/{refused}/replay", headers=OPERATOR)
        assert replay.status_code == 200, replay.text
        assert [e["standing"] for e in (await rig.webhook())["endpoints"]] == [
            "active",
            "standby",
        ]
        assert (await service.sink.step()).delivered == 1
        assert (len(primary.received), len(second.received)) == (2, 3)
        stored = await rig.journal.get(refused)
        assert stored is not None
        assert [e.state for e in stored.events] == [EventState.DELIVERED]
        text = await rig.metrics()
        assert 'fleetd_dependency_endpoint_disabled{endpoint="0",kind="webhook"} 0.0' in text
    finally:
        await rig.http.aclose()


async def test_every_receiver_gone_degrades_the_sink_and_claims_nothing(
    tmp_path: Path, pair: tuple[HookServer, HookServer]
) -> None:
    """5i: both receivers answer 410: the event fails permanently (http_410), the sink is
    degraded (receivers_disabled), fleet_list shows every receiver disabled and all down, and
    a later event waits unsent (nothing is dialed) until the operator acts."""
    primary, second = pair
    primary.answer(Reply(status=410))
    second.answer(Reply(status=410))
    rig = served(tmp_path, primary.url, second.url)
    service = rig.fleet.service
    try:
        gone = await rig.incident("sess_1")
        assert (await service.sink.step()).failed == 1
        stored = await rig.journal.get(gone)
        assert stored is not None
        assert (stored.events[0].state, stored.events[0].last_failure) == (
            EventState.FAILED,
            "http_410",
        )
        assert service.sink.health.reason is not None
        assert service.sink.health.reason.value == "receivers_disabled"
        webhook = await rig.webhook()
        assert [e["standing"] for e in webhook["endpoints"]] == ["disabled", "disabled"]
        assert (webhook["active"], webhook["allDown"]) == (None, True)
        waiting = await rig.incident("sess_2")
        rig.fleet.clock.advance(60)
        assert (await service.sink.step()).claimed == 0
        assert (len(primary.received), len(second.received)) == (1, 1)
        pending = await rig.journal.get(waiting)
        assert pending is not None
        assert pending.events[0].state is EventState.PENDING
    finally:
        await rig.http.aclose()
