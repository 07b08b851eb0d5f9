"""Is the journal working? :class:`JournalHealth`, kept by :class:`ObservedJournal`.

M4 §10.3: a journal failure never stops detection, but notification coverage becomes degraded.
:class:`ObservedJournal` wraps any :class:`~fleetd.journal.port.Journal`: a call that raises
:class:`~fleetd.errors.JournalError` marks the journal degraded, with the failed operation and its
bounded reason (``"record: disk_full"``), and re-raises for the caller to carry on; the next call
that succeeds marks it ok again. Surfaces (``fleet_list.healthCoverage``, ``/healthz``, metrics)
read :attr:`ObservedJournal.health`. Nothing here retries: the next tick or delivery pass is the
retry.

It is also where a journal outage is reported: one WARNING when the first call fails, one INFO
when a call succeeds again, whatever the number of calls in between (the delivery pass alone makes
several a second), and the series ``fleetd_journal_up`` (0 during an outage) and
``fleetd_journal_operation_seconds`` (by port method, every label present from the start).
Callers log a journal failure at DEBUG at most.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from fleetd.clock import Clock
from fleetd.errors import JournalError
from fleetd.journal.port import (
    DEFAULT_CLAIM_LIMIT,
    DEFAULT_PURGE_LIMIT,
    DEFAULT_RECENT_LIMIT,
    Journal,
)
from fleetd.journal.records import (
    Claim,
    IncidentChange,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
)
from fleetd.metrics import Metrics

__all__ = ["OPERATIONS", "JournalHealth", "JournalStatus", "ObservedJournal"]

T = TypeVar("T")

_log = logging.getLogger("fleetd.journal")

OPERATIONS = (
    "record",
    "settle",
    "get",
    "recent",
    "load_open",
    "claim_due",
    "complete",
    "reschedule",
    "fail",
    "release",
    "stats",
    "purge",
)
"""The port's operations, the ``operation`` label of ``fleetd_journal_operation_seconds``."""


class JournalStatus(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalHealth:
    """``ok``, or ``degraded`` since ``since`` for ``reason`` after ``failures`` failed calls in a
    row. ``reason`` is ``"<operation>: <reason>"`` in bounded words, safe for any surface."""

    status: JournalStatus = JournalStatus.OK
    reason: str | None = None
    since: datetime | None = None
    failures: int = 0

    @property
    def ok(self) -> bool:
        return self.status is JournalStatus.OK


class ObservedJournal:
    """A :class:`~fleetd.journal.port.Journal` that keeps its own :class:`JournalHealth`."""

    def __init__(self, inner: Journal, *, clock: Clock, metrics: Metrics | None = None) -> None:
        self.inner = inner
        self._clock = clock
        self._metrics = metrics
        self._health = JournalHealth()
        if metrics is not None:
            metrics.journal_up.set(1)
            for operation in OPERATIONS:
                metrics.journal_operation_seconds.labels(operation=operation)

    @property
    def health(self) -> JournalHealth:
        return self._health

    async def _observe(self, call: Awaitable[T]) -> T:
        operation = getattr(call, "__name__", "")  # the port method's coroutine
        started = self._clock.monotonic()
        try:
            result = await call
        except JournalError as exc:
            self._took(operation, started)
            previous = self._health
            reason = f"{exc.operation}: {exc.reason}"
            if previous.ok:
                _log.warning(
                    "incident journal failing (%s): detection goes on, notification coverage "
                    "is degraded until it answers",
                    reason,
                )
                self._up(0)
            self._health = JournalHealth(
                status=JournalStatus.DEGRADED,
                reason=reason,
                since=previous.since if not previous.ok else self._clock.now(),
                failures=previous.failures + 1,
            )
            raise
        self._took(operation, started)
        failed = self._health
        if not failed.ok:
            self._health = JournalHealth()
            self._up(1)
            down = (self._clock.now() - failed.since).total_seconds() if failed.since else 0.0
            _log.info(
                "incident journal answers again after %d failed calls in %.0f s (last: %s)",
                failed.failures,
                down,
                failed.reason,
            )
        return result

    def _took(self, operation: str, started: float) -> None:
        if self._metrics is not None and operation in OPERATIONS:
            elapsed = max(0.0, self._clock.monotonic() - started)
            self._metrics.journal_operation_seconds.labels(operation=operation).observe(elapsed)

    def _up(self, value: int) -> None:
        if self._metrics is not None:
            self._metrics.journal_up.set(value)

    async def record(
        self, change: IncidentChange, events: Sequence[NewEvent] = (), *, now: datetime
    ) -> tuple[RecordedEvent, ...]:
        return await self._observe(self.inner.record(change, events, now=now))

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
        return await self._observe(
            self.inner.settle(
                incident_id,
                now=now,
                after_revision=after_revision,
                events=events,
                cancel=cancel,
                rearm=rearm,
            )
        )

    async def get(self, incident_id: str) -> StoredIncident | None:
        return await self._observe(self.inner.get(incident_id))

    async def recent(
        self,
        *,
        resolved_since: datetime,
        limit: int = DEFAULT_RECENT_LIMIT,
        involving: str | None = None,
    ) -> tuple[StoredIncident, ...]:
        return await self._observe(
            self.inner.recent(resolved_since=resolved_since, limit=limit, involving=involving)
        )

    async def load_open(self, *, told_since: datetime | None = None) -> JournalSnapshot:
        return await self._observe(self.inner.load_open(told_since=told_since))

    async def claim_due(
        self, owner: str, *, now: datetime, lease: timedelta, limit: int = DEFAULT_CLAIM_LIMIT
    ) -> tuple[Claim, ...]:
        return await self._observe(self.inner.claim_due(owner, now=now, lease=lease, limit=limit))

    async def complete(self, claim: Claim, *, now: datetime, http_status: int | None) -> bool:
        return await self._observe(self.inner.complete(claim, now=now, http_status=http_status))

    async def reschedule(
        self,
        claim: Claim,
        *,
        now: datetime,
        due_at: datetime,
        failure: str,
        http_status: int | None = None,
    ) -> bool:
        return await self._observe(
            self.inner.reschedule(
                claim, now=now, due_at=due_at, failure=failure, http_status=http_status
            )
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
        return await self._observe(
            self.inner.fail(claim, now=now, failure=failure, http_status=http_status, sink=sink)
        )

    async def release(self, claim: Claim, *, now: datetime) -> bool:
        return await self._observe(self.inner.release(claim, now=now))

    async def stats(self) -> JournalStats:
        return await self._observe(self.inner.stats())

    async def purge(self, *, resolved_before: datetime, limit: int = DEFAULT_PURGE_LIMIT) -> int:
        return await self._observe(self.inner.purge(resolved_before=resolved_before, limit=limit))

    async def close(self) -> None:
        await self.inner.close()


if TYPE_CHECKING:
    _conforms: type[Journal] = ObservedJournal  # mypy checks the class against the port
