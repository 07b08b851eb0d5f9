"""Rows of ``fleet_list`` kept encoded between versions, with their ages left open.

A busy fleet moves the view's version many times a second, and each change touches a member or
two of a thousand. Encoding every row again for each version is most of what a version costs, so
each row is kept as the JSON text it encodes to, with the stamp of everything it was built from:
the next version encodes again only the rows whose stamp moved. Every age in a view is as of its
``generatedAt``, so a kept row leaves its ages open (:class:`OpenRow`) and each version fills them
in from ``now``. The text is exactly what ``json.dumps(..., ensure_ascii=False,
separators=(",", ":"))`` gives for the row, so a body assembled from kept rows is byte for byte
the body of the rows built afresh.

Nothing here reads the bridge or herdr: the caller hands in each row's stamp and, when the stamp
moved, the row.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

__all__ = ["OpenRow", "RowCache", "Slot", "encode", "marker", "micros", "open_row"]

#: Markers stand in for ages while a row is encoded; the nonce keeps any text a row carries (a
#: name, a branch) from ever reading as one.
_NONCE = secrets.token_hex(8)
_MARKER = re.compile('"\\\\u0000' + _NONCE + '\\.(\\d+)\\\\u0000"')


def marker(name: str) -> str:
    """A string no row carries, to stand in for ``name`` while a document is encoded."""
    return f"\x00{_NONCE}.{name}\x00"


def encode(value: Any) -> str:
    """The wire encoding of ``fleet_list``: compact separators, text left unescaped."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: An age in a row: the dict holding it, its key, and the time it counts from.
Slot = tuple[dict[str, Any], str, datetime]


@dataclass(frozen=True, slots=True)
class OpenRow:
    """A row's JSON text with its ages open: ``parts[0]``, the age since ``sinces[0]``,
    ``parts[1]``, ... — each age as ``round((now - since).total_seconds(), 3)`` encodes. The
    times are kept as whole microseconds (:func:`micros`): their difference divided by a million
    is exactly what ``total_seconds`` computes."""

    parts: tuple[str, ...]
    sinces: tuple[int, ...]

    def render(self, now: int) -> str:
        """The row's text with every age as of ``now`` (whole microseconds, :func:`micros`)."""
        parts = self.parts
        text, age = parts[0], ""
        last: int | None = None
        for since, part in zip(self.sinces, parts[1:], strict=True):
            if since != last:  # an idle member's two ages count from the same time
                last, age = since, repr(round((now - since) / 1_000_000, 3))
            text += age + part
        return text

    @staticmethod
    def render_all(rows: Iterable[OpenRow], now: int) -> list[str]:
        """Each row's text as :meth:`render` gives it, for one ``now``. Members stepped by the same
        health tick share its time, and an idle member's two ages count from one time, so each
        age is written once per distinct time and looked up for the rest (about three times
        faster over a thousand rows than rendering each row on its own)."""
        ages: dict[int, str] = {}
        age_of = ages.get
        texts: list[str] = []
        add = texts.append
        for row in rows:
            parts, sinces = row.parts, row.sinces
            if not sinces:
                add(parts[0])
                continue
            text = parts[0]
            for since, part in zip(sinces, parts[1:], strict=True):
                age = age_of(since)
                if age is None:
                    age = ages[since] = repr(round((now - since) / 1_000_000, 3))
                text += age + part
            add(text)
        return texts

    @classmethod
    def closed(cls, text: str) -> OpenRow:
        """A row with no age (its text as is)."""
        return cls(parts=(text,), sinces=())


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """``moment`` as whole microseconds since the epoch (exact, unlike a float timestamp)."""
    return (moment - (_EPOCH if moment.tzinfo is not None else _NAIVE_EPOCH)) // _MICROSECOND


def open_row(row: dict[str, Any], slots: Iterable[Slot]) -> OpenRow:
    """Encode ``row`` (changed in place: it is the caller's fresh row) with the ages of
    ``slots`` left open."""
    sinces: dict[int, int] = {}
    for n, (holder, key, since) in enumerate(slots):
        holder[key] = marker(str(n))
        sinces[n] = micros(since)
    pieces = _MARKER.split(encode(row))
    return OpenRow(parts=tuple(pieces[0::2]), sinces=tuple(sinces[int(n)] for n in pieces[1::2]))


_Item = TypeVar("_Item")


class RowCache:
    """Rows kept by key with the stamp they were built from; a row is built again only when its
    stamp moved. Each :meth:`pass_over` keeps only the rows it was asked for, so what is kept is
    bounded by the last pass (the roster's sessions, herdr's last list)."""

    __slots__ = ("_kept", "built")

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[Hashable, OpenRow]] = {}
        self.built = 0  # rows encoded since start (what a test counts)

    def __len__(self) -> int:
        return len(self._kept)

    def pass_over(
        self, wanted: Iterable[tuple[Hashable, Hashable, _Item]], build: Callable[[_Item], OpenRow]
    ) -> list[OpenRow]:
        """The rows of ``wanted`` — ``(key, stamp, item)`` — in order: kept when the stamp is
        the one kept, else built from the item. Rows of keys not asked for are dropped."""
        kept: Mapping[Hashable, tuple[Hashable, OpenRow]] = self._kept
        fresh: dict[Hashable, tuple[Hashable, OpenRow]] = {}
        rows = []
        for key, stamp, item in wanted:
            entry = kept.get(key)
            if entry is None or entry[0] != stamp:
                entry = (stamp, build(item))
                self.built += 1
            fresh[key] = entry
            rows.append(entry[1])
        self._kept = fresh
        return rows

    def refresh(
        self, wanted: Iterable[tuple[Hashable, Hashable, _Item]], build: Callable[[_Item], OpenRow]
    ) -> list[OpenRow]:
        """:meth:`pass_over` for some of the rows only: the rows of every other key are kept."""
        kept = self._kept
        rows = []
        for key, stamp, item in wanted:
            entry = kept.get(key)
            if entry is None or entry[0] != stamp:
                entry = kept[key] = (stamp, build(item))
                self.built += 1
            rows.append(entry[1])
        return rows

    def stale(self, wanted: Iterable[tuple[Hashable, Hashable, object]]) -> list[Hashable]:
        """The keys of ``wanted`` whose kept row is missing or was built from another stamp."""
        kept = self._kept
        return [key for key, stamp, _ in wanted if (e := kept.get(key)) is None or e[0] != stamp]
