"""One writer per instance: the lock a fleetd holds on its state store for its whole life.

* **SQLite**: an OS file lock (``flock``, exclusive, non-blocking) on ``<store>.lock`` beside the
  database file; the kernel lets go when the process ends, however it ends. An SQLite file is
  one machine's: it has one writer whatever the instance name.
* **PostgreSQL**: ``pg_try_advisory_lock`` on a key derived from the instance name, held by a
  connection kept open for the process's life; the server lets go when that connection closes.

Whoever takes the lock records itself (pid, host, start time) in ``state_instances``; a start
that finds the lock held is refused with :class:`~fleetd.errors.StateStoreError` naming that
holder. The lock is the seat for several fleetd instances sharing one database later: each
instance name has its own key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, text
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import StateStoreError
from fleetd.journal.engine import FILE_MODE, sqlite_path
from fleetd.state.facts import InstanceHolder
from fleetd.state.tables import InstanceRow

__all__ = ["InstanceLock", "lock_key"]

_INSTANCES = InstanceRow.__table__  # type: ignore[attr-defined]


def lock_key(instance: str) -> int:
    """The signed 64-bit advisory lock key of ``instance``."""
    digest = hashlib.sha256(f"fleetd-state:{instance}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class InstanceLock:
    """The writer lock of ``instance`` on the store behind ``engine``."""

    def __init__(self, engine: Engine, url: str, instance: str) -> None:
        self._engine = engine
        self._url = url
        self._instance = instance
        self._fd: int | None = None
        self._connection: Connection | None = None

    def acquire(self, now: datetime) -> None:
        """Take the lock and record the holder, or raise naming who holds it."""
        if self._engine.dialect.name == "sqlite":
            self._flock()
        else:
            self._advisory()
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

    def _flock(self) -> None:
        path = sqlite_path(self._url)
        if path is None:
            return  # an in-memory database has one process by nature
        lock = path.with_name(path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._held() from None
        self._fd = fd

    def _advisory(self) -> None:
        try:
            connection = self._engine.connect()
            taken = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": lock_key(self._instance)}
            ).scalar()
            connection.commit()
        except SQLAlchemyError:
            raise StateStoreError("lock", "unavailable") from None
        if not taken:
            connection.close()
            raise self._held()
        self._connection = connection

    def _held(self) -> StateStoreError:
        holder = self.holder()
        who = (
            f"pid {holder.pid} on {holder.host} since {holder.started_at.isoformat()}"
            if holder is not None
            else "another process"
        )
        return StateStoreError(
            "lock", "held", detail=f"instance {self._instance!r} is held by {who}"
        )

    def holder(self) -> InstanceHolder | None:
        """The recorded holder of this instance, if any."""
        try:
            with self._engine.connect() as connection:
                row: Any = (
                    connection.execute(
                        select(_INSTANCES).where(_INSTANCES.c.instance == self._instance)
                    )
                    .mappings()
                    .first()
                )
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
                    text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(self._instance)}
                )
                self._connection.commit()
            with contextlib.suppress(SQLAlchemyError):
                self._connection.invalidate()  # never back to the pool holding a session lock
                self._connection.close()
            self._connection = None
