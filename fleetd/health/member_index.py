"""Which members a tick must classify again: an index carried from one ``decide`` to the next.

The member pass asks :func:`~fleetd.health.members.step_member` about every member, and on a
steady fleet nearly every answer is "the prior evidence, unchanged" — but asking still reads each
member's view, agent and evidence, and at ten thousand members those reads are most of a tick.
:class:`MemberIndex` lets a tick ask only the members whose answer could differ.

A member's prior evidence is reused by ``step_member`` only when all of these hold, so a member
for which none of them can have changed since the previous tick needs no question:

* its view is the very object of the previous tick (the runtime hands back an unchanged view as
  the same object; a new object is asked about even when equal);
* the live agent it matches is the same object: herdr's list is compared position by position
  with the previous one, and the terminals of every agent that moved (old and new) name the
  members to ask; a member without a terminal id matches by name and is always asked;
* its lead's inbox shows the same push-cap flag (any flag that flipped sends the tick down the
  full pass);
* no probe answer or per-target error names it, it has no mute events, and the time its evidence
  may next change (``recheck_at``) has not come: recheck times wait in a heap, evidence without
  one is asked every tick.

Asking a member more often than needed is harmless — ``step_member`` itself decides whether the
prior stands — so the index may over-select (stale heap entries) but never under-select.

Ownership. The index holds mutable sets and a heap that one tick updates in place and hands to
the next :class:`~fleetd.health.evidence.HealthState`. A state's index serves one ``decide``
only: the first use marks it spent, and ``decide`` called again with the same prior state takes
the full pass, which gives the same decision (``tests/unit/health/test_health_member_index.py``
runs both on generated fleets). Anything that does not line up — a member added or gone, a view
that changed its session, terminal or name, a list of another length, a blind or unsteady tick,
evidence that is not the mapping the index was built over — also takes the full pass, and the
index is built afresh from its result.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import compress
from operator import is_not
from typing import Protocol

from fleetd.health.settings import NEVER
from fleetd.health.snapshot import FleetSnapshot, LiveAgent, MemberView

__all__ = ["MemberIndex"]


class MemberEvidence(Protocol):
    """What the index reads of a member's evidence (:class:`fleetd.health.evidence.MemberEvidence`,
    which holds the index in its state and so is not imported here)."""

    @property
    def recheck_at(self) -> datetime | None: ...

    @property
    def candidate(self) -> object | None: ...


#: Heap entries allowed beyond one per member before the heap is rebuilt from the evidence.
_HEAP_SLACK = 64


@dataclass(slots=True, eq=False, kw_only=True)
class MemberIndex:
    """Positions of the members in the snapshot this index was built from, and which of them a
    steady tick must ask again (see the module docstring)."""

    members: Mapping[str, MemberEvidence]  # the evidence it describes (checked by identity)
    views: tuple[MemberView, ...]  # that tick's member views
    agents: tuple[LiveAgent, ...]  # that tick's live agents, in herdr's order
    caps: dict[str, bool]  # inbox key -> push cap reached, that tick
    position: dict[str, int]  # session id -> position in ``views``
    by_terminal: dict[str, int]  # terminal id -> position
    by_name: dict[str, list[int]]  # member name -> positions
    nameless: list[int]  # members without a terminal id (they match their agent by name)
    always: set[int]  # evidence without a recheck time: asked every tick
    muted: set[int]  # views with mute events
    offering: set[int]  # evidence that offers a pane candidate to the budget
    due: list[tuple[datetime, int]]  # heap of (recheck time, position)
    spent: bool = False

    @classmethod
    def build(
        cls, snapshot: FleetSnapshot, members: Mapping[str, MemberEvidence]
    ) -> MemberIndex | None:
        """The index of a tick that asked every member, or ``None`` when two members claim one
        terminal (the next tick then asks every member again)."""
        views = snapshot.members
        by_terminal: dict[str, int] = {}
        by_name: dict[str, list[int]] = {}
        nameless: list[int] = []
        for position, view in enumerate(views):
            terminal = view.terminal_id
            if terminal is None:
                nameless.append(position)
            elif terminal in by_terminal:
                return None
            else:
                by_terminal[terminal] = position
            by_name.setdefault(view.name, []).append(position)
        index = cls(
            members=members,
            views=views,
            agents=snapshot.live.agents,
            caps=_caps(snapshot),
            position={view.session_id: position for position, view in enumerate(views)},
            by_terminal=by_terminal,
            by_name=by_name,
            nameless=nameless,
            always=set(),
            muted={position for position, view in enumerate(views) if view.mute_events},
            offering=set(),
            due=[],
        )
        index._note(range(len(views)))
        return index

    def resume(self, snapshot: FleetSnapshot, members: Mapping[str, MemberEvidence]) -> bool:
        """Take this index for the tick of ``snapshot`` whose prior evidence is ``members``;
        False when the tick must ask every member. Either way the index is spent."""
        if self.spent:
            return False
        self.spent = True
        views, agents = snapshot.members, snapshot.live.agents
        return (
            members is self.members
            and len(views) == len(self.views)
            and len(agents) == len(self.agents)
            and _caps(snapshot) == self.caps
        )

    def to_ask(
        self, snapshot: FleetSnapshot, now: datetime, touched: Iterable[str]
    ) -> set[int] | None:
        """The positions this tick must ask, or ``None`` when a changed view no longer lines up
        with the member at its position (the tick then asks every member)."""
        views, before = snapshot.members, self.views
        changed = list(compress(range(len(views)), map(is_not, views, before)))
        for position in changed:
            new, old = views[position], before[position]
            if (new.session_id, new.terminal_id, new.name) != (
                old.session_id,
                old.terminal_id,
                old.name,
            ):
                return None
            if new.mute_events:
                self.muted.add(position)
            else:
                self.muted.discard(position)
        ask = set(changed)
        ask.update(self.always, self.muted, self.nameless)
        agents, listed = snapshot.live.agents, self.agents
        by_terminal = self.by_terminal
        for position in compress(range(len(agents)), map(is_not, agents, listed)):
            for agent in (listed[position], agents[position]):
                member = by_terminal.get(agent.terminal_id)
                if member is not None:
                    ask.add(member)
        for name in touched:
            ask.update(self.by_name.get(name, ()))
        due = self.due
        while due and due[0][0] <= now:
            ask.add(heapq.heappop(due)[1])
        return ask

    def handed_on(
        self,
        snapshot: FleetSnapshot,
        members: Mapping[str, MemberEvidence],
        asked: Iterable[int],
        granted: Iterable[str],
    ) -> MemberIndex:
        """The index of this tick, for the next: the structures move on, updated for the
        members this tick asked and those the budget granted a read."""
        position = self.position
        nexts = MemberIndex(
            members=members,
            views=snapshot.members,
            agents=snapshot.live.agents,
            caps=self.caps,
            position=position,
            by_terminal=self.by_terminal,
            by_name=self.by_name,
            nameless=self.nameless,
            always=self.always,
            muted=self.muted,
            offering=self.offering,
            due=self.due,
        )
        nexts._note([*asked, *(position[sid] for sid in granted)])
        if len(nexts.due) > len(nexts.views) + _HEAP_SLACK:
            nexts.due = []
            nexts._note(range(len(nexts.views)))
        return nexts

    def _note(self, positions: Iterable[int]) -> None:
        """Record the current evidence of ``positions``: asked every tick, due at a time (the
        heap), offering a candidate."""
        views, members, due = self.views, self.members, self.due
        for position in positions:
            evidence = members[views[position].session_id]
            recheck = evidence.recheck_at
            if recheck is None:
                self.always.add(position)
            else:
                self.always.discard(position)
                if recheck != NEVER:
                    heapq.heappush(due, (recheck, position))
            if evidence.candidate is not None:
                self.offering.add(position)
            else:
                self.offering.discard(position)


def _caps(snapshot: FleetSnapshot) -> dict[str, bool]:
    return {inbox.key: inbox.push_cap_reached for inbox in snapshot.inboxes}
