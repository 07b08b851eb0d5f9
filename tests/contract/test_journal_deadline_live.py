"""Every journal operation has a deadline: a database that stops answering fails each call in
time, never wedges the journal's worker, and the journal works again once the database answers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock, SystemClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config
from fleetd.errors import JournalUnavailableError
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.memory import InMemoryInbox
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from fleetd.journal.watch import JournalStatus, watch_journal
from fleetd.testing import sample_document
from tests.contract.frozen_proxy import FrozenProxy
from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]

DEADLINE = timedelta(seconds=1)
SLACK = 0.75
"""How far past its deadline a failed call may return (scheduling on a loaded machine)."""
CLOCK = SystemClock()


def open_event() -> NewEvent:
    return NewEvent(type=EventType.OPEN, payload={"event": "open"})


PG_HOST, PG_PORT = "127.0.0.1", 5432  # the server journal_fixtures checks


def proxied_url(port: int, schema: str) -> str:
    """The test database through the proxy on ``port``, in the test's own schema."""
    from tests.contract.journal_fixtures import schema_url  # noqa: PLC0415 - loaded as a plugin above

    return schema_url(f"postgresql://postgres@{PG_HOST}:{port}/test", schema)


@pytest.fixture
async def proxy() -> AsyncIterator[FrozenProxy]:
    running = FrozenProxy(PG_HOST, PG_PORT)
    await running.start()
    try:
        yield running
    finally:
        await running.close()


async def timed_failure(journal: SqlJournal, call: str) -> tuple[str, float]:
    """The reason a call failed with, and how long it took."""
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "record": lambda: journal.record(
            IncidentChange(incident=make_incident("sess_frozen")), [open_event()], now=T0
        ),
        "load_open": journal.load_open,
        "stats": journal.stats,
    }
    started = CLOCK.monotonic()
    with pytest.raises(JournalUnavailableError) as caught:
        await calls[call]()
    return caught.value.reason, CLOCK.monotonic() - started


@pytest.mark.postgres
async def test_a_frozen_postgres_fails_every_call_within_its_deadline_and_recovers(
    journal_pg_base: str, journal_pg_schema: str, proxy: FrozenProxy
) -> None:
    """2a: behind a proxy that accepts and never answers, each call (on a pooled connection, on
    a new one, queued behind a stuck one) fails with ``timeout`` within the deadline; once the
    proxy passes traffic the next call succeeds, so the worker thread was never wedged."""
    assert journal_pg_base.startswith(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/")
    sql = SqlJournal(proxied_url(proxy.port, journal_pg_schema), deadline=lambda: DEADLINE)
    journal = sql
    watch = watch_journal(sql, clock=CLOCK)
    try:
        await journal.record(IncidentChange(incident=make_incident()), [open_event()], now=T0)
        proxy.freeze()
        for call in ("stats", "record", "load_open", "stats", "stats"):
            reason, took = await timed_failure(journal, call)
            assert reason == "timeout"
            assert took < DEADLINE.total_seconds() + SLACK, (call, took)
        assert watch.health.status is JournalStatus.DEGRADED
        assert watch.health.failures == 5
        proxy.thaw()
        started = CLOCK.monotonic()
        stats = await journal.stats()
        assert CLOCK.monotonic() - started < DEADLINE.total_seconds() + SLACK
        assert stats.queue_depth == 1  # the record made while frozen wrote nothing
        assert watch.health.ok
        assert len((await journal.load_open()).open_incidents) == 1
    finally:
        proxy.thaw()
        await journal.close()


@pytest.mark.postgres
async def test_the_deadline_is_read_for_every_call(
    journal_pg_base: str, journal_pg_schema: str, proxy: FrozenProxy
) -> None:
    """2a: the deadline is hot: the same journal waits as long as ``deadline()`` says now."""
    assert journal_pg_base
    deadline = [timedelta(seconds=1)]
    journal = SqlJournal(proxied_url(proxy.port, journal_pg_schema), deadline=lambda: deadline[0])
    try:
        await journal.stats()
        proxy.freeze()
        _, short = await timed_failure(journal, "stats")
        deadline[0] = timedelta(seconds=2.5)
        _, long = await timed_failure(journal, "stats")
        assert 0.9 < short < 1 + SLACK
        assert 2.4 < long < 2.5 + SLACK
    finally:
        proxy.thaw()
        await journal.close()


async def test_a_sqlite_writer_waits_for_a_lock_no_longer_than_the_deadline(
    tmp_path: Path,
) -> None:
    """2a: while another process holds SQLite's write lock, a record fails ``locked`` within the
    deadline (``busy_timeout`` follows it, so SQLite gives up first and the record is never
    written late) and succeeds once the lock is released."""
    path = tmp_path / "journal.sqlite"
    journal = SqlJournal(f"sqlite:///{path}", deadline=lambda: DEADLINE)
    try:
        await journal.load_open()
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        started = CLOCK.monotonic()
        with pytest.raises(JournalUnavailableError) as caught:
            await journal.record(IncidentChange(incident=make_incident()), [open_event()], now=T0)
        took = CLOCK.monotonic() - started
        assert caught.value.reason == "locked"
        assert 0.7 < took < DEADLINE.total_seconds() + SLACK
        holder.execute("ROLLBACK")
        holder.close()
        await journal.record(IncidentChange(incident=make_incident()), [open_event()], now=T0)
        assert (await journal.stats()).queue_depth == 1
    finally:
        await journal.close()


@pytest.mark.postgres
async def test_the_services_loops_end_within_the_configured_deadline(
    journal_pg_base: str, journal_pg_schema: str, proxy: FrozenProxy, tmp_path: Path
) -> None:
    """2a, on the path ``fleetd serve`` runs: the journal built from ``journal.url`` with
    ``journal.operationTimeoutMs`` 1000; while PostgreSQL is frozen the delivery and retention
    passes each end within the deadline, the journal is reported down, and both work again
    after."""
    assert journal_pg_base
    document = {
        **sample_document(tmp_path),
        "journal": {"url": proxied_url(proxy.port, journal_pg_schema), "operationTimeoutMs": 1000},
    }
    environ = {"T_LEAD": "lead-token", "T_LEAD_B": "lead-b-token", "T_OPERATOR": "op-token"}
    clock = FakeClock()
    loaded = parse_config(document, environ, base_dir=tmp_path)
    config = ConfigRef(loaded, environ=environ, now=clock.now())
    service = build_service(
        config,
        environ=environ,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
    )
    journal = service.health.journal
    watch = service.health.journal_watch
    assert journal is not None
    assert watch is not None
    try:
        await service.scheduler.run_once("webhook")
        assert watch.health.ok
        proxy.freeze()
        for loop in ("webhook", "journal-retention", "webhook"):
            started = CLOCK.monotonic()
            await service.scheduler.run_once(loop)
            assert CLOCK.monotonic() - started < 1 + SLACK, loop
        assert watch.health.reason == "stats: timeout"
        assert "fleetd_journal_up 0.0" in service.metrics.exposition().decode()
        proxy.thaw()
        await service.scheduler.run_once("webhook")
        assert watch.health.ok
        assert "fleetd_journal_up 1.0" in service.metrics.exposition().decode()
    finally:
        proxy.thaw()
        await journal.close()
