"""``SqlJournal``: the :class:`~fleetd.journal.port.Journal` on SQLite or PostgreSQL.

Each call runs :class:`~fleetd.journal.store.SqlStore` on the journal's own single worker thread
(SQLModel is synchronous), so the event loop never waits on a disk or a network and one journal's
calls reach the database in the order they were made. Several journals (two fleetd processes, or
two clients in a test) coordinate through the database: ``BEGIN IMMEDIATE`` on SQLite,
``FOR UPDATE SKIP LOCKED`` on PostgreSQL.

Construction never touches the database. The first call prepares the schema: with
``migrate=True`` (the default) it upgrades the database to the migration head, otherwise it only
checks that the database is there (:class:`~fleetd.errors.JournalSchemaError` if not). A failed
preparation (database down at startup) is retried by the next call, so a journal that comes up
late starts working without a restart.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Engine

from fleetd.errors import JournalUnavailableError
from fleetd.journal.engine import journal_engine
from fleetd.journal.migrate import check_at_head, upgrade_engine
from fleetd.journal.port import DEFAULT_CLAIM_LIMIT, DEFAULT_RECENT_LIMIT, Journal
from fleetd.journal.records import (
    AttemptOutcome,
    Claim,
    IncidentChange,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
)
from fleetd.journal.store import SqlStore

__all__ = ["SqlJournal"]

T = TypeVar("T")


class SqlJournal:
    """A :class:`~fleetd.journal.port.Journal` over SQLAlchemy; see the module docstring."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self._migrate = migrate
        self._engine = journal_engine(url)
        self._store = SqlStore(self._engine)
        self._ready = False
        self._closed = False
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetd-journal")

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (tests add connect hooks to it)."""
        return self._engine

    def _prepared(self, call: Callable[[], T]) -> T:
        if not self._ready:
            if self._migrate:
                upgrade_engine(self._engine)
            else:
                check_at_head(self._engine)
            self._ready = True
        return call()

    async def _run(self, function: Callable[..., T], *args: object, **kwargs: object) -> T:
        if self._closed:
            raise JournalUnavailableError("call", "closed")
        call = functools.partial(function, *args, **kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._prepared, call)

    async def record(
        self, change: IncidentChange, events: Sequence[NewEvent] = (), *, now: datetime
    ) -> tuple[RecordedEvent, ...]:
        return await self._run(self._store.record, change, tuple(events), now)

    async def settle(
        self,
        incident_id: str,
        *,
        now: datetime,
        after_revision: int,
        events: Sequence[NewEvent] = (),
        cancel: Sequence[int] = (),
        rearm: Sequence[int] = (),
    ) -> tuple[RecordedEvent, ...] | None:
        return await self._run(
            self._store.settle,
            incident_id,
            now=now,
            after_revision=after_revision,
            events=tuple(events),
            cancel=tuple(cancel),
            rearm=tuple(rearm),
        )

    async def get(self, incident_id: str) -> StoredIncident | None:
        return await self._run(self._store.get, incident_id)

    async def recent(
        self,
        *,
        resolved_since: datetime,
        limit: int = DEFAULT_RECENT_LIMIT,
        involving: str | None = None,
    ) -> tuple[StoredIncident, ...]:
        return await self._run(self._store.recent, resolved_since, limit, involving)

    async def load_open(self) -> JournalSnapshot:
        return await self._run(self._store.load_open)

    async def claim_due(
        self, owner: str, *, now: datetime, lease: timedelta, limit: int = DEFAULT_CLAIM_LIMIT
    ) -> tuple[Claim, ...]:
        return await self._run(self._store.claim_due, owner, now, lease, limit)

    async def complete(self, claim: Claim, *, now: datetime, http_status: int | None) -> bool:
        return await self._run(
            self._store.finish, claim, AttemptOutcome.DELIVERED, now, http_status=http_status
        )

    async def reschedule(
        self,
        claim: Claim,
        *,
        now: datetime,
        due_at: datetime,
        failure: str,
        http_status: int | None = None,
    ) -> bool:
        return await self._run(
            self._store.finish,
            claim,
            AttemptOutcome.RETRY,
            now,
            failure=failure,
            http_status=http_status,
            retry_at=due_at,
        )

    async def fail(
        self,
        claim: Claim,
        *,
        now: datetime,
        failure: str,
        http_status: int | None = None,
        sink: str | None = None,
    ) -> bool:
        return await self._run(
            self._store.finish,
            claim,
            AttemptOutcome.PERMANENT,
            now,
            failure=failure,
            http_status=http_status,
            sink=sink,
        )

    async def release(self, claim: Claim, *, now: datetime) -> bool:
        return await self._run(self._store.finish, claim, None, now)

    async def stats(self) -> JournalStats:
        return await self._run(self._store.stats)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker, self._engine.dispose)
        self._worker.shutdown(wait=True)


if TYPE_CHECKING:
    _conforms: type[Journal] = SqlJournal  # mypy checks the class against the port
