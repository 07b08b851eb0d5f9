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
    """What :func:`adopt_late` made of a journal read only after the monitor had started.

    ``shift`` maps a key to what this run's generations of it move up by: the journal's highest
    generation of the key, or its floor (every generation it still stores), whichever is higher,
    for every key this run has numbered. Apply :meth:`lifted` to an incident of this run that is
    not in ``state`` (one resolved and not yet recorded) before it is recorded: it knows which
    incidents this run numbered before the shift."""

    state: HealthState
    superseded: tuple[Incident, ...]  # the journal's, for a key this run opened again: closed
    renumbered: tuple[Incident, ...]  # this run's open ones, moved above the journal's
    shift: Mapping[IncidentKey, int]
    numbered: Mapping[IncidentKey, int]  # the highest generation this run gave each key before
    journal_ids: frozenset[str]

    def lifted(self, incident: Incident) -> Incident:
        """``incident`` with its generation moved above the journal's when this run numbered it
        before the journal was read (a generation at most what this run had given its key, and
        not one of the journal's own incidents); any other incident as it is."""
        by = self.shift.get(incident.key, 0)
        if not by or incident.id in self.journal_ids:
            return incident
        if incident.generation > self.numbered.get(incident.key, 0):
            return incident  # numbered after the shift: above the journal's already
        return replace(incident, generation=incident.generation + by)


def adopt_late(
    state: HealthState,
    incidents: Iterable[Incident],
    generations: Mapping[IncidentKey, int],
    *,
    floor: int = 0,
) -> LateAdoption:
    """The journal could not be read at start and now can: its open incidents join the running
    state as :func:`resume` would have adopted them, and its generations and floor are known from
    now on. This run numbered its incidents from nothing, so every generation it gave a key moves
    up by the journal's highest for that key (or its floor): the journal refuses a generation it
    holds already, resolved history included. For a key this run has opened again meanwhile the
    journal's older incident is superseded — a person told of it is told it closed."""
    journal = list(incidents)
    journal_ids = {incident.id for incident in journal}
    highest = dict(generations)
    for incident in journal:
        highest[incident.key] = max(highest.get(incident.key, 0), incident.generation)
    shift: dict[IncidentKey, int] = {}
    for key in {*state.generations, *(i.key for i in state.incidents.values())}:
        by = max(highest.get(key, 0), floor)
        if by:
            shift[key] = by
    numbered = dict(state.generations)
    for held in state.incidents.values():
        numbered[held.key] = max(numbered.get(held.key, 0), held.generation)
    opened: dict[IncidentKey, Incident] = {}
    renumbered: list[Incident] = []
    for key, held in state.incidents.items():
        lifted = held
        if held.id not in journal_ids and key in shift:
            lifted = replace(held, generation=held.generation + shift[key])
            renumbered.append(lifted)
        opened[key] = lifted
    known = {key: generation + shift.get(key, 0) for key, generation in state.generations.items()}
    for key, generation in highest.items():
        known[key] = max(known.get(key, 0), generation)
    adopted = dict(state.adopted)
    superseded: list[Incident] = []
    for incident in journal:
        key = incident.key
        mine = opened.get(key)
        if mine is None:
            opened[key] = incident
            if key.scope in _EVIDENCE_DRIVEN:
                adopted[key] = TWO_SNAPSHOTS
        elif mine.id != incident.id:
            superseded.append(incident)
        known[key] = max(known.get(key, 0), opened[key].generation)
    merged = replace(
        state,
        incidents=opened,
        generations=known,
        generation_floor=max(state.generation_floor, floor),
        adopted=adopted,
        index=None,
    )
    return LateAdoption(
        state=merged,
        superseded=tuple(superseded),
        renumbered=tuple(renumbered),
        shift=shift,
        numbered=numbered,
        journal_ids=frozenset(journal_ids),
    )


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
