"""Opening the state store for ``fleetd serve``: the store, its migrations and the writer lock.

:func:`open_state` opens ``state.url`` (creating and migrating it), takes the instance's writer
lock and, with ``discard``, forgets what it held (``fleetd serve --discard-state``: a fresh start
on purpose). Anything that stops it — a file that is not a database, a schema newer than this
build, a lock another fleetd holds — is a :class:`~fleetd.errors.StateStoreError` the command
reports with the store's (masked) URL, exiting 2.
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
) -> OpenedState:
    """Open, migrate and take ``instance``'s writer lock on the configured store (each operation
    bounded by ``deadline()``, read anew: ``state.operationTimeoutMs`` is hot); with ``discard``
    empty it first."""
    url = config.state.url.get_secret_value()
    store = SqlStateStore(url, deadline=deadline)
    lock = InstanceLock(store.engine, url, instance)
    try:
        lock.acquire(now)
        if discard:
            store.discard()
            _log.warning("state store %s discarded: this run starts afresh", mask_url(url))
    except BaseException:
        lock.release()
        store.close()
        raise
    return OpenedState(store=store, lock=lock)
