"""``InMemoryInbox``: the default, embedded ``ReplyInbox`` (M4 §7.1).

It stores typed records directly, so there is nothing to decode and no AMQP migration logic here:
``failures()`` is always empty. Everything lives in this process and is lost when it ends, which
is why a key holding entries is never released — release would clear local data nobody collected.
It runs the same contract suite as :class:`~fleetd.inbox.amqp.AmqpInbox`.
"""

from __future__ import annotations

from collections import Counter, deque

from fleetd.errors import InboxOwnershipError, InboxUnavailableError
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.records import (
    InboxRecord,
    InboxStats,
    MessageKind,
    WaitingReply,
    check_key,
)
from fleetd.inbox.seen import SeenIds

__all__ = ["InMemoryInbox"]


class InMemoryInbox:
    """Per-key FIFO lists of records, with first-id-wins dedup and explicit ownership."""

    def __init__(self, *, seen_capacity: int = 65_536) -> None:
        self._entries: dict[str, deque[InboxRecord]] = {}
        self._seen = SeenIds(seen_capacity)
        self._closed = False

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
        self._seen.add(pair)
        entries.append(record)
        return True

    async def collect(self, key: str, limit: int | None = None) -> list[InboxRecord]:
        entries = self._owned(key)
        if limit is not None and limit < 0:
            raise ValueError("limit must not be negative")
        count = len(entries) if limit is None else min(limit, len(entries))
        return [entries.popleft() for _ in range(count)]

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
