"""Counts of the changes to what the bridge holds, for readers that keep a view of it.

Two granularities:

* :class:`Revision` — one counter for the whole bridge. The fleet view is built once per change,
  not once per request (:mod:`fleetd.runtime.fleet_versions`): it compares :attr:`Revision.value`
  with the value its last build saw. Every mutation of the bridge that ``fleet_list`` shows touches
  the revision at its chokepoint — a ticket accepted, delivered or ended
  (:class:`~fleetd.bridge.tasks.TaskBook`), a session added, moved along its table or retired
  (:class:`~fleetd.bridge.roster.Roster`), a teardown failure noted — and every member marked
  in the roster's :class:`Changes` below (an open turn seen working, the poller's last status of
  a member: what a member's row shows moved). A touch is one integer increment; nothing is
  notified here.
* :class:`Changes` — which sessions moved. The roster marks a session whenever it puts a new
  value of it in place (a session is frozen: :meth:`~fleetd.bridge.roster.Roster.apply` and
  :meth:`~fleetd.bridge.roster.Roster.update` are the only writers), and whenever its open turn
  or send queue moves; the task book marks it when one of its tickets moves. The health tick
  rebuilds the views of those sessions only, without reading the others, and a view's stamp
  holds the session object itself: the same object means no change. The fleet view's rows and
  the terminal edges read the same marks, each through a reader of its own.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Changes", "Revision"]


class Revision:
    """A counter that only grows: equal values mean nothing was touched in between."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def touch(self) -> None:
        self.value += 1


class Changes:
    """The session ids whose member view or row may have moved since this reader last took them.

    Marks come from the roster (every new value of a session it puts in place, and the poller's
    last status of a member when it moved), from the roster's open turns (every step but a bare
    status sighting) and send queues, and from the task book (a ticket of the session accepted,
    delivered or ended, and an ended one forgotten while its open turn still names it).
    :meth:`take` hands them over and starts again. Each reader (the health tick, the fleet view's
    member views, its encoded rows, the terminal edges) takes its own; when one is not taken (health
    off) its marks must not pile up: past ``limit()`` ids the set is dropped and :meth:`take`
    answers ``None`` — every member may have moved.
    """

    __slots__ = ("_ids", "_limit", "_on_mark", "_overflow", "_readers")

    def __init__(
        self, limit: Callable[[], int], *, on_mark: Callable[[], None] = lambda: None
    ) -> None:
        self._ids: set[str] = set()
        self._limit = limit
        self._on_mark = on_mark  # the roster's: every mark touches the bridge's revision
        self._overflow = False
        self._readers: tuple[Changes, ...] = ()

    def reader(self) -> Changes:
        """Another reader of the same marks (the fleet view's, beside the health tick's): marked
        whenever this one is, taken on its own, bounded alike. Readers are never dropped, so
        each is made once, by a part that lives as long as the roster."""
        other = Changes(self._limit)
        self._readers = (*self._readers, other)
        return other

    def mark(self, session_id: str) -> None:
        self._on_mark()
        for reader in self._readers:
            reader.mark(session_id)
        if self._overflow:
            return
        ids = self._ids
        ids.add(session_id)
        if len(ids) > self._limit():
            self._overflow = True
            ids.clear()

    def marked(self) -> frozenset[str] | None:
        """The ids marked so far, without taking them (``None`` when they were too many)."""
        return None if self._overflow else frozenset(self._ids)

    def take(self) -> set[str] | None:
        """The ids marked since the last take, or ``None`` when they were too many to keep."""
        if self._overflow:
            self._overflow = False
            return None
        taken, self._ids = self._ids, set()
        return taken
