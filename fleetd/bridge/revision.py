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
  (a session, an open turn, its repair ledger) gives it a new :attr:`Revised.revision` from one
  process-wide sequence, so an equal stamp means the same object with no assignment since. The
  health tick rebuilds a member's view only when a stamp it reads moved
  (:class:`~fleetd.bridge.view.MemberViews`). It is per assignment, not per chokepoint, so a
  write nobody remembered to report cannot leave a stale view; values held *inside* a ``Revised``
  object must be immutable, or ``Revised`` themselves, for that to hold.
"""

from __future__ import annotations

from itertools import count
from typing import Any

__all__ = ["Revised", "Revision"]


class Revision:
    """A counter that only grows: equal values mean nothing was touched in between."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def touch(self) -> None:
        self.value += 1


#: One sequence for every ``Revised`` object: a stamp is never reused, by this object or another.
_STAMPS = count(1)


class Revised:
    """A mutable record whose every attribute assignment renews :attr:`revision`."""

    __slots__ = ("revision",)

    revision: int

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        object.__setattr__(self, "revision", next(_STAMPS))
