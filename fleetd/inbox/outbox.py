"""The one way records reach a lead's inbox and come back out of it.

:class:`LeadOutbox` sits in front of the :class:`~fleetd.inbox.registry.LeadInboxRegistry` (which
owns a recipient's key before anything is published to it) and the
:class:`~fleetd.inbox.port.ReplyInbox` port. Replies, completion-fallback results and health
records go in through it; ``fleet_poll`` drains through it.

Holding. A completion-fallback result or a health record has no member to retry it, so when the
inbox is unreachable it waits here (:meth:`LeadOutbox.keep`) and every flush (each push pass, each
new record, each stored reply, a clean stop) tries again, oldest first, one flush at a time under
one lock. A member's own ``fleet_reply`` never waits here: :meth:`LeadOutbox.store` flushes what
waits first, then stores the reply or raises, so the reply is refused until it is stored.

The log says when records start to wait (once per outage, however many flushes fail meanwhile:
the push loop flushes every pass) and when the inbox took them all again; while they wait,
``/readyz`` and the health coverage say so.

What waits lives only in this process, so it is bounded: a record already held is not held twice,
and past :data:`HELD_MAX` the oldest health record (else the oldest record) gives way, counted in
:attr:`LeadOutbox.gave_way` and warned. A fallback result that gives way still stands on its
ticket for ``fleet_poll(ticket)``.

Draining. The collect is shielded: if the caller goes away mid-collect (a dropped HTTP or MCP
request), the collect still finishes and its records are carried to the next drain of that key
instead of being acknowledged for nobody. A caller that took a drain but could not build its answer
hands the records back (:meth:`LeadOutbox.hand_back`): they lead the next drain of that key, since
the inbox already acknowledged them. An inbox that cannot be reached is refused with
``inbox_unavailable`` (:class:`~fleetd.errors.InboxRetryError`): nothing was taken.
"""

from __future__ import annotations

import asyncio
import logging

from fleetd.errors import (
    FleetdError,
    InboxError,
    InboxFullError,
    InboxOwnershipError,
    InboxRetryError,
)
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.inbox.registry import LeadInboxRegistry

__all__ = ["HELD_MAX", "LeadOutbox"]

_log = logging.getLogger("fleetd.bridge")

#: At most this many records wait in memory for an unreachable inbox.
HELD_MAX = 10_000


class LeadOutbox:
    """Holds, flushes and drains the records addressed to leads."""

    def __init__(self, registry: LeadInboxRegistry, inbox: ReplyInbox) -> None:
        self._registry = registry
        self._inbox = inbox
        self._held: list[InboxRecord] = []
        self._held_ids: set[str] = set()
        self._unowned: set[str] = set()  # held ids whose key was refused (warned once each)
        self._lock = asyncio.Lock()
        self._carried: dict[str, list[InboxRecord]] = {}
        self._waiting = False  # a flush failed and nothing has flushed everything since
        self.gave_way = 0
        self.drains = 0  # drains that took something (what the inbox holds changed)

    @property
    def held(self) -> list[InboxRecord]:
        """The records waiting in memory for the inbox, oldest first."""
        return self._held

    async def keep(self, record: InboxRecord) -> None:
        """Hold ``record`` (once) and try to hand everything held to the inbox."""
        if record.msg_id in self._held_ids:
            return
        if len(self._held) >= HELD_MAX:
            victim = next((r for r in self._held if r.kind is MessageKind.HEALTH), self._held[0])
            self._forget(victim)
            self.gave_way += 1
            _log.warning(
                "inbox unreachable with %d records held: the oldest %s record for %s gave way",
                HELD_MAX,
                victim.kind.value,
                victim.recipient_lead,
            )
        self._held.append(record)
        self._held_ids.add(record.msg_id)
        await self.flush()

    async def flush(self) -> None:
        """Publish held records oldest first, one flush at a time; keep what still fails.

        A record whose key is not owned (its lead left the config and was retired) or is full
        (a lead that does not poll) is refused for that key alone: it stays held — in case the
        lead comes back, or polls — and so do the records behind it for that key (their order
        kept), while other keys' records go on. Any other failure is the inbox's: the flush stops
        and tries again later."""
        async with self._lock:
            refused: set[str] = set()  # keys that refused a record during this flush
            for record in list(self._held):
                if record.recipient_lead in refused:
                    continue
                try:
                    await self._registry.publish(record)
                except InboxFullError:
                    refused.add(record.recipient_lead)
                    continue
                except InboxOwnershipError:
                    refused.add(record.recipient_lead)
                    if record.msg_id not in self._unowned:
                        self._unowned.add(record.msg_id)
                        _log.warning(
                            "a %s record for %s waits: no inbox of that lead is owned",
                            record.kind.value,
                            record.recipient_lead,
                        )
                    continue
                except FleetdError as exc:
                    if not self._waiting:
                        self._waiting = True
                        _log.warning(
                            "records wait for the inbox (%d held, the first for %s): %s",
                            len(self._held),
                            record.recipient_lead,
                            type(exc).__name__,
                        )
                    return
                self._forget(record)
            if self._waiting:
                self._waiting = False
                _log.warning("the inbox took every held record again")

    async def store(self, record: InboxRecord) -> bool:
        """Store ``record`` now, after what is held, or raise; False when its id was taken."""
        await self.flush()
        return await self._registry.publish(record)

    async def drain(self, key: str) -> list[InboxRecord]:
        """Collect ``key``'s inbox; a cancelled drain's records go to the next one."""
        try:
            await self._registry.ensure_owned(key)  # a key the start could not own yet
            task = asyncio.ensure_future(self._inbox.collect(key))
            try:
                records = await asyncio.shield(task)
            except asyncio.CancelledError:
                task.add_done_callback(lambda done: self._carry_over(key, done))
                raise
        except InboxError as exc:
            _log.warning("inbox of %s cannot be drained now: %s", key, type(exc).__name__)
            raise InboxRetryError(
                "the inbox cannot be reached right now; nothing was taken from it",
                action="retry fleet_poll later; every reply stays in your inbox",
            ) from exc
        taken = self._carried.pop(key, []) + records
        if taken:
            self.drains += 1
        return taken

    def hand_back(self, key: str, records: list[InboxRecord]) -> None:
        """Give a drain's records back: they lead ``key``'s next drain, in their order."""
        if records:
            self._carried[key] = [*records, *self._carried.get(key, [])]

    def _carry_over(self, key: str, done: asyncio.Future[list[InboxRecord]]) -> None:
        if not done.cancelled() and done.exception() is None:
            self._carried.setdefault(key, []).extend(done.result())

    def _forget(self, record: InboxRecord) -> None:
        if record.msg_id not in self._held_ids:
            return  # gave way to the bound while a flush was publishing it
        self._held.remove(record)
        self._held_ids.discard(record.msg_id)
        self._unowned.discard(record.msg_id)
