"""The ``Journal`` port: what the runtime asks of the incident journal.

The port is async because its callers (the effect dispatcher, the notification loop, startup) run
on the event loop. SQLModel and Alembic are synchronous, so :class:`~fleetd.journal.sql.SqlJournal`
runs each call on one worker thread of its own: the loop never blocks on a disk or a network, and
one journal's calls reach the database one at a time, in the order they were made. The in-memory
fake (:class:`~fleetd.journal.memory.InMemoryJournal`) implements the same contract and runs the
same contract tests.

Outbox: :meth:`Journal.record` commits an incident change and the events it causes in one
transaction; nothing is sent from there. A delivery loop claims due attempts with a lease
(:meth:`Journal.claim_due`), sends, and records the outcome only while it still holds the lease
(:meth:`complete`, :meth:`reschedule`, :meth:`fail`, :meth:`release` return ``False`` when it
does not, and write nothing). Delivery is at least once; receivers dedupe on the idempotency key.

Every method may raise :class:`~fleetd.errors.JournalError`; callers keep detecting and report
notification coverage as degraded (see :class:`~fleetd.journal.watch.JournalWatch`, given to
:meth:`Journal.observe`). Times
are timezone-aware; ``now`` is always passed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from fleetd.journal.values import (
    MAX_INSTANCES,
    Claim,
    IncidentChange,
    InstanceRecord,
    JournalSnapshot,
    JournalStats,
    NewEvent,
    RecordedEvent,
    StoredIncident,
)

if TYPE_CHECKING:
    from fleetd.observe import Around

__all__ = ["DEFAULT_CLAIM_LIMIT", "DEFAULT_PURGE_LIMIT", "DEFAULT_RECENT_LIMIT", "Journal"]

DEFAULT_CLAIM_LIMIT = 16
"""Most attempts one :meth:`Journal.claim_due` call leases."""
DEFAULT_RECENT_LIMIT = 200
"""Most incidents one :meth:`Journal.recent` call returns."""
DEFAULT_PURGE_LIMIT = 500
"""Most incidents one :meth:`Journal.purge` call deletes (one bounded transaction)."""


class Journal(Protocol):
    """Durable incidents, outbound events and delivery attempts."""

    async def record(
        self, change: IncidentChange, events: Sequence[NewEvent] = (), *, now: datetime
    ) -> tuple[RecordedEvent, ...]:
        """Insert or update the incident and append ``events`` (revisions assigned in order, each
        with one attempt due at its ``due_at``, default ``now``), all in one transaction.

        Refused (nothing written): a second open incident for the same key or the same key and
        generation twice, a payload out of bounds, a naive time.
        """
        ...

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
        """Carry out the human-leg policy's plan for a stored incident without changing the
        incident, in one transaction, only while its latest revision is still ``after_revision``
        (0: no event yet): cancel the listed revisions still pending or failed, give the listed
        failed ones a new attempt due at ``now``, and append ``events``. Otherwise nothing is
        written and ``None`` comes back: of two writers that read the same state (two fleetd
        instances adding a reminder), one wins. Payloads are refused as in :meth:`record`."""
        ...

    async def get(self, incident_id: str) -> StoredIncident | None:
        """One incident with its routing, resolution and events, or ``None``."""
        ...

    async def load_open(
        self, *, told_since: datetime | None = None, instance: str | None = None
    ) -> JournalSnapshot:
        """What a restart needs: open incidents, resolved ones whose human leg is unsettled (an
        event pending or failed; with ``told_since``, also one delivered since then with no
        ``resolved`` event), the latest generation of their keys, and a floor above every other
        stored generation. Its cost follows the open set, not the history kept. With
        ``instance``, only the incidents that instance opened (and those recorded without an
        instance, before several shared a journal)."""
        ...

    async def renew_instance(self, record: InstanceRecord) -> InstanceRecord | None:
        """Insert or replace the row of ``record.instance`` (its renewal every snapshot
        interval); returns the row as it was before, without its summary (``None``: there was
        none), read in the same transaction. Refused as :meth:`record` refuses: text out of
        bounds, a naive time, a summary larger than
        :data:`~fleetd.journal.values.MAX_SUMMARY_BYTES`."""
        ...

    async def instances(
        self, *, limit: int = MAX_INSTANCES, summaries: bool = True
    ) -> tuple[InstanceRecord, ...]:
        """The instance rows, latest renewal first, at most ``limit``; without ``summaries``
        each row's ``summary`` is ``None`` and the published summaries are not read (the
        renewals alone are cheap to read)."""
        ...

    async def instance_summaries(self, names: Collection[str]) -> Mapping[str, str]:
        """The summaries the instances ``names`` last published, as stored: each a JSON text
        (an instance without a row or a summary is absent). Read as text, they are neither
        decoded nor encoded again to be sent on."""
        ...

    async def recent(
        self,
        *,
        resolved_since: datetime,
        limit: int = DEFAULT_RECENT_LIMIT,
        involving: str | None = None,
    ) -> tuple[StoredIncident, ...]:
        """Open incidents (latest opened first), then those resolved at or after
        ``resolved_since`` (latest resolution first), at most ``limit`` in all. With
        ``involving``, only incidents that lead may see
        (:func:`fleetd.health.audience.lead_may_see`: owned, received, about it, fleet-wide)."""
        ...

    async def claim_due(
        self, owner: str, *, now: datetime, lease: timedelta, limit: int = DEFAULT_CLAIM_LIMIT
    ) -> tuple[Claim, ...]:
        """Lease up to ``limit`` outstanding attempts due at ``now`` whose lease is free or
        expired, earliest first. No attempt is leased to two holders at once.

        A lease runs for ``lease`` of the journal's own time: on PostgreSQL, which several
        instances share, the database's clock, so no host whose clock runs ahead takes a lease
        another still holds; on SQLite and the fake, one host's, the caller's ``now``. A claim's
        ``lease_expires_at`` is ``now + lease``, the holder's deadline by its own clock."""
        ...

    async def complete(self, claim: Claim, *, now: datetime, http_status: int | None) -> bool:
        """The event was delivered. Also recorded when the attempt was cancelled while this
        lease held it in flight: the request went out, so the person was told."""
        ...

    async def reschedule(
        self,
        claim: Claim,
        *,
        now: datetime,
        due_at: datetime,
        failure: str,
        http_status: int | None = None,
    ) -> bool:
        """A retryable failure (``failure`` is a short class code such as ``timeout``): the next
        attempt, numbered one higher, is due at ``due_at``."""
        ...

    async def fail(
        self,
        claim: Claim,
        *,
        now: datetime,
        failure: str,
        http_status: int | None = None,
        sink: str | None = None,
    ) -> bool:
        """A permanent failure: the event stays failed until :meth:`settle` re-arms it. ``sink``
        names the target that refused it (:attr:`~fleetd.notify.sink.SinkTarget.generation`, a
        plain code that reveals neither URL nor secret)."""
        ...

    async def release(self, claim: Claim, *, now: datetime) -> bool:
        """Give the attempt back unsent; it is due again at once."""
        ...

    async def stats(self) -> JournalStats:
        """Outstanding attempts and the time of the last delivery."""
        ...

    async def purge(self, *, resolved_before: datetime, limit: int = DEFAULT_PURGE_LIMIT) -> int:
        """Delete up to ``limit`` incidents resolved before ``resolved_before`` (oldest first),
        with their events and attempts, in one transaction; returns how many. An incident with
        an event still pending stays until its delivery ends. :meth:`load_open`'s
        ``generation_floor`` keeps covering the generations deleted.

        The same call bounds what an incident that stays open accumulates: up to ``limit``
        delivered ``reminder`` events that a later delivered ``reminder`` of the same incident
        supersedes are deleted with their attempts (a sink that forgets alerts gets one every
        minute; the last delivery is what the policy reads)."""
        ...

    async def close(self) -> None:
        """Release connections and the worker; the journal is not used afterwards."""
        ...

    def observe(self, around: Around) -> None:
        """Run every later port call (all of the above but :meth:`close`) through ``around``,
        named by the method: the adapter's one chokepoint (:func:`fleetd.observe.observed`)."""
        ...
