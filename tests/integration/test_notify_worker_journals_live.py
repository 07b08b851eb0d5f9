"""The delivery worker on the real journals with a real HTTP receiver: an incident's whole life
(open, reminder, a lead taking it, resolve) through the webhook loop across a restart on every
adapter, and two fleetd instances draining one PostgreSQL journal at once without sending any
attempt twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from fleetd.clock import FakeClock
from fleetd.health.incidents import Assignment, ResolveReason, Route, RoutingReason
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventState, IncidentChange
from fleetd.notify.core.retry import PostResult
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.request import WebhookRequest
from tests.contract.journal_cases import T0
from tests.integration.hook_server import HookServer, Reply
from tests.unit.notify.sink_kit import (
    REPEAT,
    body_of,
    human_incident,
    make_leg,
    make_worker,
    open_incident,
    target,
    verify,
)

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

pytest_plugins = ["tests.contract.journal_fixtures"]


async def test_an_incident_s_events_survive_a_restart_and_arrive_once_each(
    journal_kit: JournalKit,
) -> None:
    """The webhook loop (escalation step, then the worker) on each journal: open; a reminder an
    hour later that fails with 503; restart (new client, new shell and worker); the reminder
    arrives with the same id; a lead takes the incident (no more reminders); the resolution
    arrives once. Every request verifies."""
    clock = FakeClock(T0)
    sender = HttpWebhookSender(clock=clock)
    incident = human_incident()
    async with HookServer() as server:
        journal = journal_kit.build()
        leg = make_leg(journal, sender, clock, sink=target(server.url), owner="fleetd-a")
        leg.escalation.note(incident)
        assert (await leg.step()).delivered == 1
        clock.advance(REPEAT.total_seconds())
        server.answer(Reply(status=503, headers={"Retry-After": "30"}))
        report = await leg.step()
        assert (report.claimed, report.retried) == (1, 1)

        restarted = journal_kit.build()
        after = make_leg(restarted, sender, clock, sink=target(server.url), owner="fleetd-b")
        clock.advance(30)
        assert (await after.step()).delivered == 1
        with_lead = incident.routed(
            Assignment(
                route=Route.LEAD,
                recipient="lead-b",
                reason=RoutingReason.PEER_OWNER_UNHEALTHY,
                generation=2,
            )
        )
        after.escalation.note(with_lead)
        assert (await after.step()).claimed == 0
        clock.advance(3 * REPEAT.total_seconds())
        assert (await after.step()).claimed == 0
        after.escalation.note_resolved(
            with_lead, reason=ResolveReason.CLEARED, resolved_at=clock.now()
        )
        assert (await after.step()).delivered == 1
        clock.advance(REPEAT.total_seconds())
        assert (await after.step()).claimed == 0
        received = list(server.received)
    await sender.aclose()
    kinds = [(body_of_bytes(r.body)["eventType"], r.headers["webhook-id"]) for r in received]
    assert [k for k, _ in kinds] == ["open", "reminder", "reminder", "resolved"]
    assert kinds[1][1] == kinds[2][1]
    assert len({i for _, i in kinds}) == 3
    for request in received:  # the receiver's clock is the fake one the request was signed at
        sent_at = datetime.fromtimestamp(int(request.headers["webhook-timestamp"]), UTC)
        verify(request.body, request.headers, now=sent_at)
    stored = await restarted.get(incident.id)
    assert stored is not None
    assert [e.state for e in stored.events] == [EventState.DELIVERED] * 3
    assert (stored.resolve_reason, stored.routing.recipient) == (ResolveReason.CLEARED, "lead-b")
    snapshot = await restarted.load_open()
    assert (snapshot.open_incidents, snapshot.pending_resolutions) == ((), ())


def body_of_bytes(body: bytes) -> dict[str, object]:
    return body_of(WebhookRequest(event_id="", url="", body=body, headers={}))


class CountingSender:
    """The real sender, keeping which webhook-ids this worker sent."""

    def __init__(self, inner: HttpWebhookSender) -> None:
        self.inner = inner
        self.sent: list[str] = []

    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        self.sent.append(request.event_id)
        await asyncio.sleep(0)  # let the other worker's pass run between claims
        return await self.inner.send(request, limit=limit)

    async def aclose(self) -> None:
        return None


@pytest.mark.postgres
async def test_two_workers_on_one_postgres_never_send_an_attempt_twice(
    journal_pg_url: str,
) -> None:
    """40 incidents, the first 12 answers 503 (retry at once); two workers with their own
    journal clients pass together until nothing is left. Each event's requests at the receiver
    equal its recorded attempts, and both workers did part of the work."""
    clock = FakeClock(T0)
    http = HttpWebhookSender(clock=clock)
    clients = [SqlJournal(journal_pg_url), SqlJournal(journal_pg_url)]
    incidents = [human_incident(f"sess_{n:02d}") for n in range(40)]
    try:
        async with HookServer() as server:
            server.answer(*[Reply(status=503, headers={"Retry-After": "0"})] * 12)
            for incident in incidents:
                await open_incident(clients[0], incident, at=T0)
            senders = [CountingSender(http), CountingSender(http)]
            workers = [
                make_worker(client, sender, clock, sink=target(server.url), owner=owner, limit=3)
                for client, sender, owner in zip(
                    clients, senders, ("fleetd-a", "fleetd-b"), strict=True
                )
            ]
            for _ in range(40):
                await asyncio.gather(*(w.step() for w in workers))
                if (await clients[0].stats()).queue_depth == 0:
                    break
                clock.advance(1)
            received = Counter(r.headers["webhook-id"] for r in server.received)
        attempts = {}
        for incident in incidents:
            stored = await clients[1].get(incident.id)
            assert stored is not None
            (event,) = stored.events
            assert event.state is EventState.DELIVERED
            attempts[event.idempotency_key] = event.attempts
        assert received == Counter(attempts)
        assert sum(received.values()) == 40 + 12
        assert all(s.sent for s in senders)
    finally:
        await http.aclose()
        for client in clients:
            await client.close()


async def test_a_change_without_events_leaves_delivery_alone(journal_kit: JournalKit) -> None:
    """Recording the incident again (routing moved) neither resends nor cancels anything."""
    clock = FakeClock(T0)
    sender = HttpWebhookSender(clock=clock)
    incident = human_incident()
    async with HookServer() as server:
        journal = journal_kit.build()
        worker = make_worker(journal, sender, clock, sink=target(server.url))
        await open_incident(journal, incident, at=T0)
        await journal.record(IncidentChange(incident=incident), now=T0)
        await worker.step()
        await journal.record(IncidentChange(incident=incident), now=T0)
        assert (await worker.step()).claimed == 0
        assert len(server.received) == 1
    await sender.aclose()
