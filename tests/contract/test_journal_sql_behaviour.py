"""The SQL journal's file, transaction and failure behaviour: what the contract cannot show.

Owner-only file, WAL, all-or-nothing records (also when the writer is killed mid-transaction),
and failures that become a typed, bounded error and a degraded health instead of a crash.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from fleetd.clock import FakeClock
from fleetd.errors import JournalSchemaError, JournalUnavailableError
from fleetd.journal import store
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from fleetd.journal.watch import JournalStatus, watch_journal
from tests.contract.journal_cases import T0, make_incident

CONTRACT = Path(__file__).resolve().parent


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_event() -> NewEvent:
    return NewEvent(type=EventType.OPEN, payload={"event": "open"})


async def test_the_journal_file_is_owner_only_and_in_wal_mode(tmp_path: Path) -> None:
    """Created 0600 in a 0700 directory; the WAL companions share the mode; WAL is on."""
    path = tmp_path / "state" / "journal.sqlite"
    journal = SqlJournal(f"sqlite:///{path}")
    try:
        assert mode(path) == 0o600
        assert mode(path.parent) == 0o700
        await journal.record(IncidentChange(incident=make_incident()), [open_event()], now=T0)
        companions = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
        assert all(mode(c) == 0o600 for c in companions)
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        await journal.close()


async def test_an_existing_journal_file_is_narrowed_to_owner_only(tmp_path: Path) -> None:
    """Opening an existing world-readable SQLite journal file narrows it to mode 0600."""
    path = tmp_path / "journal.sqlite"
    path.touch(mode=0o644)
    path.chmod(0o644)
    journal = SqlJournal(f"sqlite:///{path}")
    await journal.close()
    assert mode(path) == 0o600


async def test_a_record_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The incident row is written first; when adding its event fails, the row goes too."""
    journal = SqlJournal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    change = IncidentChange(incident=make_incident())

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    try:
        await journal.load_open()
        monkeypatch.setattr(store, "add_events", broken)
        with pytest.raises(JournalUnavailableError) as caught:
            await journal.record(change, [open_event()], now=T0)
        assert caught.value.reason == "disk_full"
        monkeypatch.undo()
        assert await journal.get(change.incident.id) is None
        assert (await journal.stats()).queue_depth == 0
    finally:
        await journal.close()


_KILLED_WRITER = """
import asyncio, sys
sys.path.insert(0, {contract!r})
from tests.contract.journal_cases import T0, make_incident
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from fleetd.journal.sql import SqlJournal
import fleetd.journal.store as store

def stall(session, incident_id, events, now):
    session.flush()  # the incident row is written inside the open transaction
    print("in-transaction", flush=True)
    sys.stdin.read()  # blocks until the parent kills this process

store.add_events = stall
change = IncidentChange(incident=make_incident("sess_killed"))
event = NewEvent(type=EventType.OPEN, payload={{"event": "open"}})
asyncio.run(SqlJournal({url!r}).record(change, [event], now=T0))
"""


async def test_a_writer_killed_mid_transaction_loses_only_that_record(tmp_path: Path) -> None:
    """SIGKILL while a record's transaction is open: the earlier record is intact, the killed
    one left no incident and no event, and the database passes its integrity check."""
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    kept = IncidentChange(incident=make_incident("sess_kept"))
    journal = SqlJournal(url)
    await journal.record(kept, [open_event()], now=T0)
    await journal.close()
    script = _KILLED_WRITER.format(contract=str(CONTRACT), url=url)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        line = await child.stdout.readline()
        assert line.strip() == b"in-transaction"
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    reopened = SqlJournal(url)
    try:
        snapshot = await reopened.load_open()
        assert [s.incident.key.subject for s in snapshot.open_incidents] == ["sess_kept"]
        assert len(snapshot.open_incidents[0].events) == 1
        assert (await reopened.stats()).queue_depth == 1
    finally:
        await reopened.close()
    with sqlite3.connect(tmp_path / "journal.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def fill(journal: SqlJournal) -> None:
    """Record incidents until the journal fails (it must, long before 500)."""
    for n in range(500):
        change = IncidentChange(incident=make_incident(f"sess_{n}"))
        await journal.record(change, [open_event()], now=T0)


async def test_a_full_disk_degrades_the_journal_and_recovery_clears_it(tmp_path: Path) -> None:
    """SQLITE_FULL becomes JournalUnavailableError(disk_full) and a degraded health with that
    reason; once space is back the next record succeeds and health is ok again."""
    clock = FakeClock(T0)
    sql = SqlJournal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    journal = sql
    watch = watch_journal(sql, clock=clock)

    def no_growth(dbapi_connection: Any, _record: Any) -> None:
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count={pages}")

    try:
        await journal.load_open()
        event.listen(sql.engine, "connect", no_growth)
        sql.engine.dispose()
        with pytest.raises(JournalUnavailableError) as caught:
            await fill(journal)
        assert caught.value.reason == "disk_full"
        assert str(caught.value) == "record: disk_full"
        assert watch.health.status is JournalStatus.DEGRADED
        assert watch.health.reason == "record: disk_full"
        assert watch.health.since == T0
        event.remove(sql.engine, "connect", no_growth)
        sql.engine.dispose()
        await journal.record(IncidentChange(incident=make_incident("sess_after")), now=T0)
        assert watch.health.ok
    finally:
        await journal.close()


async def test_a_database_that_is_down_is_unavailable_not_a_crash() -> None:
    """Nothing listens on the port: a typed error, reason ``unreachable``, no URL in the text."""
    journal = SqlJournal("postgresql://postgres:s3cr3t@127.0.0.1:9/test")
    watch = watch_journal(journal, clock=FakeClock(T0))
    try:
        with pytest.raises(JournalUnavailableError) as caught:
            await journal.load_open()
        assert caught.value.reason == "unreachable"
        assert "s3cr3t" not in str(caught.value)
        assert caught.value.__cause__ is None
        assert watch.health.reason == "migrate: unreachable"
    finally:
        await journal.close()


async def test_without_migrate_an_empty_database_is_a_schema_error(tmp_path: Path) -> None:
    """``migrate=False`` only checks: an empty database says ``schema_not_at_head``."""
    url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    journal = SqlJournal(url, migrate=False)
    try:
        with pytest.raises(JournalSchemaError) as caught:
            await journal.load_open()
        assert caught.value.reason == "schema_not_at_head"
    finally:
        await journal.close()
    upgraded = SqlJournal(url)
    await upgraded.load_open()
    await upgraded.close()
    checked = SqlJournal(url, migrate=False)
    try:
        assert (await checked.load_open()).open_incidents == ()
    finally:
        await checked.close()


async def test_a_closed_journal_refuses_calls(tmp_path: Path) -> None:
    """Closing twice is harmless; a call on a closed journal raises JournalUnavailableError."""
    journal = SqlJournal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    await journal.close()
    await journal.close()
    with pytest.raises(JournalUnavailableError):
        await journal.load_open()


async def test_the_file_mode_ignores_a_permissive_umask(tmp_path: Path) -> None:
    """Even with umask 000 the file is created 0600."""
    old = os.umask(0)
    try:
        journal = SqlJournal(f"sqlite:///{tmp_path / 'j.sqlite'}")
    finally:
        os.umask(old)
    await journal.close()
    assert mode(tmp_path / "j.sqlite") == 0o600
