"""Keeping the objects fleetd builds at start-up out of the cyclic collector's way.

CPython's cyclic collector walks every tracked object of the oldest generation on each full
collection. ``fleetd serve`` starts with a few hundred thousand such objects that live as long as
the process — modules, classes, the web app and its routes, the schemas, the configuration — and
without help every full collection walks them again: at 5,000–10,000 members one health tick in
about eleven paid 180–250 ms for it. :func:`freeze_startup_heap` runs once, when the server is up:
one collection clears what start-up left behind, then :func:`gc.freeze` moves every surviving
object to the permanent generation, which no later collection walks. Objects made afterwards are
collected as before, and a frozen object is still freed when its last reference goes.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect once and freeze what survived; returns how many objects are now frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
