"""``SqlJournal``: the :class:`~fleetd.journal.port.Journal` on SQLite or PostgreSQL.

Each call runs :class:`~fleetd.journal.store.SqlStore` on the journal's own single worker thread
(SQLModel is synchronous), so the event loop never waits on a disk or a network and one journal's
calls reach the database in the order they were made. Several journals (two fleetd processes, or
two clients in a test) coordinate through the database: ``BEGIN IMMEDIATE`` on SQLite,
``FOR UPDATE SKIP LOCKED`` on PostgreSQL.

Construction never touches the database. The first call prepares the schema: with
``migrate=True`` (the default) it upgrades the database to the migration head, otherwise it only
checks that the database is there (:class:`~fleetd.errors.JournalSchemaError` if not). A
preparation that failed for a passing reason (database down at startup, locked, too slow) is
retried by the next call, so a journal that comes up late starts working without a restart. One
that failed for a lasting reason is decided once: a schema this build cannot use (a revision from
a newer fleetd, not at the head) or a corrupt file fails every later call with the same error
without touching the database again (no migration re-run, no log line per call); fix it and
restart fleetd.

Every call has a deadline (``deadline()``, ``journal.operationTimeoutMs``; see
:mod:`fleetd.journal.deadline`), counted from the moment it is made, so time spent queued behind
a stuck call counts too. A call not answered in time fails with
:class:`~fleetd.errors.JournalUnavailableError` (``timeout``); a queued one never runs, and the
open connections are cut so the worker thread is free again. The deadline runs on the system
clock by default: a database answers in real time, whatever clock the service's loops use.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Engine

from fleetd.clock import Clock, DeadlineExceededError, SystemClock, within
from fleetd.errors import JournalError, JournalSchemaError, JournalUnavailableError
from fleetd.journal.deadline import DEFAULT_DEADLINE, OpenConnections, bound_operations
from fleetd.journal.engine import journal_engine
from fleetd.journal.migrate import check_at_head, upgrade_engine
from fleetd.journal.port import (
    DEFAULT_CLAIM_LIMIT,
    DEFAULT_PURGE_LIMIT,
    DEFAULT_RECENT_LIMIT,
    Journal,
)
from fleetd.journal.store import SqlStore
from fleetd.journal.values import (
    MAX_INSTANCES,
    AttemptOutcome,
    Claim,
    IncidentChange,
    InstanceRecord,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
)
from fleetd.observe import Around, direct, observed

__all__ = ["SqlJournal"]

T = TypeVar("T")

_OPERATIONS = {"load_open": "load", "claim_due": "claim"}
"""Store methods whose error names the operation differently (as their transactions do)."""


def _lasting(exc: JournalError) -> bool:
    """A preparation failure that retrying cannot mend: the schema, or a corrupt file."""
    return isinstance(exc, JournalSchemaError) or exc.reason == "corrupt"


class SqlJournal:
    """A :class:`~fleetd.journal.port.Journal` over SQLAlchemy; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        deadline: Callable[[], timedelta] = lambda: DEFAULT_DEADLINE,
        clock: Clock | None = None,
    ) -> None:
        self.around: Around = direct
        self._migrate = migrate
        self._deadline = deadline
        self._clock = clock or SystemClock()
        self._engine = journal_engine(url)
        bound_operations(self._engine, deadline)
        self._connections = OpenConnections(self._engine)
        self._store = SqlStore(self._engine)
        self._ready = False
        self._refusal: JournalError | None = None  # a lasting preparation failure
        self._closed = False
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetd-journal")

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (tests add connect hooks to it)."""
        return self._engine

    def _prepared(self, call: Callable[[], T]) -> T:
        refusal = self._refusal
        if refusal is not None:  # decided once; a fresh error for every caller
            raise type(refusal)(refusal.operation, refusal.reason, code=refusal.code)
        if not self._ready:
            try:
                if self._migrate:
                    upgrade_engine(self._engine)
                else:
                    check_at_head(self._engine)
            except JournalError as exc:
                if _lasting(exc):
                    self._refusal = exc
                raise
            self._ready = True
        return call()

    async def _run(self, function: Callable[..., T], *args: object, **kwargs: object) -> T:
        if self._closed:
            raise JournalUnavailableError("call", "closed")
        call = functools.partial(function, *args, **kwargs)
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self._worker, self._prepared, call)
        try:
            return await within(self._clock, work, self._deadline().total_seconds())
        except DeadlineExceededError:
            self._connections.cut()
            name = getattr(function, "__name__", "call")
            raise JournalUnavailableError(_OPERATIONS.get(name, name), "timeout") from None

    def observe(self, around: Around) -> None:
        self.around = around

    @observed
    async def record(
        self, change: IncidentChange, events: Sequence[NewEvent] = (), *, now: datetime
    ) -> tuple[RecordedEvent, ...]:
        return await self._run(self._store.record, change, tuple(events), now)

    @observed
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

    @observed
    async def get(self, incident_id: str) -> StoredIncident | None:
        return await self._run(self._store.get, incident_id)

    @observed
    async def recent(
        self,
        *,
        resolved_since: datetime,
        limit: int = DEFAULT_RECENT_LIMIT,
        involving: str | None = None,
    ) -> tuple[StoredIncident, ...]:
        return await self._run(self._store.recent, resolved_since, limit, involving)

    @observed
    async def load_open(
        self, *, told_since: datetime | None = None, instance: str | None = None
    ) -> JournalSnapshot:
        return await self._run(self._store.load_open, told_since, instance)

    @observed
    async def renew_instance(self, record: InstanceRecord) -> InstanceRecord | None:
        return await self._run(self._store.renew_instance, record)

    @observed
    async def instances(
        self, *, limit: int = MAX_INSTANCES, summaries: bool = True
    ) -> tuple[InstanceRecord, ...]:
        return await self._run(self._store.instances, limit, summaries)

    @observed
    async def instance_summaries(self, names: Collection[str]) -> Mapping[str, str]:
        return await self._run(self._store.instance_summaries, tuple(names))

    @observed
    async def claim_due(
        self, owner: str, *, now: datetime, lease: timedelta, limit: int = DEFAULT_CLAIM_LIMIT
    ) -> tuple[Claim, ...]:
        return await self._run(self._store.claim_due, owner, now, lease, limit)

    @observed
    async def complete(self, claim: Claim, *, now: datetime, http_status: int | None) -> bool:
        return await self._run(
            self._store.finish, claim, AttemptOutcome.DELIVERED, now, http_status=http_status
        )

    @observed
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

    @observed
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

    @observed
    async def release(self, claim: Claim, *, now: datetime) -> bool:
        return await self._run(self._store.finish, claim, None, now)

    @observed
    async def stats(self) -> JournalStats:
        return await self._run(self._store.stats)

    @observed
    async def purge(self, *, resolved_before: datetime, limit: int = DEFAULT_PURGE_LIMIT) -> int:
        return await self._run(self._store.purge, resolved_before, limit)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        disposed = loop.run_in_executor(self._worker, self._engine.dispose)
        try:
            await within(self._clock, disposed, self._deadline().total_seconds())
        except DeadlineExceededError:  # the worker is stuck on a call: cut it loose, do not wait
            self._connections.cut()
            self._worker.shutdown(wait=False, cancel_futures=True)
            return
        self._worker.shutdown(wait=True)


if TYPE_CHECKING:
    _conforms: type[Journal] = SqlJournal  # mypy checks the class against the port
