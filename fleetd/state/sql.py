"""The state store on SQLite (the default, beside the config) or PostgreSQL, by URL.

The engine is the journal's (:func:`~fleetd.journal.engine.journal_engine`): an SQLite file is
created owner-only (``0600``) in WAL mode and every transaction begins ``IMMEDIATE``; PostgreSQL
goes through psycopg 3. Unlike the journal, an SQLite store commits with ``synchronous=NORMAL``:
in WAL mode a commit then survives a killed process (what the store is for), and only a power cut
may lose the last commits. Every transaction is bounded by ``state.operationTimeoutMs``
(:func:`~fleetd.journal.deadline.bound_operations`: ``busy_timeout`` on SQLite,
``statement_timeout``/``lock_timeout`` on PostgreSQL, a connect timeout).

The writes are on the path of every prompt, so an SQLite file store writes through one
:class:`SqliteWriter`: a ``sqlite3`` connection kept open for the store's life, its upserts
prepared once, each change one ``BEGIN IMMEDIATE`` … ``COMMIT`` (no pool checkout, no statement
compilation, no event hooks per write). It never checkpoints itself (``wal_autocheckpoint=0``):
every :data:`CHECKPOINT_EVERY` commits a thread of its own, on a connection of its own, runs a
``PASSIVE`` checkpoint (the one step that syncs the file), so no write waits behind one and the
log stays bounded (``journal_size_limit``). Loads, migrations and the lock still go through the
engine.

A PostgreSQL store's writes run on a thread of their own (:class:`BoundedWrites`), the caller
waiting at most ``state.operationTimeoutMs``: a server that stops answering (where its own
``statement_timeout`` cannot act) fails the write with ``timeout`` in time, its connection is cut,
and for one more deadline every write fails at once (``unavailable``) so that the event loop, and
the health loop on it, is held up once per deadline at most. A failed write is a write not made:
the effect it was ahead of does not run.

Every row carries the store's ``instance`` (the name whose writer lock the process takes): each
write stamps it, and every load, delete and ``discard`` reads or removes that instance's rows only,
so instances sharing one store (several hosts on one PostgreSQL schema) never see, clean up or
compact one another's members, tickets or turns.

Opening migrates the store to this build's head (its own revisions in ``migrations/state/``); a
store written by a newer build, or a file that is not a database, is refused with
:class:`~fleetd.errors.StateStoreError` naming why.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, delete, event, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import FleetdError, JournalError, StateStoreError
from fleetd.journal.deadline import DATABASE_SHARE, OpenConnections, bound_operations
from fleetd.journal.engine import journal_engine, sqlite_path, translate
from fleetd.journal.migrate import MIGRATIONS
from fleetd.state.facts import (
    DeliveryState,
    MemberRecord,
    Snapshot,
    TicketRecord,
    TurnRecord,
)
from fleetd.state.port import Change
from fleetd.state.tables import MemberRow, TicketRow, TurnRow

__all__ = [
    "CHECKPOINT_EVERY",
    "BoundedWrites",
    "SqlStateStore",
    "SqliteWriter",
    "state_alembic_config",
    "state_engine",
]

CHECKPOINT_EVERY = 200
"""Commits between two checkpoints of an SQLite store (a few pages each: a log of a few MB)."""
_WAL_LIMIT_BYTES = 16 * 1024 * 1024
_DELETE_MEMBER = "DELETE FROM state_members WHERE instance = ? AND session_id = ?"
_DELETE_TICKET = "DELETE FROM state_tickets WHERE instance = ? AND ticket_id = ?"
_DELETE_TURN = "DELETE FROM state_turns WHERE instance = ? AND session_id = ?"

_MEMBERS = MemberRow.__table__  # type: ignore[attr-defined]
_TICKETS = TicketRow.__table__  # type: ignore[attr-defined]
_TURNS = TurnRow.__table__  # type: ignore[attr-defined]


#: PostgreSQL's invalid_schema_name: no schema to create the store's tables in.
_NO_SCHEMA = "3F000"


def _error(exc: BaseException, operation: str) -> StateStoreError:
    if isinstance(exc, StateStoreError):
        return exc
    translated = translate(exc, operation)
    if translated.code == _NO_SCHEMA:  # the schema state.url's search_path names is not there
        return StateStoreError(operation, "no_schema")
    return StateStoreError(operation, translated.reason)


def state_alembic_config() -> Config:
    """An Alembic config for the state store's revisions (``migrations/state``)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", str(MIGRATIONS / "state").replace("%", "%%"))
    config.attributes["store"] = "state"
    return config


