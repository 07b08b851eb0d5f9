"""Incidents carried across a restart: adopted from the journal, claimed or closed (M4 §10.3).

After a restart the runtime hands ``decide`` the incidents the journal kept open
(:func:`resume`). Each is *adopted*: it stays open, with its id, generation and routing, and the
first tick whose evidence would open the same key claims it instead of opening a duplicate
(:meth:`~fleetd.health.tick.Tick.open_incident`). A key whose subject does not reproduce it
within two successful snapshots (the same patience every two-snapshot rule has) is closed —
``subject_retired`` for a member of the previous run (its session ended with that run; nothing of
it is replayed), ``cleared`` for anything else. A tick without a usable fleet list counts nothing.

Only incidents that a subject's own evidence opens and closes (members, leads, the control link)
are adopted. Inbox and profile incidents need no adoption: their steps compare what they observe
with the open incidents of their scope directly, so a kept one is held or closed like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from fleetd.health.evidence import HealthState
from fleetd.health.floors import TWO_SNAPSHOTS
from fleetd.health.incidents import Incident, IncidentKey, ResolveReason
from fleetd.health.states import Scope
from fleetd.health.tick import Tick

__all__ = ["LateAdoption", "adopt_late", "resume", "settle_adopted"]

_EVIDENCE_DRIVEN = frozenset({Scope.MEMBER, Scope.LEAD, Scope.CONTROL_LINK})


def resume(
    incidents: Iterable[Incident],
    generations: Mapping[IncidentKey, int],
    namespace: str = "",
    *,
    floor: int = 0,
) -> HealthState:
    """The state a restarted monitor starts from: the journal's open incidents, adopted; new
    incidents get ids in ``namespace`` and generations above ``floor`` (the journal's
    ``generation_floor``: every generation it still stores)."""
    opened = {incident.key: incident for incident in incidents}
    known = dict(generations)
    for key, incident in opened.items():
        known[key] = max(known.get(key, 0), incident.generation)
    return HealthState(
        incidents=opened,
        generations=known,
        generation_floor=floor,
        adopted={key: TWO_SNAPSHOTS for key in opened if key.scope in _EVIDENCE_DRIVEN},
        namespace=namespace,
    )


@dataclass(frozen=True, slots=True)
class LateAdoption:
    """What :func:`adopt_late` made of a journal read only after the monitor had started."""

    state: HealthState
    superseded: tuple[Incident, ...]  # the journal's, for a key this run opened again: closed
    renumbered: tuple[Incident, ...]  # this run's, with a generation above the journal's


def adopt_late(
    state: HealthState,
    incidents: Iterable[Incident],
    generations: Mapping[IncidentKey, int],
    *,
    floor: int = 0,
) -> LateAdoption:
    """The journal could not be read at start and now can: its open incidents join the running
    state as :func:`resume` would have adopted them, and its generations and floor are known from
    now on. For a key this run has opened again meanwhile (an incident the journal could not take
    yet) the journal's older incident is superseded — a person told of it is told it closed — and
    this run's takes a generation above every one the journal holds, so it can be recorded."""
    opened = dict(state.incidents)
    adopted = dict(state.adopted)
    known = dict(state.generations)
    for key, generation in generations.items():
        known[key] = max(known.get(key, 0), generation)
    superseded: list[Incident] = []
    renumbered: list[Incident] = []
    for incident in incidents:
        key = incident.key
        known[key] = max(known.get(key, 0), incident.generation)
        mine = opened.get(key)
        if mine is None:
            opened[key] = incident
            if key.scope in _EVIDENCE_DRIVEN:
                adopted[key] = TWO_SNAPSHOTS
            continue
        if mine.id == incident.id:
            continue  # the same incident: nothing to merge
        superseded.append(incident)
        if mine.generation <= known[key]:
            mine = replace(mine, generation=known[key] + 1)
            opened[key] = mine
            renumbered.append(mine)
        known[key] = max(known[key], mine.generation)
    merged = replace(
        state,
        incidents=opened,
        generations=known,
        generation_floor=max(state.generation_floor, floor),
        adopted=adopted,
        index=None,
    )
    return LateAdoption(state=merged, superseded=tuple(superseded), renumbered=tuple(renumbered))


def settle_adopted(tick: Tick, *, sighted: bool) -> dict[IncidentKey, int]:
    """Count one successful snapshot against every adopted key not claimed this tick; close those
    whose patience ran out. Returns what stays adopted."""
    if not sighted:
        return tick.adopted
    kept: dict[IncidentKey, int] = {}
    for key in sorted(tick.adopted):
        left = tick.adopted[key] - 1
        if left > 0:
            kept[key] = left
            continue
        closed = tick.book.close(key)  # only a claim takes an adopted key out of the book
        assert closed is not None
        retired = key.scope is Scope.MEMBER
        tick.emit_resolved(
            closed, ResolveReason.SUBJECT_RETIRED if retired else ResolveReason.CLEARED
        )
    return kept
