"""Keeping the objects fleetd lives with out of the cyclic collector's way.

CPython's cyclic collector walks every tracked object of the oldest generation on each full
collection, and a full collection comes once the objects promoted since the last one reach a
quarter of that generation. ``fleetd serve`` starts with a few hundred thousand objects that live
as long as the process — modules, classes, the web app and its routes, the schemas, the
configuration — and at 5,000–10,000 members one health tick in about eleven paid 180–250 ms for
a full collection (``benchmarks/README.md``). :func:`freeze_startup_heap` runs once, when the
server is up:

* one collection clears what start-up left behind, then :func:`gc.freeze` moves every surviving
  object to the permanent generation, which no later collection walks (a frozen object is still
  freed when its last reference goes);
* the youngest generation is collected every :data:`YOUNG_THRESHOLD` allocations instead of 700.
  A tick builds tens of thousands of short-lived objects; collected every 700, many are caught
  alive mid-tick and promoted, and those promotions are what brings the next full collection.
  Collected less often, they are mostly freed by reference counting before any collection sees
  them. The older generations keep CPython's default ratios.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "freeze_startup_heap"]

YOUNG_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation (CPython's default is 700)."""


def freeze_startup_heap() -> int:
    """Collect once, freeze what survived and space out young collections; returns how many
    objects are now frozen."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
    return gc.get_freeze_count()