def state_engine(url: str, deadline: Callable[[], timedelta]) -> Engine:
    """An engine for the store at ``url``, its transactions bounded by ``deadline()``."""
    try:
        engine = journal_engine(url)
    except JournalError as exc:
        raise StateStoreError("open", exc.reason) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_normal_sync)
    bound_operations(engine, deadline)
    return engine


def _sqlite_normal_sync(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


class SqlStateStore:
    """The :class:`~fleetd.state.port.StateStore` of ``instance`` on a database (its rows only)."""

    def __init__(self, url: str, *, deadline: Callable[[], timedelta], instance: str) -> None:
        self._instance = instance
        self._engine = state_engine(url, deadline)
        self._closed = False
        self._bounded: BoundedWrites | None = None
        if self._engine.dialect.name != "sqlite":
            self._bounded = BoundedWrites(self._engine, deadline)
        self._migrate()
        path = sqlite_path(url)
        self._writer: SqliteWriter | None = None
        if path is not None:
            try:
                self._writer = SqliteWriter(path, self._engine, deadline, instance)
            except sqlite3.Error as exc:
                self._engine.dispose()
                raise _error(exc, "open") from None

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def instance(self) -> str:
        return self._instance

    def _migrate(self) -> None:
        try:
            with self._engine.connect() as connection:
                config = state_alembic_config()
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
        except CommandError:
            self._engine.dispose()
            raise StateStoreError("open", "newer_schema") from None
        except (SQLAlchemyError, OSError, FleetdError) as exc:
            self._engine.dispose()
            raise _error(exc, "open") from None

    def load(self) -> Snapshot:
        self._check()
        try:
            with self._engine.connect() as connection:
                members = connection.execute(self._mine(_MEMBERS)).mappings().all()
                tickets = (
                    connection.execute(self._mine(_TICKETS).order_by(_TICKETS.c.seq))
                    .mappings()
                    .all()
                )
                turns = connection.execute(self._mine(_TURNS)).mappings().all()
                connection.rollback()
        except SQLAlchemyError as exc:
            raise _error(exc, "load") from None
        try:
            return Snapshot(
                members=tuple(MemberRecord(**_fields(row)) for row in members),
                tickets=tuple(
                    TicketRecord(**{**_fields(row), "delivery": DeliveryState(row["delivery"])})
                    for row in tickets
                ),
                turns=tuple(TurnRecord(**_fields(row)) for row in turns),
            )
        except (LookupError, TypeError, ValueError) as exc:  # a row no revision ever wrote
            raise StateStoreError("load", "corrupt", detail=type(exc).__name__) from None

    def _mine(self, table: Any) -> Any:
        """``SELECT`` of this instance's rows of ``table``."""
        return select(table).where(table.c.instance == self._instance)

    def apply(self, change: Change) -> None:
        self._check()
        if not change:
            return
        if self._writer is not None:
            try:
                self._writer.apply(change)
            except sqlite3.Error as exc:
                raise _error(exc, "write") from None
            return
        if self._bounded is not None:
            self._bounded.run(lambda abandoned: self._write(change, abandoned))
            return
        self._write(change, lambda: False)

    def _write(self, change: Change, abandoned: Callable[[], bool]) -> None:
        """One transaction; rolled back instead of committed when its caller gave up on it (a
        write the bridge was told failed never lands later)."""
        try:
            with self._engine.begin() as connection:
                for table, key, keys in (
                    (_MEMBERS, "session_id", change.drop_members),
                    (_TICKETS, "ticket_id", change.drop_tickets),
                    (_TURNS, "session_id", change.drop_turns),
                ):
                    if keys:
                        connection.execute(
                            delete(table).where(
                                table.c.instance == self._instance, table.c[key].in_(keys)
                            )
                        )
                for table, key, records in (
                    (_MEMBERS, "session_id", change.members),
                    (_TICKETS, "ticket_id", change.tickets),
                    (_TURNS, "session_id", change.turns),
                ):
                    if records:
                        connection.execute(
                            self._upsert(table, key),
                            [{**_row(r), "instance": self._instance} for r in records],
                        )
                if abandoned():
                    raise StateStoreError("write", "timeout")  # rolls the transaction back
        except SQLAlchemyError as exc:
            raise _error(exc, "write") from None

    def _upsert(self, table: Any, key: str) -> Any:
        """``INSERT ... ON CONFLICT (instance, key) DO UPDATE``: a put replaces by key within its
        instance in one statement."""
        insert_into = sqlite_insert if self._engine.dialect.name == "sqlite" else pg_insert
        statement = insert_into(table)
        columns = {
            c.name: statement.excluded[c.name]
            for c in table.columns
            if c.name not in ("instance", key)
        }
        return statement.on_conflict_do_update(index_elements=["instance", key], set_=columns)

    def discard(self) -> None:
        self._check()
        try:
            with self._engine.begin() as connection:
                for table in (_TURNS, _TICKETS, _MEMBERS):
                    connection.execute(delete(table).where(table.c.instance == self._instance))
        except SQLAlchemyError as exc:
            raise _error(exc, "discard") from None

    def close(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self._bounded is not None:
            self._bounded.close()
        self._engine.dispose()

    def _check(self) -> None:
        if self._closed:
            raise StateStoreError("call", "closed")


def _row(record: MemberRecord | TicketRecord | TurnRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}


def _fields(row: Any) -> dict[str, Any]:
    """A loaded row's record fields (its ``instance`` is the store's, not the record's)."""
    return {name: value for name, value in row.items() if name != "instance"}


class SqliteWriter:
    """The one connection an SQLite file store of ``instance`` writes through (WAL,
    ``synchronous=NORMAL``); every row it writes or deletes is that instance's.

    Each :meth:`apply` is one ``BEGIN IMMEDIATE`` transaction of prepared statements, its wait for
    another writer's lock bounded by ``busy_timeout`` (the deadline's database share, set again
    only when ``state.operationTimeoutMs`` changes). Values are bound through the tables' own
    column types, so what the engine loads reads them back as written.
    """

    def __init__(
        self, path: Path, engine: Engine, deadline: Callable[[], timedelta], instance: str
    ) -> None:
        self._deadline = deadline
        self._instance = instance
        self._busy = -1
        self._commits = 0
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA wal_autocheckpoint=0")
            self._db.execute(f"PRAGMA journal_size_limit={_WAL_LIMIT_BYTES}")
        except sqlite3.Error:
            self._db.close()
            raise
        self._checkpointer = _Checkpointer(path)
        dialect = engine.dialect
        self._upserts = {
            name: _Upsert(table, key, dialect, instance)
            for name, table, key in (
                ("members", _MEMBERS, "session_id"),
                ("tickets", _TICKETS, "ticket_id"),
                ("turns", _TURNS, "session_id"),
            )
        }

    def apply(self, change: Change) -> None:
        busy = max(1, int(self._deadline().total_seconds() * 1000 * DATABASE_SHARE))
        db = self._db
        if busy != self._busy:
            db.execute(f"PRAGMA busy_timeout={busy}")
            self._busy = busy
        db.execute("BEGIN IMMEDIATE")
        try:
            for sql, keys in (
                (_DELETE_MEMBER, change.drop_members),
                (_DELETE_TICKET, change.drop_tickets),
                (_DELETE_TURN, change.drop_turns),
            ):
                if keys:
                    db.executemany(sql, [(self._instance, k) for k in keys])
            for name, records in (
                ("members", change.members),
                ("tickets", change.tickets),
                ("turns", change.turns),
            ):
                if records:
                    upsert = self._upserts[name]
                    db.executemany(upsert.sql, [upsert.values(r) for r in records])
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            self._checkpointer.due.set()

    def close(self) -> None:
        self._checkpointer.stop()
        self._db.close()


class BoundedWrites:
    """Writes on one thread of their own, each waited for at most the deadline.

    A write that outlives its deadline fails with ``timeout``; it is told so, and rolls back
    instead of committing if it ever gets that far (on a connection the pool opened anew, say);
    every connection the engine holds is cut (the stuck one fails at once and frees the thread),
    and writes fail at once with ``unavailable`` for one more deadline before the store is tried
    again. Only a commit already on the wire when the deadline passed can still land (as with any
    deadline on a remote commit): the effect it was ahead of did not run, so at worst a restart
    finds a prompt ``uncertain`` that was never typed, or a send queued that was refused.
    """

    def __init__(self, engine: Engine, deadline: Callable[[], timedelta]) -> None:
        self._deadline = deadline
        self._open = OpenConnections(engine)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="fleetd-state-write"
        )
        self._resume_at = 0.0
        self.timeouts = 0

    def run(self, write: Callable[[Callable[[], bool]], None]) -> None:
        """Run ``write`` on the writer thread; it is handed a test that says whether its caller
        gave up, and must roll back rather than commit then."""
        if time.monotonic() < self._resume_at:
            raise StateStoreError("write", "unavailable", detail="the last write timed out")
        seconds = self._deadline().total_seconds()
        gave_up = threading.Event()
        future = self._pool.submit(write, gave_up.is_set)
        try:
            future.result(timeout=seconds)
        except concurrent.futures.TimeoutError:
            gave_up.set()  # before the cut: a retried connection never commits it later
            self.timeouts += 1
            self._open.cut()
            self._resume_at = time.monotonic() + seconds
            raise StateStoreError("write", "timeout") from None

    def close(self) -> None:
        self._open.cut()
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Checkpointer:
    """A daemon thread that checkpoints the store's log when told to (``PASSIVE``: it waits for
    no reader or writer, and no writer waits for it)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.due = threading.Event()
        self._stopping = False
        self.checkpoints = 0
        self._thread = threading.Thread(
            target=self._run, name="fleetd-state-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self.due.wait()
                self.due.clear()
                if self._stopping:
                    return
                with contextlib.suppress(sqlite3.Error):  # the next one tries again
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    self.checkpoints += 1
        finally:
            db.close()

    def stop(self) -> None:
        self._stopping = True
        self.due.set()
        self._thread.join(timeout=5)


class _Upsert:
    """``INSERT ... ON CONFLICT (instance, key) DO UPDATE`` for one table of ``instance``, with
    its columns' binders."""

    def __init__(self, table: Any, key: str, dialect: Any, instance: str) -> None:
        self._instance = instance
        statement = sqlite_insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=["instance", key],
            set_={
                c.name: statement.excluded[c.name]
                for c in table.columns
                if c.name not in ("instance", key)
            },
        )
        compiled = statement.compile(dialect=dialect, column_keys=[c.name for c in table.columns])
        self.sql = str(compiled)  # qmark placeholders, in the order of positiontup
        order = compiled.positiontup or ()
        self._binders: Sequence[tuple[str, Callable[[Any], Any] | None]] = tuple(
            (name, table.c[name].type.bind_processor(dialect)) for name in order
        )

    def values(self, record: MemberRecord | TicketRecord | TurnRecord) -> tuple[Any, ...]:
        return tuple(
            value if bind is None or value is None else bind(value)
            for name, bind in self._binders
            for value in (self._instance if name == "instance" else getattr(record, name),)
        )
