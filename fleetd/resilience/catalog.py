"""A provider's model catalog, read from its OpenAI-compatible ``GET {base}/models`` document.

The adapter fetches and JSON-decodes the body (bounded in size); :func:`parse_catalog` turns the
decoded document into a :class:`Catalog` of model ids and their stated context windows, or
``None`` when the document is not a catalog at all (which the probe treats as a failed fetch).

The shape read is ``{"data": [{"id": "...", ...}, ...]}``; a bare list of entries is accepted too.
Entries that are not objects or have no string ``id`` are skipped; the first entry of an id wins.

A stated context window is the first usable one of ``context_length`` (OpenRouter),
``max_context_length``, ``context_window`` and ``top_provider.context_length`` (Model health).
Usable means a positive JSON integer no larger than :data:`MAX_CONTEXT_WINDOW`; anything else is
as if absent, and the next field is read. When nothing is stated, the configured value stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "CONTEXT_FIELDS",
    "MAX_CONTEXT_WINDOW",
    "Catalog",
    "CatalogEntry",
    "context_window_for",
    "parse_catalog",
    "stated_context_window",
]

CONTEXT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("context_length",),
    ("max_context_length",),
    ("context_window",),
    ("top_provider", "context_length"),
)
"""Where an entry may state its context window, in the order they are read."""

MAX_CONTEXT_WINDOW = 100_000_000
"""A stated window beyond this is not credible and is read as absent."""


def stated_context_window(entry: Mapping[str, object]) -> int | None:
    """The context window a catalog entry states, or ``None``."""
    for path in CONTEXT_FIELDS:
        value: object = entry
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and 0 < value <= MAX_CONTEXT_WINDOW
        ):
            return value
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    id: str
    context_window: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    """The models one provider lists, by id."""

    entries: Mapping[str, CatalogEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))

    def lists(self, model: str) -> bool:
        return model in self.entries

    def context_window(self, model: str) -> int | None:
        entry = self.entries.get(model)
        return None if entry is None else entry.context_window


def parse_catalog(document: object) -> Catalog | None:
    """The catalog in a decoded ``/models`` document; ``None`` if it is not one."""
    items = document.get("data") if isinstance(document, Mapping) else document
    if not isinstance(items, list):
        return None
    entries: dict[str, CatalogEntry] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        model = item.get("id")
        if isinstance(model, str) and model and model not in entries:
            entries[model] = CatalogEntry(id=model, context_window=stated_context_window(item))
    return Catalog(entries=entries)


def context_window_for(model: str, catalog: Catalog | None, configured: int | None) -> int | None:
    """The window to use: the catalog's stated value, else (fail-open) the configured one."""
    stated = None if catalog is None else catalog.context_window(model)
    return configured if stated is None else stated
