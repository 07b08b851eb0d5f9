"""Opening the state store for ``fleetd serve``: the store, its migrations and the writer lock.

:func:`open_state` opens ``state.url`` (creating and migrating it), takes the instance's writer
lock and, with ``discard``, forgets what it held (``fleetd serve --discard-state``: a fresh start
on purpose). With ``standby`` a lock another fleetd holds does not stop it: the store comes back
without the lock (:attr:`OpenedState.active` false) and the caller waits for it with
:meth:`OpenedState.take_over`, loading the store only once it holds the lock. Anything that
stops it — a file that is not a database, a schema newer than this build, a lock another fleetd
holds — is a :class:`~fleetd.errors.StateStoreError` the command reports with the store's
(masked) URL, exiting 2.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from fleetd.config import FleetdConfig
from fleetd.config.fields import mask_url
from fleetd.errors import StateStoreError
from fleetd.journal.engine import sqlite_path
from fleetd.state.lock import InstanceLock, lock_free
from fleetd.state.sql import SqlStateStore

__all__ = ["UNREADABLE", "OpenedState", "open_state", "set_aside"]

_log = logging.getLogger("fleetd.state")


@dataclass(slots=True)
class OpenedState:
    store: SqlStateStore
    lock: InstanceLock

    @property
    def active(self) -> bool:
        """Whether this process holds the instance's writer lock (a standby does not yet)."""
        return self.lock.held

    def take_over(self, now: datetime) -> bool:
        """Try the lock once more (a standby's wait); ``True`` once this process holds it."""
        return self.lock.try_acquire(now)

    def close(self) -> None:
        self.store.close()
        self.lock.release()


#: Why a store cannot be read (its file, its schema or its records): what ``--discard-state``
#: may set aside on SQLite.
UNREADABLE = frozenset({"corrupt", "newer_schema", "schema_missing", "empty"})


def open_state(
    config: FleetdConfig,
    *,
    deadline: Callable[[], timedelta],
    instance: str,
    discard: bool,
    now: datetime,
    standby: bool = False,
) -> OpenedState:
    """Open, migrate and take ``instance``'s writer lock on the configured store (each operation
    bounded by ``deadline()``, read anew: ``state.operationTimeoutMs`` is hot); with ``discard``
    empty it first (this instance's rows: other instances sharing the store keep theirs). With
    ``standby`` a held lock is no refusal: the store is returned without it (``discard`` and
    ``standby`` together are the caller's error to refuse).

    An SQLite file that exists but holds nothing (truncated to 0 bytes) is refused as ``empty``,
    never taken for a first start. With ``discard``, an SQLite file that cannot be read at all
    (``UNREADABLE``) and that no live fleetd holds is set aside — renamed with its ``-wal`` and
    ``-shm``, kept for whoever wants to look — and a new one is made."""
    url = config.state.url.get_secret_value()
    path = sqlite_path(url)
    if path is not None and not discard and _empty(path):
        raise StateStoreError("open", "empty", detail="the file holds nothing")
    try:
        return _open(
            url, deadline=deadline, instance=instance, discard=discard, now=now, standby=standby
        )
    except StateStoreError as exc:
        if path is None or not discard or exc.reason not in UNREADABLE or not lock_free(path):
            raise
        aside = set_aside(path, now)
        _log.warning(
            "state store %s cannot be read (%s): set aside as %s; this run starts afresh",
            mask_url(url),
            exc.reason,
            aside,
        )
        return _open(
            url, deadline=deadline, instance=instance, discard=False, now=now, standby=standby
        )


def _open(
    url: str,
    *,
    deadline: Callable[[], timedelta],
    instance: str,
    discard: bool,
    now: datetime,
    standby: bool,
) -> OpenedState:
    store = SqlStateStore(url, deadline=deadline, instance=instance)
    lock = InstanceLock(store.engine, url, instance)
    try:
        if not lock.try_acquire(now):
            if not standby:
                raise lock.held_error()
        elif discard:
            store.discard()
            _log.warning("state store %s discarded: this run starts afresh", mask_url(url))
    except BaseException:
        lock.release()
        store.close()
        raise
    return OpenedState(store=store, lock=lock)


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except FileNotFoundError:
        return False
    except OSError:
        raise StateStoreError("open", "unavailable") from None


def set_aside(path: Path, now: datetime) -> Path:
    """Rename the SQLite file at ``path`` (and its ``-wal`` and ``-shm``) out of the way;
    returns the new name of the file."""
    aside = path.with_name(f"{path.name}.discarded-{now.strftime('%Y%m%dT%H%M%SZ')}")
    try:
        for suffix in ("-wal", "-shm", ""):
            source = Path(f"{path}{suffix}")
            if source.exists():
                source.rename(Path(f"{aside}{suffix}"))
    except OSError:
        raise StateStoreError("discard", "unavailable") from None
    return aside
