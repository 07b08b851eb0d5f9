"""A bounded memory of message ids, for first-id-wins dedup.

Both adapters remember the ``(key, msg_id)`` pairs they accepted so that a second publication of
the same id into the same key is refused. The memory is bounded so a long-running daemon does not
grow without limit: once ``capacity`` pairs are held, the least recently used pair is forgotten,
and a duplicate of a forgotten id is no longer recognised. Dedup is per key, so moving a message to
another lead's key keeps its id.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["SeenIds"]


class SeenIds:
    """A least-recently-used set of ``(key, msg_id)`` pairs."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._pairs: OrderedDict[tuple[str, str], str] = OrderedDict()  # pair -> body digest

    def __contains__(self, pair: object) -> bool:
        return pair in self._pairs

    def __len__(self) -> int:
        return len(self._pairs)

    def digest(self, pair: tuple[str, str]) -> str | None:
        """The body digest ``pair`` was remembered with (``""``: none given; ``None``: not held)."""
        return self._pairs.get(pair)

    def add(self, pair: tuple[str, str], digest: str = "") -> None:
        """Remember ``pair`` (with its body's digest) as the most recent; forget the oldest beyond
        capacity."""
        self._pairs[pair] = digest
        self._pairs.move_to_end(pair)
        while len(self._pairs) > self._capacity:
            self._pairs.popitem(last=False)

    def discard(self, pair: tuple[str, str]) -> None:
        """Forget ``pair`` if it is remembered."""
        self._pairs.pop(pair, None)

    def forget_key(self, key: str) -> None:
        """Forget every pair of ``key``."""
        for pair in [pair for pair in self._pairs if pair[0] == key]:
            del self._pairs[pair]
