"""Lead inbox ownership (M4 §7.5).

``LeadInboxRegistry`` decides which inbox keys are owned. It is driven by the same expected-lead
supplier as the caller resolver, and ownership is never a side effect of authorising a caller:

* at startup, after a successful discovery and after a config change adds a lead, ``start`` /
  ``sync`` own every expected lead's key;
* before any publication, ``ensure_owned`` owns the recipient's key (an expected lead's, or a
  lead another fleetd instance serves on the shared broker — ``remote_leads``, whose key is
  global and whose queue its own instance declared alike; publication to an unknown key is
  refused, never claimed);
* a lead that goes missing keeps its key, so nothing addressed to it is lost while it is away;
* ``retire`` releases a key only after the caller confirms the retirement and that its incidents
  are reassigned or resolved, only when the lead is no longer expected, and only when the queue
  is empty (the adapters themselves never release a non-empty key);
* ``replace`` owns the replacement key before it moves anything, then moves entries oldest first
  by collect + publish, keeping their message ids. Legacy entries become typed records on the
  way. If a publish fails, the records already collected stay in this registry and are moved
  first by the next ``replace`` call (they are lost only if the process ends in between).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from fleetd.clock import Clock, SystemClock
from fleetd.errors import InboxOwnershipError
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import SCHEMA_VERSION, InboxRecord

__all__ = ["LeadInboxRegistry"]

ExpectedLeads = Callable[[], Iterable[str]]


class LeadInboxRegistry:
    """Owns, keeps, moves and releases lead inbox keys."""

    def __init__(
        self,
        inbox: ReplyInbox,
        expected_leads: ExpectedLeads,
        *,
        clock: Clock | None = None,
        move_batch: int = 100,
        remote_leads: ExpectedLeads = tuple,
    ) -> None:
        self._inbox = inbox
        self._expected = expected_leads
        self._remote = remote_leads
        self._clock = clock or SystemClock()
        self._move_batch = move_batch
        self._owned: set[str] = set()
        self._in_transit: dict[str, list[InboxRecord]] = {}

    @property
    def owned(self) -> frozenset[str]:
        """The keys this registry has owned and not released."""
        return frozenset(self._owned)

    async def start(self, leads: Iterable[str] | None = None) -> frozenset[str]:
        """Own the configured leads' keys (the supplier's leads when ``leads`` is None)."""
        return await self.sync(leads)

    async def sync(self, leads: Iterable[str] | None = None) -> frozenset[str]:
        """Own every expected lead not owned yet; return the newly owned keys.

        A lead missing from ``leads`` keeps its key: sync never releases.
        """
        wanted = sorted(set(self._expected() if leads is None else leads))
        added = [lead for lead in wanted if lead not in self._owned]
        for lead in added:
            await self._own(lead)
        return frozenset(added)

    async def ensure_owned(self, key: str) -> None:
        """Own ``key`` before a publication; only an expected lead, a lead of another instance or
        an already owned key qualifies."""
        if key in self._owned:
            return
        if key not in set(self._expected()) and key not in set(self._remote()):
            raise InboxOwnershipError(f"inbox key {key!r} is not an expected lead")
        await self._own(key)

    async def publish(self, record: InboxRecord) -> bool:
        """Publish ``record`` to its recipient lead, owning that lead's key first."""
        await self.ensure_owned(record.recipient_lead)
        return await self._inbox.publish(record)

    async def retire(self, key: str, *, incidents_settled: bool) -> bool:
        """Release ``key`` after a confirmed retirement; True when it was released.

        Refused while the caller has not settled the lead's incidents, while the lead is still
        expected, or while anything waits in its queue.
        """
        if not incidents_settled or key in set(self._expected()) or self._in_transit.get(key):
            return False
        released = await self._inbox.release(key)
        if released:
            self._owned.discard(key)
        return released

    async def replace(self, old: str, new: str) -> int:
        """Move ``old``'s entries to ``new`` (owned first); return how many were stored anew."""
        await self._own(new)
        await self.ensure_owned(old)
        moved = 0
        while True:
            batch = self._in_transit.pop(old, None) or await self._inbox.collect(
                old, limit=self._move_batch
            )
            if not batch:
                return moved
            for index, record in enumerate(batch):
                try:
                    stored = await self._inbox.publish(self._readdressed(record, new))
                except BaseException:  # collected already: keep the rest, whatever stopped us
                    self._in_transit[old] = batch[index:]
                    raise
                moved += int(stored)

    async def _own(self, key: str) -> None:
        await self._inbox.own(key)
        self._owned.add(key)

    def _readdressed(self, record: InboxRecord, key: str) -> InboxRecord:
        created = record.created_at_epoch_millis
        if created is None:
            created = int(self._clock.now().timestamp() * 1000)
        return dataclasses.replace(
            record,
            recipient_lead=key,
            schema_version=SCHEMA_VERSION,
            created_at_epoch_millis=created,
        )
