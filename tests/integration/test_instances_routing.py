"""Routing across hosts (issue 24): two fleetd instances, as ``fleetd serve`` composes them, on
one PostgreSQL journal and one shared inbox broker (an in-memory one shared by both, and the
local RabbitMQ with a connection per instance). Host ``b``'s only lead dies; host ``a``'s
healthy lead — read from ``a``'s published summary on ``b``'s ``instances`` loop — receives the
incident record in its own inbox, while ``b`` keeps owning the incident (its journal row) and
every instance sees the assignment. A healthy lead on ``b`` itself wins; a lead of an instance
that stopped renewing is never picked (a person is told instead). On RabbitMQ the receiving
instance's push loop nudges its lead and the lead's ``fleet_poll`` returns the record."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from fleetd.errors import JournalError
from fleetd.herdr.model import AgentStatus
from fleetd.identity import Caller, Role
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.codec import quarantine_queue_name, queue_name
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import StoredIncident
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer
from tests.integration.test_bridge_amqp_inbox import AMQP_URL
from tests.integration.test_instances_fleet import INTERVAL, fleet_all, instance_fleet, pages
from tests.integration.test_notify_sink_fleet import SECRET

pytest_plugins = ["tests.contract.journal_fixtures"]
pytestmark = pytest.mark.postgres


def host(
    root: Path, name: str, journal_url: str, hook_url: str, *, inbox: InMemoryInbox, lead: int
) -> TestFleet:
    """An instance serving the sample's lead number ``lead``, publishing to the shared ``inbox``."""
    return instance_fleet(root / name, name, journal_url, hook_url, lead=lead, inbox=inbox)


async def step(*fleets: TestFleet) -> None:
    """One snapshot interval on every host: clocks move together, each renews its row (and reads
    the others'), then each takes a health tick and sends what its webhook leg holds."""
    for fleet in fleets:
        fleet.clock.advance(INTERVAL)
        await fleet.service.scheduler.run_once("instances")
    for fleet in fleets:
        await fleet.service.health.tick()
        await fleet.service.scheduler.run_once("webhook")


async def about(fleet: TestFleet, lead: str) -> StoredIncident:
    """The open incident the journal holds about ``lead`` (read through ``fleet``'s journal)."""
    journal = fleet.service.health.journal
    assert journal is not None
    [stored] = [s for s in (await journal.load_open()).open_incidents if s.incident.subject == lead]
    return stored


async def health_records(inbox: InMemoryInbox, key: str) -> list[InboxRecord]:
    return [r for r in await inbox.collect(key) if r.kind is MessageKind.HEALTH]


