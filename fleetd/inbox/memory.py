"""``InMemoryInbox``: the default, embedded ``ReplyInbox`` (M4 §7.1).

It stores typed records directly, so there is nothing to decode and no AMQP migration logic here:
``failures()`` is always empty. Everything lives in this process and is lost when it ends, which
is why a key holding entries is never released — release would clear local data nobody collected.
It runs the same contract suite as :class:`~fleetd.inbox.amqp.AmqpInbox`.

Because it lives in this process, each key holds at most ``key_max`` entries (:data:`KEY_MAX` by
default), so a lead that never polls cannot grow the service without limit. At the bound the
oldest health report of that key gives way to a new entry (the incident it reported still stands
in ``fleet_list``; counted in :attr:`InMemoryInbox.gave_way` and warned once until the key is
below the bound again); a key holding nothing but replies refuses one more entry with
:class:`~fleetd.errors.InboxFullError` (unavailable, for that key only), so a member's
``fleet_reply`` is refused as retryable and nothing it sent is dropped. Health meanwhile
reports the inbox as stranded.
"""

from __future__ import annotations

import logging
from collections import Counter, deque

from fleetd.errors import InboxFullError, InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.records import (
    InboxRecord,
    InboxStats,
    MessageKind,
    WaitingReply,
    check_key,
)
from fleetd.inbox.seen import SeenIds

__all__ = ["KEY_MAX", "InMemoryInbox"]

_log = logging.getLogger("fleetd.inbox")

#: At most this many entries wait in one lead's key.
KEY_MAX = 10_000


class InMemoryInbox:
    """Per-key FIFO lists of records, with first-id-wins dedup and explicit ownership."""

    def __init__(self, *, seen_capacity: int = 65_536, key_max: int = KEY_MAX) -> None:
        if key_max < 1:
            raise ValueError("key_max must be at least 1")
        self._entries: dict[str, deque[InboxRecord]] = {}
        self._seen = SeenIds(seen_capacity)
        self._key_max = key_max
        self._full: set[str] = set()  # keys warned about since they were last below the bound
        self._closed = False
        self.gave_way = 0

    async def own(self, key: str) -> None:
        self._check_open()
        self._entries.setdefault(check_key(key), deque())

    async def release(self, key: str) -> bool:
        self._check_open()
        if self._entries.get(key):
            return False
        self._entries.pop(key, None)
        self._seen.forget_key(key)
        return True

    async def publish(self, record: InboxRecord) -> bool:
        entries = self._owned(record.recipient_lead)
        if record.schema_version is None:
            raise ValueError("only typed records are published; legacy v0 is read-only")
        pair = (record.recipient_lead, record.msg_id)
        if pair in self._seen:
            return False
        if len(entries) >= self._key_max:
            self._make_room(record.recipient_lead, entries)
        self._seen.add(pair)
        entries.append(record)
        return True

    def _make_room(self, key: str, entries: deque[InboxRecord]) -> None:
        """At the bound: the oldest health report gives way, or (replies only) nothing is taken."""
        victim = next((r for r in entries if r.kind is MessageKind.HEALTH), None)
        warn = key not in self._full
        self._full.add(key)
        if victim is None:
            if warn:
                _log.warning("inbox of %s is full (%d replies): refusing more", key, len(entries))
            raise InboxFullError(f"the inbox of {key} is full ({len(entries)} entries)")
        entries.remove(victim)
        self.gave_way += 1
        if warn:
            _log.warning(
                "inbox of %s is full (%d entries): the oldest health reports give way",
                key,
                len(entries) + 1,
            )

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        entries = self._owned(key)
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        count = len(entries) if limit is None else min(limit, len(entries))
        taken = [entries.popleft() for _ in range(count)]
        if len(entries) < self._key_max:
            self._full.discard(key)
        return taken

    async def stats(self, key: str) -> InboxStats:
        entries = self._owned(key)
        known = [r.created_at_epoch_millis for r in entries]
        created = [millis for millis in known if millis is not None]
        kinds = Counter(record.kind for record in entries)
        return InboxStats(
            depth=len(entries),
            oldest_created_epoch_millis=min(created) if created else None,
            by_kind={kind: kinds[kind] for kind in MessageKind},
            replies=tuple(
                WaitingReply(target=r.target, created_epoch_millis=r.created_at_epoch_millis)
                for r in entries
                if r.kind is MessageKind.REPLY
            ),
        )

    def failures(self) -> list[DecodeFailure]:
        return []

    def reachable(self) -> bool:
        return not self._closed

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")

    def _owned(self, key: str) -> deque[InboxRecord]:
        self._check_open()
        entries = self._entries.get(key)
        if entries is None:
            raise InboxOwnershipError(f"inbox key {key!r} is not owned")
        return entries
