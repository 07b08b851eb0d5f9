"""A count of the changes to what the bridge holds, for readers that keep a view of it.

The fleet view is built once per change, not once per request
(:mod:`fleetd.runtime.fleet_versions`): it compares :attr:`Revision.value` with the value its
last build saw. Every mutation of the bridge that ``fleet_list`` shows touches the revision at its
chokepoint — a ticket accepted, delivered or ended (:class:`~fleetd.bridge.tasks.TaskBook`), a
session added, moved along its table or retired (:class:`~fleetd.bridge.roster.Roster` and
:meth:`~fleetd.bridge.sessions.Session.apply`), a teardown failure noted. A touch is one integer
increment; nothing is notified here.
"""

from __future__ import annotations

__all__ = ["Revision"]


class Revision:
    """A counter that only grows: equal values mean nothing was touched in between."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def touch(self) -> None:
        self.value += 1