async def test_a_dead_lead_on_one_host_hands_its_incident_to_the_healthy_lead_of_another(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """``b``'s only lead (``lead-b``) is gone; ``a``'s ``lead`` is healthy. The LEAD_UNREACHABLE
    incident ``b`` opens goes to ``lead`` (peer_lead_incident, on behalf of ``lead-b``), its
    record in ``lead``'s inbox on the shared broker; ``b`` owns the incident row, ``a`` reads
    the same assignment (in the journal, and in ``b``'s part of ``scope=all``), and no person
    is paged."""
    inbox = InMemoryInbox()
    async with HookServer() as server:
        a = host(tmp_path, "a", journal_pg_url, server.url, inbox=inbox, lead=0)
        b = host(tmp_path, "b", journal_pg_url, server.url, inbox=inbox, lead=1)
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)  # a's summary now carries its lead's health; b has read it
            assert [lead.name for lead in b.service.instances.peers.leads()] == ["lead"]
            b.control.remove("lead-b")
            for _ in range(3):
                await step(a, b)
            stored = await about(a, "lead-b")  # read through a's journal: visible to all
            assert stored.instance == "b"
            incident = stored.incident
            assert (incident.recipient_lead, incident.routing_reason) == (
                "lead",
                "peer_lead_incident",
            )
            assert incident.assignment is not None
            assert incident.assignment.on_behalf_of == "lead-b"
            [record] = await health_records(inbox, "lead")
            assert record.recipient_lead == "lead"
            assert record.msg_id.startswith(f"health-{incident.id}-r1-")
            assert record.subject_terminal == "lead-b"
            assert dict(record.evidence or {})["onBehalfOf"] == "lead-b"
            assert await health_records(inbox, "lead-b") == []
            assert pages(server) == []
            assert b.service.push.covering == {}  # a's lead is pushed by a, not armed on b
            await step(a, b)  # b publishes its summary with the routed incident; a answers
            [_, part_b] = (await fleet_all(a))["instances"]
            [shown] = [i for i in part_b["summary"]["incidents"] if i["subject"] == "lead-b"]
            assert (shown["recipient"], shown["routing"]["reason"]) == (
                "lead",
                "peer_lead_incident",
            )
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_a_restarted_owner_keeps_its_incident_on_the_remote_lead(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """``b``'s dead lead's incident is held by ``a``'s ``lead``; ``b`` restarts. Before its
    first tick it reads the other instances' leads (its resumed incident is held by one of
    them), so that tick keeps the assignment: same generation, no new record, no page."""
    inbox = InMemoryInbox()
    async with HookServer() as server:
        a = host(tmp_path, "a", journal_pg_url, server.url, inbox=inbox, lead=0)
        b = host(tmp_path, "b", journal_pg_url, server.url, inbox=inbox, lead=1)
        again: TestFleet | None = None
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)
            b.control.remove("lead-b")
            for _ in range(3):
                await step(a, b)
            before = (await about(b, "lead-b")).incident
            assert (before.recipient_lead, before.routing_generation) == ("lead", 1)
            assert len(await health_records(inbox, "lead")) == 1

            again = instance_fleet(
                tmp_path / "b",
                "b",
                journal_pg_url,
                server.url,
                lead=1,
                inbox=inbox,
                control=b.control,
            )
            again.clock.advance((b.clock.now() - again.clock.now()).total_seconds())
            await again.service.own_lead_keys()
            assert await again.service.resume_health() == 1
            assert [lead.name for lead in again.service.instances.peers.leads()] == ["lead"]
            await again.service.health.tick()
            await again.service.scheduler.run_once("webhook")
            after = (await about(a, "lead-b")).incident
            assert (after.recipient_lead, after.routing_generation) == ("lead", 1)
            assert await health_records(inbox, "lead") == []
            assert pages(server) == []
        finally:
            for fleet in (a, b, *([again] if again is not None else [])):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_a_healthy_lead_on_the_same_host_wins_over_a_remote_one(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """``b`` serves ``lead-b`` and ``lead-c``; ``lead-b`` dies. Its incident goes to ``lead-c``
    on ``b`` itself, never to ``a``'s ``lead``, whose inbox stays empty."""
    inbox = InMemoryInbox()
    async with HookServer() as server:
        a = host(tmp_path, "a", journal_pg_url, server.url, inbox=inbox, lead=0)
        b = instance_fleet(
            tmp_path / "b",
            "b",
            journal_pg_url,
            server.url,
            lead=1,
            inbox=inbox,
            extra_lead="lead-c",
        )
        b.control.add_agent("lead-c", kind="codex", status=AgentStatus.IDLE)
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)
            assert [lead.name for lead in b.service.instances.peers.leads()] == ["lead"]
            b.control.remove("lead-b")
            for _ in range(3):
                await step(a, b)
            incident = (await about(b, "lead-b")).incident
            assert incident.recipient_lead == "lead-c"
            assert await health_records(inbox, "lead") == []
            [record] = await health_records(inbox, "lead-c")
            assert record.msg_id.startswith(f"health-{incident.id}-")
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_a_lead_of_a_down_instance_is_never_picked(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """``a`` published a healthy ``lead`` and then stopped renewing. When ``b``'s only lead
    dies more than two intervals later, ``a``'s lead is not a candidate: a person is told."""
    inbox = InMemoryInbox()
    async with HookServer() as server:
        a = host(tmp_path, "a", journal_pg_url, server.url, inbox=inbox, lead=0)
        b = host(tmp_path, "b", journal_pg_url, server.url, inbox=inbox, lead=1)
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)
            assert [lead.name for lead in b.service.instances.peers.leads()] == ["lead"]
            for _ in range(3):  # a is silent: down past two intervals before anything dies
                b.clock.advance(INTERVAL)
                await b.service.scheduler.run_once("instances")
            assert b.service.instances.peers.leads() == ()
            b.control.remove("lead-b")
            for _ in range(3):
                await step(b)
            incident = (await about(b, "lead-b")).incident
            assert (incident.recipient_lead, incident.routing_reason) == (
                None,
                "human_no_healthy_lead",
            )
            assert await health_records(inbox, "lead") == []
            assert ("open", "lead-b") in [(kind, subject) for kind, subject, _ in pages(server)]
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_a_failed_summary_read_stalls_nothing_and_adds_no_candidate(
    tmp_path: Path, journal_pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``b`` read ``a``'s lead once; then every read of the summaries fails. ``b``'s loops go
    on (each pass renews, each tick routes) and keeps the values it read, which age out: when
    ``b``'s lead dies more than two intervals later, a person is told, ``a``'s lead is not."""
    inbox = InMemoryInbox()
    async with HookServer() as server:
        a = host(tmp_path, "a", journal_pg_url, server.url, inbox=inbox, lead=0)
        b = host(tmp_path, "b", journal_pg_url, server.url, inbox=inbox, lead=1)
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)
            kept = b.service.instances.peers.leads()
            assert [lead.name for lead in kept] == ["lead"]

            async def refused(names: object) -> dict[str, str]:
                raise JournalError("instance_summaries", "timeout")

            journal = b.service.instances.journal
            monkeypatch.setattr(journal, "instance_summaries", refused)
            for _ in range(3):  # past two intervals since the read that worked
                await step(a, b)
            b.control.remove("lead-b")
            for _ in range(3):
                await step(a, b)
            assert b.service.instances.peers.leads() == kept  # kept as read, aged by its renewal
            rows = await journal.instances(summaries=False)
            assert max(r.last_seen for r in rows if r.instance == "b") == b.clock.now()
            incident = (await about(b, "lead-b")).incident
            assert (incident.recipient_lead, incident.routing_reason) == (
                None,
                "human_no_healthy_lead",
            )
            assert await health_records(inbox, "lead") == []
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


@pytest.fixture
def rabbitmq() -> str:
    """The local RabbitMQ's URL; CI fails without it, elsewhere the test is skipped."""
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=1.0).close()
    except OSError:
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ is not reachable on 127.0.0.1:5672; CI needs it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")
    return AMQP_URL


