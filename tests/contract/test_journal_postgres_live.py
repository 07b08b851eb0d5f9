"""Claims on a live PostgreSQL: ``FOR UPDATE SKIP LOCKED`` and two clients claiming at once."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import psycopg
import pytest

from fleetd.health.incidents import ResolveReason
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import Claim, EventType, IncidentChange, NewEvent
from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]
pytestmark = pytest.mark.postgres

LEASE = timedelta(minutes=5)


async def seed(journal: SqlJournal, count: int) -> None:
    for n in range(count):
        change = IncidentChange(incident=make_incident(f"sess_{n:03d}"))
        due = T0 + timedelta(seconds=n)
        await journal.record(
            change, [NewEvent(type=EventType.OPEN, payload={"n": n}, due_at=due)], now=T0
        )


async def test_a_claim_skips_rows_another_transaction_has_locked(
    journal_pg_base: str, journal_pg_schema: str
) -> None:
    """While another transaction holds the earliest attempt, a claim takes the others at once
    (a plain ``FOR UPDATE`` would wait, and hit the 2 s lock timeout set here)."""
    from tests.contract.journal_fixtures import schema_url  # noqa: PLC0415 - loaded as a plugin above

    url = schema_url(journal_pg_base, journal_pg_schema, "lock_timeout=2000")
    journal = SqlJournal(url)
    try:
        await seed(journal, 3)
        with psycopg.connect(schema_url(journal_pg_base, journal_pg_schema)) as other:
            (locked,) = other.execute(
                "SELECT id FROM delivery_attempts ORDER BY due_at, id LIMIT 1 FOR UPDATE"
            ).fetchone() or (None,)
            now = T0 + timedelta(minutes=1)
            claims = await journal.claim_due("worker-a", now=now, lease=LEASE)
            assert locked is not None
            assert [c.attempt_id for c in claims] != []
            assert locked not in [c.attempt_id for c in claims]
            assert len(claims) == 2
            other.rollback()
        (freed,) = await journal.claim_due("worker-a", now=now, lease=LEASE)
        assert freed.attempt_id == locked
    finally:
        await journal.close()


async def test_two_clients_claiming_together_never_share_an_attempt(journal_pg_url: str) -> None:
    """Two journal clients (two engines, two worker threads) drain 60 attempts concurrently,
    one at a time: every attempt is claimed exactly once and all are delivered."""
    clients = [SqlJournal(journal_pg_url), SqlJournal(journal_pg_url)]
    total = 60
    try:
        await seed(clients[0], total)
        await clients[1].load_open()
        now = T0 + timedelta(hours=1)

        async def drain(journal: SqlJournal, owner: str) -> list[Claim]:
            taken: list[Claim] = []
            while claims := await journal.claim_due(owner, now=now, lease=LEASE, limit=1):
                taken.extend(claims)
                for claim in claims:
                    assert await journal.complete(claim, now=now, http_status=204)
            return taken

        first, second = await asyncio.gather(
            drain(clients[0], "worker-a"), drain(clients[1], "worker-b")
        )
        ids = [c.attempt_id for c in first + second]
        assert len(ids) == total
        assert len(set(ids)) == total
        assert first
        assert second
        stats = await clients[0].stats()
        assert (stats.queue_depth, stats.last_delivered_at) == (0, now)
    finally:
        for client in clients:
            await client.close()


async def test_two_instances_purging_together_delete_each_incident_once(
    journal_pg_url: str,
) -> None:
    """7b: two fleetd instances' retention passes on one database: neither waits for the other's
    rows, each incident is deleted by exactly one, and the counts add up."""
    clients = [SqlJournal(journal_pg_url), SqlJournal(journal_pg_url)]
    total = 120
    try:
        for n in range(total):
            change = IncidentChange(incident=make_incident(f"sess_{n:03d}"))
            await clients[0].record(
                dataclasses.replace(change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED),
                now=T0,
            )
        later = T0 + timedelta(days=40)

        async def drain(journal: SqlJournal) -> int:
            deleted = 0
            while count := await journal.purge(resolved_before=later, limit=7):
                deleted += count
            return deleted

        first, second = await asyncio.gather(drain(clients[0]), drain(clients[1]))
        assert first + second == total
        assert (await clients[0].load_open()).generation_floor == 0
    finally:
        for client in clients:
            await client.close()


async def test_a_host_whose_clock_runs_ahead_never_takes_a_lease_another_holds(
    journal_pg_url: str,
) -> None:
    """Several instances share one journal, each claiming by its own clock. A lease is timed by
    PostgreSQL's clock, so an instance two hours ahead does not take an attempt another has just
    leased (it took it at once, and the event went out twice); once the lease has run out by the
    database's time, it does, and the first holder can record nothing."""
    from datetime import UTC, datetime  # noqa: PLC0415

    holder, ahead = SqlJournal(journal_pg_url), SqlJournal(journal_pg_url)
    try:
        now = datetime.now(UTC)
        change = IncidentChange(incident=make_incident("sess_skew"))
        await holder.record(
            change, [NewEvent(type=EventType.OPEN, payload={}, due_at=now)], now=now
        )
        lease = timedelta(seconds=30)
        (held,) = await holder.claim_due("worker-a", now=now, lease=lease)
        assert held.lease_expires_at == now + lease  # the holder's deadline, by its own clock
        two_hours_on = now + timedelta(hours=2)
        assert await ahead.claim_due("worker-b", now=two_hours_on, lease=lease) == ()
        with psycopg.connect(journal_pg_url, autocommit=True) as db:  # 30 s of the database's time
            db.execute(
                "UPDATE delivery_attempts SET lease_expires_at = lease_expires_at - interval '31 s'"
            )
        (taken,) = await ahead.claim_due("worker-b", now=two_hours_on, lease=lease)
        assert taken.attempt_id == held.attempt_id
        assert not await holder.complete(held, now=now, http_status=200)
        assert await ahead.complete(taken, now=two_hours_on, http_status=200)
    finally:
        await holder.close()
        await ahead.close()
