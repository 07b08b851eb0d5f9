"""How long one journal operation may take, and how a call that outlives it lets go.

Every journal operation has a deadline, ``journal.operationTimeoutMs`` (read anew for every
transaction and connection, so a reload applies at once). The database enforces what it can, at
:data:`DATABASE_SHARE` of the deadline, so that it gives up first and cleanly (the transaction
rolled back, the reason its own) before the caller stops waiting:

* **SQLite**: ``busy_timeout`` is set before each ``BEGIN IMMEDIATE``, so waiting for another
  writer's lock ends in ``SQLITE_BUSY`` (``locked``).
* **PostgreSQL**: each transaction starts with ``statement_timeout`` and ``lock_timeout`` set
  (``set_config(..., true)``, local to the transaction; ``timeout`` and ``locked``); a connect
  gives up after the deadline (``connect_timeout``, whole seconds, at least 2: libpq's own rule)
  and a connection whose peer stops acknowledging for it is dropped by the kernel
  (``tcp_user_timeout``, keepalives).

A peer that accepts and never answers defeats all of these: the server never sees the query, and
a frozen proxy's kernel acknowledges every byte. So :class:`~fleetd.journal.sql.SqlJournal` also
stops waiting after the deadline and then :meth:`OpenConnections.cut` shuts down the sockets of
the engine's open connections (on SQLite it interrupts them): the call stuck on one gets an error
at once, its connection is invalidated, and the journal's one worker thread is free for the next
call, which reconnects (``pool_pre_ping``). Only a connect in progress cannot be cut; it ends at
its connect timeout.
"""

from __future__ import annotations

import math
import os
import socket
import sqlite3
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine, event

__all__ = ["DATABASE_SHARE", "DEFAULT_DEADLINE", "OpenConnections", "bound_operations"]

DEFAULT_DEADLINE = timedelta(seconds=5)
"""The deadline of a journal built without one (``journal.operationTimeoutMs``'s default)."""
DATABASE_SHARE = 0.8
"""The share of the deadline the database's own statement, lock and busy timeouts get."""
_KEEPALIVE_INTERVAL_SECONDS = 1
_KEEPALIVE_COUNT = 3


def _milliseconds(deadline: Callable[[], timedelta], share: float = 1.0) -> int:
    return max(1, int(deadline().total_seconds() * 1000 * share))


def bound_operations(engine: Engine, deadline: Callable[[], timedelta]) -> None:
    """Make ``engine``'s database enforce ``deadline()`` on every transaction and connect."""
    if engine.dialect.name == "sqlite":

        def busy_timeout(connection: Connection) -> None:
            busy = _milliseconds(deadline, DATABASE_SHARE)
            connection.exec_driver_sql(f"PRAGMA busy_timeout={busy}")

        # inserted ahead of the engine's own BEGIN IMMEDIATE, which is what waits for the lock
        event.listen(engine, "begin", busy_timeout, insert=True)
        return

    def local_timeouts(connection: Connection) -> None:
        value = f"{_milliseconds(deadline, DATABASE_SHARE)}ms"
        connection.exec_driver_sql(
            "SELECT set_config('statement_timeout', %(value)s, true), "
            "set_config('lock_timeout', %(value)s, true)",
            {"value": value},
        )

    def connect_limits(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        milliseconds = _milliseconds(deadline)
        seconds = max(2, math.ceil(milliseconds / 1000))
        params["connect_timeout"] = seconds
        params["tcp_user_timeout"] = milliseconds
        params["keepalives"] = 1
        params["keepalives_idle"] = seconds
        params["keepalives_interval"] = _KEEPALIVE_INTERVAL_SECONDS
        params["keepalives_count"] = _KEEPALIVE_COUNT

    event.listen(engine, "do_connect", connect_limits)
    event.listen(engine, "begin", local_timeouts)


class OpenConnections:
    """The database connections ``engine``'s pool holds open, and a way to cut them all."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, Any] = {}
        event.listen(engine, "connect", self._opened)
        event.listen(engine, "close", self._closed)
        event.listen(engine, "close_detached", self._detached)

    def _opened(self, dbapi_connection: Any, _record: Any) -> None:
        with self._lock:
            self._open[id(dbapi_connection)] = dbapi_connection

    def _closed(self, dbapi_connection: Any, _record: Any) -> None:
        self._detached(dbapi_connection)

    def _detached(self, dbapi_connection: Any) -> None:
        with self._lock:
            self._open.pop(id(dbapi_connection), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def cut(self) -> int:
        """Interrupt (SQLite) or shut down the socket of (PostgreSQL) every open connection, from
        any thread; a call blocked on one fails at once. Returns how many were cut."""
        with self._lock:
            connections = list(self._open.values())
        cut = 0
        for connection in connections:
            if isinstance(connection, sqlite3.Connection):
                try:
                    connection.interrupt()
                except sqlite3.ProgrammingError:  # closed meanwhile
                    continue
                cut += 1
            elif _shut_down(connection):
                cut += 1
        return cut


def _shut_down(connection: Any) -> bool:
    """Shut down a psycopg connection's socket (the descriptor stays its owner's to close)."""
    try:
        descriptor = connection.pgconn.socket
    except Exception:  # noqa: BLE001 - closed or broken already: nothing to cut
        return False
    try:
        with socket.socket(fileno=os.dup(descriptor)) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:
        return False
    return True
