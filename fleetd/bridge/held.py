"""Records waiting in memory for a lead's inbox that could not take them yet.

A completion-fallback result or a health record has no member to retry it, so when the inbox is
unreachable it waits here and every flush (each push pass, each new record, a clean stop) tries
again, oldest first, one flush at a time. A member's own ``fleet_reply`` never waits here: it is
refused until it is stored (:mod:`fleetd.bridge.replies`).

What waits lives only in this process, so it is bounded: a record already held is not held twice,
and past :data:`HELD_MAX` the oldest health record (else the oldest record) gives way, counted in
:attr:`HeldRecords.gave_way` and warned. A fallback result that gives way still stands on its
ticket for ``fleet_poll(ticket)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fleetd.errors import FleetdError
from fleetd.inbox.records import InboxRecord, MessageKind

__all__ = ["HELD_MAX", "HeldRecords"]

_log = logging.getLogger("fleetd.bridge")

#: At most this many records wait in memory for an unreachable inbox.
HELD_MAX = 10_000

Publish = Callable[[InboxRecord], Awaitable[bool]]


class HeldRecords:
    """The bounded queue of records the inbox has not taken yet."""

    def __init__(self, publish: Publish) -> None:
        self._publish = publish
        self.records: list[InboxRecord] = []
        self.gave_way = 0
        self._ids: set[str] = set()
        self._lock = asyncio.Lock()

    async def keep(self, record: InboxRecord) -> None:
        """Hold ``record`` (once) and try to hand everything held to the inbox."""
        if record.msg_id in self._ids:
            return
        if len(self.records) >= HELD_MAX:
            victim = next(
                (r for r in self.records if r.kind is MessageKind.HEALTH), self.records[0]
            )
            self._forget(victim)
            self.gave_way += 1
            _log.warning(
                "inbox unreachable with %d records held: the oldest %s record for %s gave way",
                HELD_MAX,
                victim.kind.value,
                victim.recipient_lead,
            )
        self.records.append(record)
        self._ids.add(record.msg_id)
        await self.flush()

    async def flush(self) -> None:
        """Publish held records oldest first, one flush at a time; keep what still fails."""
        async with self._lock:
            while self.records:
                record = self.records[0]
                try:
                    await self._publish(record)
                except FleetdError as exc:
                    _log.warning(
                        "record for %s waits for the inbox (%d held): %s",
                        record.recipient_lead,
                        len(self.records),
                        type(exc).__name__,
                    )
                    return
                self._forget(record)

    def _forget(self, record: InboxRecord) -> None:
        self.records.remove(record)
        self._ids.discard(record.msg_id)
