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

from fleetd.config import FleetdConfig
from fleetd.config.fields import mask_url
from fleetd.state.lock import InstanceLock
from fleetd.state.sql import SqlStateStore

__all__ = ["OpenedState", "open_state"]

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
    ``standby`` together are the caller's error to refuse)."""
    url = config.state.url.get_secret_value()
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
