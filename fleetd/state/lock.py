"""One writer per instance: the lock a fleetd holds on its state store for its whole life.

* **SQLite**: an OS file lock (``flock``, exclusive, non-blocking) on ``<store>.lock`` beside the
  database file; the kernel lets go when the process ends, however it ends. An SQLite file is
  one machine's: it has one writer whatever the instance name.
* **PostgreSQL**: ``pg_try_advisory_lock`` on a key derived from the schema and the instance
  name (two stores in one database never share a key), held by a connection kept open for the
  process's life; the server lets go when that connection closes. That connection asks the
  server to probe it with TCP keepalives, so a holder whose whole host vanishes loses the lock
  within about :data:`KEEPALIVE_SECONDS` instead of the kernel's two hours.

Whoever takes the lock records itself (pid, host, start time) in ``state_instances``; a start
that finds the lock held is refused with :class:`~fleetd.errors.StateStoreError` naming that
holder. :meth:`InstanceLock.try_acquire` answers whether it took the lock instead of raising:
a standby (``fleetd serve --standby``) asks it again until the holder dies. The holder checks its
lock as often (:meth:`InstanceLock.check`): a PostgreSQL lock dies with its connection, so a
holder whose connection was cut takes the lock again, or stops if a standby took it meanwhile.
Each instance name has its own key, so several fleetd instances share one database.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, text
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import StateStoreError
from fleetd.journal.engine import FILE_MODE, sqlite_path
from fleetd.state.facts import InstanceHolder
from fleetd.state.tables import InstanceRow

__all__ = ["KEEPALIVE_SECONDS", "InstanceLock", "LockCheck", "lock_free", "lock_key"]

#: About how long the PostgreSQL server keeps the lock of a holder whose host stopped answering:
#: idle seconds before the first keepalive probe, then probes this far apart, two unanswered.
KEEPALIVE_SECONDS = 15
_KEEPALIVE = (
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 5",
    "SET tcp_keepalives_count = 2",
)

_INSTANCES = InstanceRow.__table__  # type: ignore[attr-defined]


def lock_key(instance: str, schema: str = "public") -> int:
    """The signed 64-bit advisory lock key of ``instance`` in the store of ``schema``."""
    digest = hashlib.sha256(f"fleetd-state:{schema}:{instance}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_free(path: Path) -> bool:
    """Whether no process holds the writer lock of the SQLite store at ``path`` right now."""
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing lets go of a lock it took
    return True


class LockCheck(StrEnum):
    """What :meth:`InstanceLock.check` found."""

    HELD = "held"
    RETAKEN = "retaken"  # its connection had died; the lock was free and is held again
    LOST = "lost"  # another process took it meanwhile


class InstanceLock:
    """The writer lock of ``instance`` on the store behind ``engine``."""

    def __init__(self, engine: Engine, url: str, instance: str) -> None:
        self._engine = engine
        self._url = url
        self._instance = instance
        self._fd: int | None = None
        self._connection: Connection | None = None
        self._key: int | None = None
        self._kept = False  # taken once: a lock lost with its connection is to be taken again

    @property
    def instance(self) -> str:
        return self._instance

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fd is not None or self._connection is not None

    def acquire(self, now: datetime) -> None:
        """Take the lock and record the holder, or raise naming who holds it."""
        if not self.try_acquire(now):
            raise self.held_error()

    def try_acquire(self, now: datetime) -> bool:
        """Take the lock and record the holder; ``False`` while another process holds it."""
        if self.held:
            return True
        taken = self._flock() if self._engine.dialect.name == "sqlite" else self._advisory()
        if not taken:
            return False
        holder = InstanceHolder(
            instance=self._instance, pid=os.getpid(), host=socket.gethostname(), started_at=now
        )
        try:
            with self._engine.begin() as connection:
                connection.execute(
                    delete(_INSTANCES).where(_INSTANCES.c.instance == self._instance)
                )
                connection.execute(
                    insert(_INSTANCES),
                    [
                        {
                            "instance": holder.instance,
                            "pid": holder.pid,
                            "host": holder.host,
                            "started_at": holder.started_at,
                        }
                    ],
                )
        except SQLAlchemyError:
            self.release()
            raise StateStoreError("lock", "unavailable") from None
        self._kept = True
        return True

    def check(self, now: datetime) -> LockCheck:
        """Whether this process still holds the lock it took: on PostgreSQL the lock lives as long
        as its connection, which a database restart, an idle-session kill or an outage ends
        without a word. A dead connection is let go and the lock taken again (``RETAKEN``) —
        or found taken by another process meanwhile (``LOST``: this one must stop, so that one
        writer serves the instance). Raises :class:`~fleetd.errors.StateStoreError` when the
        database cannot say; the next check asks again. An OS file lock cannot be lost."""
        if not self._kept or self._engine.dialect.name == "sqlite":
            return LockCheck.HELD  # an OS file lock (or one in-memory database) is the process's
        connection = self._connection
        if connection is not None:
            try:
                connection.execute(text("SELECT 1"))
                connection.commit()
                return LockCheck.HELD
            except SQLAlchemyError:
                with contextlib.suppress(SQLAlchemyError):
                    connection.invalidate()
                    connection.close()
                self._connection, self._key = None, None
        return LockCheck.RETAKEN if self.try_acquire(now) else LockCheck.LOST

    def _flock(self) -> bool:
        path = sqlite_path(self._url)
        if path is None:
            return True  # an in-memory database has one process by nature
        lock = path.with_name(path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def _advisory(self) -> bool:
        try:
            connection = self._engine.connect()
        except SQLAlchemyError:
            raise StateStoreError("lock", "unavailable") from None
        try:
            schema = connection.execute(text("SELECT current_schema()")).scalar()
            key = lock_key(self._instance, str(schema or "public"))
            taken = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": key}
            ).scalar()
            for setting in _KEEPALIVE if taken else ():
                connection.exec_driver_sql(setting)
            connection.commit()
        except SQLAlchemyError:
            with contextlib.suppress(SQLAlchemyError):
                connection.invalidate()  # a lock it may have taken goes with the session
                connection.close()
            raise StateStoreError("lock", "unavailable") from None
        if not taken:
            connection.close()
            return False
        self._connection = connection
        self._key = key
        return True

    def held_error(self) -> StateStoreError:
        """The refusal of a start that found the lock held, naming the holder (on SQLite the
        file's one writer, whatever instance it serves)."""
        holder = self.holder()
        if holder is None:
            detail = f"instance {self._instance!r} is held by another process"
        else:
            who = f"pid {holder.pid} on {holder.host} since {holder.started_at.isoformat()}"
            if holder.instance == self._instance:
                detail = f"instance {self._instance!r} is held by {who}"
            else:  # an SQLite file has one writer: another instance's holder holds it
                detail = f"the store is held by instance {holder.instance!r}, {who}"
        return StateStoreError("lock", "held", detail=detail)

    def holder(self) -> InstanceHolder | None:
        """The recorded holder of this instance, if any; on SQLite the file's latest holder,
        whatever its instance (its lock covers the whole file)."""
        query = select(_INSTANCES)
        if self._engine.dialect.name == "sqlite":
            query = query.order_by(_INSTANCES.c.started_at.desc())
        else:
            query = query.where(_INSTANCES.c.instance == self._instance)
        try:
            with self._engine.connect() as connection:
                row: Any = connection.execute(query).mappings().first()
                connection.rollback()
        except SQLAlchemyError:
            return None
        return InstanceHolder(**dict(row)) if row is not None else None

    def release(self) -> None:
        """Let go (the process's end does it too)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._connection is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._connection.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": self._key}
                )
                self._connection.commit()
            with contextlib.suppress(SQLAlchemyError):
                self._connection.invalidate()  # never back to the pool holding a session lock
                self._connection.close()
            self._connection = None
            self._key = None
