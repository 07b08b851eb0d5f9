"""Is the journal working? :class:`JournalHealth`, kept by :class:`ObservedJournal`.

M4 §10.3: a journal failure never stops detection, but notification coverage becomes degraded.
:class:`ObservedJournal` wraps any :class:`~fleetd.journal.port.Journal`: a call that raises
:class:`~fleetd.errors.JournalError` marks the journal degraded, with the failed operation and its
bounded reason (``"record: disk_full"``), and re-raises for the caller to log and carry on; the
next call that succeeds marks it ok again. Surfaces (``fleet_list.healthCoverage``, ``/healthz``,
metrics) read :attr:`ObservedJournal.health`. Nothing here retries: the next tick or delivery
pass is the retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from fleetd.clock import Clock
from fleetd.errors import JournalError
from fleetd.journal.port import DEFAULT_CLAIM_LIMIT, DEFAULT_RECENT_LIMIT, Journal
from fleetd.journal.records import (
    Claim,
    IncidentChange,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
)

__all__ = ["JournalHealth", "JournalStatus", "ObservedJournal"]

T = TypeVar("T")


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

    def __init__(self, inner: Journal, *, clock: Clock) -> None:
        self.inner = inner
        self._clock = clock
        self._health = JournalHealth()

    @property
    def health(self) -> JournalHealth:
        return self._health

    async def _observe(self, call: Awaitable[T]) -> T:
        try:
            result = await call
        except JournalError as exc:
            previous = self._health
            self._health = JournalHealth(
                status=JournalStatus.DEGRADED,
                reason=f"{exc.operation}: {exc.reason}",
                since=previous.since if not previous.ok else self._clock.now(),
                failures=previous.failures + 1,
            )
            raise
        if not self._health.ok:
            self._health = JournalHealth()
        return result

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

    async def load_open(self) -> JournalSnapshot:
        return await self._observe(self.inner.load_open())

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

    async def close(self) -> None:
        await self.inner.close()


if TYPE_CHECKING:
    _conforms: type[Journal] = ObservedJournal  # mypy checks the class against the port
