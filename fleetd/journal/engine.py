"""Engines for the journal's two databases, and the one place database errors are translated.

SQLite (``sqlite:///path``, the default beside the config): the file is created owner-only
(``0600``, an existing file is narrowed to it) in a directory created ``0700``; SQLite gives its
``-wal`` and ``-shm`` files the database file's mode. Every connection runs in WAL mode with
``synchronous=FULL`` and foreign keys on, and every transaction starts with ``BEGIN IMMEDIATE``:
it takes SQLite's write lock at once, so two writers (two fleetd processes, or a claim racing a
record) serialise instead of failing halfway with "database is locked". A process killed mid
transaction loses only that transaction; WAL rolls it back on the next open.

PostgreSQL (``postgresql://``): the driver is psycopg 3 (``postgresql+psycopg``), connections are
checked before use (a restarted server is not an error) and a connect attempt gives up after
:data:`CONNECT_TIMEOUT_SECONDS`. Claims use ``SELECT ... FOR UPDATE SKIP LOCKED``.

:func:`translate` turns SQLAlchemy, driver and OS errors into the
:class:`~fleetd.errors.JournalError` tree with a bounded ``reason``; the database's message is
inspected but never kept, because it can quote SQL parameters.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError

from fleetd.errors import (
    JournalError,
    JournalRefusedError,
    JournalSchemaError,
    JournalUnavailableError,
)

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "FILE_MODE",
    "journal_engine",
    "prepare_sqlite_file",
    "sqlite_path",
    "translate",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
CONNECT_TIMEOUT_SECONDS = 5
BUSY_TIMEOUT_MS = 5000

_SQLITE_REASONS = {
    "SQLITE_FULL": "disk_full",
    "SQLITE_BUSY": "locked",
    "SQLITE_LOCKED": "locked",
    "SQLITE_READONLY": "read_only",
    "SQLITE_CANTOPEN": "cannot_open",
    "SQLITE_IOERR": "io_error",
    "SQLITE_CORRUPT": "corrupt",
    "SQLITE_NOTADB": "corrupt",
    "SQLITE_PERM": "permission_denied",
}
_SQLSTATE_SCHEMA = {"42P01", "42703", "3F000"}
_OS_REASONS = {
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "read_only",
}


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise JournalUnavailableError("open", "unsupported_url") from None


def sqlite_path(url: str) -> Path | None:
    """The file of an ``sqlite:///`` URL (``None`` for another database or an in-memory one)."""
    parsed = _parse(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def prepare_sqlite_file(path: Path) -> None:
    """Create ``path`` owner-only (narrow it if it exists), and its directory if missing."""
    try:
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)
        for suffix in ("-wal", "-shm"):
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                companion.chmod(FILE_MODE)
    except OSError as exc:
        raise translate(exc, "open") from None


def journal_engine(url: str) -> Engine:
    """An engine for ``url`` (``sqlite:///...`` or ``postgresql://...``); nothing connects yet."""
    parsed = _parse(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(url)
        if path is not None:
            prepare_sqlite_file(path)
        engine = create_engine(parsed, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(
            parsed,
            pool_pre_ping=True,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
        )
    raise JournalUnavailableError("open", "unsupported_url")


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Autocommit at the driver, so that _sqlite_begin alone decides how a transaction starts.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def translate(exc: BaseException, operation: str) -> JournalError:
    """The :class:`~fleetd.errors.JournalError` for a failure during ``operation``."""
    if isinstance(exc, JournalError):
        return exc
    if isinstance(exc, OSError) and not isinstance(exc, SQLAlchemyError):
        reason = _OS_REASONS.get(exc.errno or 0, "cannot_open")
        return JournalUnavailableError(operation, reason, code=errno.errorcode.get(exc.errno or 0))
    orig = getattr(exc, "orig", None) or exc
    if isinstance(exc, IntegrityError):
        return JournalRefusedError(operation, "conflict", code=_code(orig))
    sqlite_name = getattr(orig, "sqlite_errorname", None)
    if isinstance(orig, sqlite3.Error):
        text = str(orig).lower()
        if "no such table" in text or "no such column" in text:
            return JournalSchemaError(operation, "schema_missing", code=sqlite_name)
        base = "_".join(str(sqlite_name or "").split("_")[:2])  # SQLITE_IOERR_WRITE: SQLITE_IOERR
        reason = _SQLITE_REASONS.get(base, "database_error")
        return JournalUnavailableError(operation, reason, code=sqlite_name)
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        if sqlstate in _SQLSTATE_SCHEMA:
            return JournalSchemaError(operation, "schema_missing", code=sqlstate)
        return JournalUnavailableError(operation, _sqlstate_reason(sqlstate), code=sqlstate)
    return JournalUnavailableError(operation, "unreachable", code=type(orig).__name__)


def _code(orig: object) -> str | None:
    value = getattr(orig, "sqlite_errorname", None) or getattr(orig, "sqlstate", None)
    return value if isinstance(value, str) else None


def _sqlstate_reason(sqlstate: str) -> str:
    if sqlstate == "53100":
        return "disk_full"
    if sqlstate.startswith(("08", "57P")):
        return "unreachable"
    if sqlstate.startswith("53"):
        return "insufficient_resources"
    if sqlstate.startswith("28"):
        return "auth_failed"
    if sqlstate in ("40001", "40P01"):
        return "serialization_failure"
    if sqlstate == "25006":
        return "read_only"
    if sqlstate == "55P03":
        return "locked"
    if sqlstate == "57014":  # query_canceled: statement_timeout ran out
        return "timeout"
    return "database_error"
