"""Counts of the changes to what the bridge holds, for readers that keep a view of it.

Two granularities:

* :class:`Revision` — one counter for the whole bridge. The fleet view is built once per change,
  not once per request (:mod:`fleetd.runtime.fleet_versions`): it compares
  :attr:`Revision.value` with the value its last build saw. Every mutation of the bridge that
  ``fleet_list`` shows touches the revision at its chokepoint — a ticket accepted, delivered or
  ended (:class:`~fleetd.bridge.tasks.TaskBook`), a session added, moved along its table or retired
  (:class:`~fleetd.bridge.roster.Roster` and :meth:`~fleetd.bridge.sessions.Session.apply`), a
  teardown failure noted. A touch is one integer increment; nothing is notified here.
* :class:`Revised` — a stamp per object. Every attribute assignment to a ``Revised`` object
  (a session) gives it a new :attr:`Revised.revision` from one process-wide sequence, so an
  equal stamp means the same object with no assignment since. The health tick rebuilds a
  member's view only when a stamp it reads moved (:class:`~fleetd.bridge.member_views.MemberViews`;
  an open turn is a frozen value that the turn machine replaces: a new value is its change). It
  is per assignment, not per chokepoint, so a write nobody remembered to report cannot leave a
  stale view; values held *inside* a ``Revised`` object must be immutable, or ``Revised``
  themselves, for that to hold.
* :class:`Changes` — which sessions moved. A ``Revised`` object watched for a session marks it on
  every assignment, beside the roster's open turns and queues and the task book, so the health
  tick rebuilds the views of those sessions only, without reading the others.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

__all__ = ["Changes", "Revised", "Revision"]


class Revision:
    """A counter that only grows: equal values mean nothing was touched in between."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def touch(self) -> None:
        self.value += 1


class Changes:
    """The session ids whose member view may have moved since the health tick last took them.

    Marks come from every :class:`Revised` object watched for a session (its session), from the
    roster's open turns (every step but a bare status sighting) and send queues, and from the
    task book (a
    ticket of the session accepted, ended or forgotten). :meth:`take` hands them over and starts
    again. Nothing else reads them, so when no tick takes them (health off) they must not pile up:
    past ``limit()`` ids the set is dropped and :meth:`take` answers ``None`` — every view may
    have moved.
    """

    __slots__ = ("_ids", "_limit", "_overflow")

    def __init__(self, limit: Callable[[], int]) -> None:
        self._ids: set[str] = set()
        self._limit = limit
        self._overflow = False

    def mark(self, session_id: str) -> None:
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


#: One sequence for every ``Revised`` object: a stamp is never reused, by this object or another.
_STAMPS = count(1)


class Revised:
    """A mutable record whose every attribute assignment renews :attr:`revision` and, once the
    record reports to a session (:meth:`report_to`), marks that session in its :class:`Changes`.
    A ``Revised`` value assigned to a watched record is watched for the same session."""

    __slots__ = ("_watcher", "revision")

    revision: int
    _watcher: tuple[Changes, str] | None

    def __new__(cls, *_args: Any, **_kwargs: Any) -> Any:
        record = super().__new__(cls)
        object.__setattr__(record, "_watcher", None)  # set before the first assignment reads it
        return record

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        object.__setattr__(self, "revision", next(_STAMPS))
        watcher = self._watcher
        if watcher is not None:
            watcher[0].mark(watcher[1])
            if isinstance(value, Revised):
                value.report_to(*watcher)

    def report_to(self, changes: Changes, session_id: str) -> None:
        """Mark ``session_id`` in ``changes`` on every later assignment, to this record and to
        the ``Revised`` records it holds."""
        object.__setattr__(self, "_watcher", (changes, session_id))
        for name in getattr(type(self), "__dataclass_fields__", ()):
            value = getattr(self, name)
            if isinstance(value, Revised):
                value.report_to(changes, session_id)
