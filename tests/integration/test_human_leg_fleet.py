"""The human leg as ``fleetd serve`` runs it: the composed service's health tick and its own
``webhook`` loop (the escalation shell, then the delivery worker) against a real HTTP receiver,
through a journal that goes away, a receiver that refuses, a config change and a replay."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from fleetd.api.app import create_app
from fleetd.errors import JournalUnavailableError
from fleetd.herdr.model import AgentStatus
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import JournalSnapshot, StoredIncident
from fleetd.testing import OPERATOR_TOKEN, TestFleet
from tests.integration.hook_server import HookServer, Reply
from tests.integration.test_notify_sink_fleet import webhook_fleet

HEADERS = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


async def run(fleet: TestFleet, ticks: int, *, passes: int = 1) -> None:
    """``ticks`` health ticks, each followed by ``passes`` of the service's webhook loop."""
    for _ in range(ticks):
        fleet.clock.advance(15)
        await fleet.service.health.tick()
        for _ in range(passes):
            await fleet.service.scheduler.run_once("webhook")


async def get(fleet: TestFleet, path: str) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
        answer = await http.get(path, headers=HEADERS)
    result: dict[str, Any] = answer.json()["result"]
    return result


def coverage(view: dict[str, Any]) -> str:
    status: str = view["healthCoverage"]["status"]
    return status


def kinds(server: HookServer) -> list[tuple[str, str]]:
    """(event type, coverage) of every request the receiver got, in order."""
    bodies = [json.loads(request.body) for request in server.received]
    return [(body["eventType"], body["coverage"]) for body in bodies]


async def test_an_incident_routed_to_a_person_while_the_journal_is_down_is_sent_later(
    tmp_path: Path,
) -> None:
    """1a, 1e: while the journal is away the ``open`` is owed and coverage is ``degraded``; once
    the journal is back the ``open`` is recorded and sent, saying the coverage it was sent
    under, and coverage is ``full`` again only then."""
    journal = InMemoryJournal()
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url, journal)
        await fleet.service.own_lead_keys()
        journal.fail_with = JournalUnavailableError("record", "down")
        fleet.control.remove("lead")
        await run(fleet, 5)
        assert server.received == []
        view = await get(fleet, "/v1/fleet")
        assert [i["routing"]["route"] for i in view["incidents"]] == ["human"]
        assert coverage(view) == "degraded"
        journal.fail_with = None
        await run(fleet, 1, passes=2)
        assert kinds(server) == [("open", "degraded")]
        assert coverage(await get(fleet, "/v1/fleet")) == "full"
        [row] = (await get(fleet, "/v1/incidents"))["incidents"]
        assert row["delivery"] == "delivered"


async def test_a_resolution_while_the_journal_is_away_ends_the_reminders_and_is_sent_once(
    tmp_path: Path,
) -> None:
    """1c, 1e: an incident that resolves while the journal is away gets no reminder meanwhile,
    and its ``resolved`` is sent once the journal is back, saying it was recorded while owed
    (``degraded``) where the ``open`` went out under ``full``."""
    journal = InMemoryJournal()
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url, journal)
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await run(fleet, 4)
        assert [kind for kind, _ in kinds(server)] == ["open"]
        journal.fail_with = JournalUnavailableError("record", "down")
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await run(fleet, 3)
        assert (await get(fleet, "/v1/fleet"))["incidents"] == []
        for _ in range(12):  # three hours: the reminder period passes three times
            fleet.clock.advance(900)
            await run(fleet, 1)
        assert [kind for kind, _ in kinds(server)] == ["open"]
        journal.fail_with = None
        await run(fleet, 2)
        for _ in range(8):
            fleet.clock.advance(900)
            await run(fleet, 1)
    assert kinds(server) == [("open", "full"), ("resolved", "degraded")]


async def test_a_resolved_incident_s_refused_open_is_never_sent_again(tmp_path: Path) -> None:
    """1b: an ``open`` refused for good, then the incident resolves: neither a new receiver
    list nor an operator's replay sends that ``open`` again, and no ``resolved`` follows (the
    person was never told)."""
    journal = InMemoryJournal()
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url, journal)
        await fleet.service.own_lead_keys()
        server.answer(Reply(status=404))
        fleet.control.remove("lead")
        await run(fleet, 4)
        [incident] = (await get(fleet, "/v1/fleet"))["incidents"]
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await run(fleet, 3)
        environ = fleet.service.environ
        assert isinstance(environ, dict)
        environ["HOOK_URL"] = server.url + "/moved"  # a new receiver list
        await run(fleet, 3)
        transport = httpx.ASGITransport(app=create_app(fleet.service))
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
            replayed = await http.post(f"/v1/incidents/{incident['id']}/replay", headers=HEADERS)
        await run(fleet, 3)
        [row] = (await get(fleet, "/v1/incidents"))["incidents"]
    assert replayed.status_code == 409  # nothing the policy would send again
    assert [kind for kind, _ in kinds(server)] == ["open"]
    assert [(e["type"], e["state"]) for e in row["events"]] == [("open", "cancelled")]


class HangingJournal(InMemoryJournal):
    """A journal whose calls wait, while ``hung`` is set, until ``release`` (a database that
    accepts and never answers)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.answer.set()

    async def get(self, incident_id: str) -> StoredIncident | None:
        await self.answer.wait()
        return await super().get(incident_id)

    async def load_open(
        self, *, told_since: datetime | None = None, instance: str | None = None
    ) -> JournalSnapshot:
        await self.answer.wait()
        return await super().load_open(told_since=told_since, instance=instance)


async def test_a_journal_that_never_answers_does_not_stop_detection(tmp_path: Path) -> None:
    """2a: while every journal call hangs, the health tick goes on detecting and routing (the
    tick never awaits the journal); the owed ``open`` goes out once the journal answers."""
    journal = HangingJournal()
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url, journal)
        await fleet.service.own_lead_keys()
        journal.answer.clear()
        stuck = asyncio.create_task(fleet.service.scheduler.run_once("webhook"))
        fleet.control.remove("lead")
        await run(fleet, 4, passes=0)
        view = await get(fleet, "/v1/fleet")
        assert [i["state"] for i in view["incidents"]] == ["LEAD_UNREACHABLE"]
        assert not stuck.done()
        journal.answer.set()
        await stuck
        await run(fleet, 1, passes=2)
    assert [kind for kind, _ in kinds(server)] == ["open"]


async def test_the_configured_instance_names_fleetd_in_every_event(tmp_path: Path) -> None:
    """5k: ``instance`` from the config, not the host name, is ``fleetdInstance`` in the
    ``open`` and the ``resolved`` a person gets."""
    async with HookServer() as server:
        fleet = webhook_fleet(tmp_path, server.url, instance="fleet-eu-1")
        await fleet.service.own_lead_keys()
        fleet.control.remove("lead")
        await run(fleet, 4)
        fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
        await run(fleet, 3)
    bodies = [json.loads(request.body) for request in server.received]
    assert [(b["eventType"], b["fleetdInstance"]) for b in bodies] == [
        ("open", "fleet-eu-1"),
        ("resolved", "fleet-eu-1"),
    ]
