"""The journal's retention: resolved incidents older than ``journal.retentionDays`` are deleted.

Without it the journal keeps every resolved incident, its events and their delivery attempts
forever. :class:`JournalRetention` is a loop step (the composition root runs it every
:data:`RETENTION_PASS_SECONDS`): it deletes incidents resolved before ``now - retentionDays``,
oldest first, in transactions of at most ``batch`` incidents
(:meth:`~fleetd.journal.port.Journal.purge`), and at most ``batches`` of them per pass, so one
pass never holds the journal's single worker (or a database lock) for long and a large backlog
drains over a few passes. An incident with an event still pending stays until its delivery ends.

The retention is read anew each pass (hot). Its floor, one day, is the span the operator's list of
resolved incidents shows (:data:`~fleetd.notify.desk.RESOLVED_WINDOW`). A journal failure ends the
pass; the journal's health reports it, and the next pass is the retry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Final

from fleetd.clock import Clock
from fleetd.errors import JournalError
from fleetd.journal.port import DEFAULT_PURGE_LIMIT, Journal

__all__ = ["RETENTION_BATCHES", "RETENTION_PASS_SECONDS", "JournalRetention"]

_log = logging.getLogger("fleetd.journal")

RETENTION_PASS_SECONDS: Final = 600.0
"""How often the retention pass runs."""
RETENTION_BATCHES: Final = 20
"""Most purge transactions in one pass (20 x 500: 10,000 incidents)."""


class JournalRetention:
    """Deletes resolved history past the retention, in bounded batches."""

    def __init__(
        self,
        journal: Journal,
        *,
        retention: Callable[[], timedelta],
        clock: Clock,
        batch: int = DEFAULT_PURGE_LIMIT,
        batches: int = RETENTION_BATCHES,
    ) -> None:
        if batch < 1 or batches < 1:
            raise ValueError("batch and batches must be at least 1")
        self._journal = journal
        self._retention = retention
        self._clock = clock
        self._batch = batch
        self._batches = batches

    async def step(self) -> int:
        """One pass; returns how many incidents it deleted."""
        cutoff = self._clock.now() - self._retention()
        deleted = 0
        for _ in range(self._batches):
            try:
                count = await self._journal.purge(resolved_before=cutoff, limit=self._batch)
            except JournalError:
                break  # reported by the journal's health; the next pass tries again
            deleted += count
            if count < self._batch:
                break
        if deleted:
            _log.info("journal retention: deleted %d incidents resolved before %s", deleted, cutoff)
        return deleted
