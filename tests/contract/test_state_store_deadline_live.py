"""Every state store write has a deadline: a PostgreSQL server that stops answering fails the
write in time (the effect it was ahead of does not run), later writes fail at once for one
deadline so the event loop is not held on each, and the store writes again once the server
answers. The frozen server is a proxy that accepts and never answers. An SQLite store's writer
waits for another writer's lock no longer than the deadline either."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetd.errors import StateStoreError
from fleetd.state.facts import TicketRecord
from fleetd.state.port import Change
from fleetd.state.sql import SqlStateStore
from tests.contract.frozen_proxy import FrozenProxy
from tests.contract.test_journal_deadline_live import PG_HOST, PG_PORT, proxied_url

pytest_plugins = ["tests.contract.journal_fixtures"]

DEADLINE = timedelta(seconds=1)
SLACK = 0.75
"""How far past its deadline a failed write may return (scheduling on a loaded machine)."""
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def proxy() -> AsyncIterator[FrozenProxy]:
    running = FrozenProxy(PG_HOST, PG_PORT)
    await running.start()
    try:
        yield running
    finally:
        await running.close()


def _ticket(n: int) -> Change:
    record = TicketRecord(
        ticket_id=f"t{n}-abcdef-r00000000", target="s", owner="lead", accepted_at=T0, seq=n
    )
    return Change(tickets=(record,))


async def _failed_write(store: SqlStateStore, n: int) -> tuple[str, float]:
    """The reason a write failed with, and how long it took (the store runs in a thread here
    only because the proxy runs on this test's event loop)."""
    started = asyncio.get_running_loop().time()
    with pytest.raises(StateStoreError) as caught:
        await asyncio.to_thread(store.apply, _ticket(n))
    return caught.value.reason, asyncio.get_running_loop().time() - started


@pytest.mark.postgres
async def test_a_frozen_postgres_fails_a_write_in_time_then_at_once_and_recovers(
    journal_pg_base: str, journal_pg_schema: str, proxy: FrozenProxy
) -> None:
    """A PostgreSQL state store whose server stops answering fails a write within its deadline,
    fails the next ones at once (nothing waited on), and writes again once the server answers."""
    assert journal_pg_base.startswith(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/")
    url = proxied_url(proxy.port, journal_pg_schema)
    store = await asyncio.to_thread(SqlStateStore, url, deadline=lambda: DEADLINE, instance="a")
    try:
        await asyncio.to_thread(store.apply, _ticket(1))
        proxy.freeze()
        reason, took = await _failed_write(store, 2)
        assert reason == "timeout"
        assert took < DEADLINE.total_seconds() + SLACK
        reason, took = await _failed_write(store, 3)
        assert reason == "unavailable"  # within the next deadline: at once, nothing waited on
        assert took < 0.25
        proxy.thaw()
        await asyncio.sleep(DEADLINE.total_seconds())  # the store is tried again after one more
        await asyncio.to_thread(store.apply, _ticket(4))
        stored = await asyncio.to_thread(store.load)
        assert [t.seq for t in stored.tickets] == [1, 4]  # the failed writes wrote nothing
    finally:
        proxy.thaw()
        await asyncio.to_thread(store.close)


def test_an_sqlite_write_waits_for_a_lock_no_longer_than_the_deadline(tmp_path: Path) -> None:
    """Another connection holds the write lock: the store's write fails ``locked`` within its
    deadline, writes nothing, and the next write after the lock is let go lands."""
    path = tmp_path / "state.db"
    store = SqlStateStore(f"sqlite:///{path}", deadline=lambda: DEADLINE, instance="a")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(StateStoreError) as caught:
            store.apply(_ticket(1))
        took = time.monotonic() - started
        assert caught.value.reason == "locked"
        assert took < DEADLINE.total_seconds() + SLACK
        holder.execute("ROLLBACK")
        store.apply(_ticket(2))
        assert [t.seq for t in store.load().tickets] == [2]
    finally:
        holder.close()
        store.close()
