"""The ``ReplyInbox`` port: per-lead typed inboxes with explicit ownership (M4 §7.1, §7.5).

An inbox key is a recipient lead; its entries are :class:`InboxRecord` values. Both adapters
(:class:`~fleetd.inbox.memory.InMemoryInbox`, :class:`~fleetd.inbox.amqp.AmqpInbox`) honour the
same contract, checked by one contract suite:

* **Ownership is explicit.** ``own`` creates the key; ``publish`` and ``collect`` on a key that is
  not owned raise :class:`~fleetd.errors.InboxOwnershipError`. Publication never claims a key.
* **Release keeps data.** ``release`` removes a key only when nothing waits in it and returns
  whether the key is gone; a non-empty key stays owned.
* **First id wins.** Publishing a ``msg_id`` already accepted into the same key returns ``False``
  and stores nothing (per key, within the adapter's bounded memory of ids).
* **FIFO, acknowledged on collection.** ``collect`` returns decoded entries oldest first and
  removes exactly what it returns. ``limit=None`` drains what is there.
* **Fields are preserved.** A collected record equals the published one.
* **Bad data never escapes.** Entries that cannot be decoded never come back from ``collect``;
  they are reported through ``failures()`` (and the adapter's hook) instead.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.records import InboxRecord, InboxStats

__all__ = ["ReplyInbox"]


@runtime_checkable
class ReplyInbox(Protocol):
    """Per-lead typed inboxes."""

    async def own(self, key: str) -> None:
        """Create ``key`` if needed and mark it owned. Idempotent."""
        ...

    async def release(self, key: str) -> bool:
        """Remove ``key`` if nothing waits in it; True when the key is gone afterwards."""
        ...

    async def publish(self, record: InboxRecord) -> bool:
        """Store ``record`` under ``record.recipient_lead``; False for a duplicate ``msg_id``."""
        ...

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        """Remove and return up to ``limit`` decoded entries of ``key``, oldest first."""
        ...

    async def stats(self, key: str) -> InboxStats:
        """Depth, oldest creation time and counts by kind of ``key``."""
        ...

    def failures(self) -> list[DecodeFailure]:
        """Redacted summaries of entries that could not be decoded, oldest first."""
        ...

    def reachable(self) -> bool:
        """False while the store is known to be unreachable (its last attempt failed to)."""
        ...

    async def close(self) -> None:
        """Release connections; the inbox refuses further calls."""
        ...