def amqp_host(
    root: Path, name: str, journal_url: str, hook_url: str, *, url: str, lead: str
) -> TestFleet:
    """An instance serving one lead named ``lead`` (unique: the broker is shared with other
    tests), its inbox on the RabbitMQ at ``url``."""
    (root / name).mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = sample_document(root / name)
    document["instance"] = name
    document["leads"] = [{"name": lead, "agent": lead, "tokenEnv": "T_LEAD"}]
    document["journal"] = {"url": journal_url}
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": INTERVAL,
        "notifications": {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_KEY"},
    }
    fleet = build_test_fleet(
        root / name,
        document=document,
        environ={"HOOK_URL": hook_url, "HOOK_KEY": SECRET},
        journal=SqlJournal(journal_url),
        inbox=AmqpInbox(url),
    )
    fleet.control.add_agent(lead, kind="claude", status=AgentStatus.IDLE)
    return fleet


@pytest.mark.amqp
async def test_the_record_crosses_hosts_on_the_shared_rabbitmq_and_its_lead_is_nudged(
    tmp_path: Path, journal_pg_url: str, rabbitmq: str
) -> None:
    """Each instance with its own connection to the local RabbitMQ: ``b``'s dead lead's record
    is published by ``b`` to ``a``'s lead's queue; ``a``'s push loop sees it there and nudges
    its lead, and the lead's ``fleet_poll`` on ``a`` returns it."""
    tag = uuid.uuid4().hex[:10]
    lead_a, lead_b = f"la{tag}", f"lb{tag}"
    async with HookServer() as server:
        a = amqp_host(tmp_path, "a", journal_pg_url, server.url, url=rabbitmq, lead=lead_a)
        b = amqp_host(tmp_path, "b", journal_pg_url, server.url, url=rabbitmq, lead=lead_b)
        try:
            for fleet in (a, b):
                await fleet.service.own_lead_keys()
            await step(a, b)
            await step(a, b)
            b.control.remove(lead_b)
            for _ in range(3):
                await step(a, b)
            incident = (await about(b, lead_b)).incident
            assert incident.recipient_lead == lead_a
            await b.service.push.push_once()  # b's outbox has flushed: nothing held for a's lead
            assert b.service.bridge.reads.unpublished == []
            await a.service.push.push_once()
            nudges = [c for c in a.control.calls_to("prompt") if c.args["target"] == lead_a]
            assert len(nudges) == 1
            polled = await a.ok("fleet_poll", Caller(role=Role.LEAD, name=lead_a))
            [message] = [m for m in polled["messages"] if m["kind"] == "health"]
            assert (message["state"], message["target"]) == ("LEAD_UNREACHABLE", lead_b)
            assert pages(server) == []
        finally:
            for fleet in (a, b):
                await fleet.inbox.close()
                await fleet.service.health.journal.close()  # type: ignore[union-attr]
            raw = await aio_pika.connect_robust(rabbitmq)
            async with raw.channel() as channel:
                for lead in (lead_a, lead_b):
                    for queue in (queue_name(lead), quarantine_queue_name(lead)):
                        await channel.queue_delete(queue)
            await raw.close()
