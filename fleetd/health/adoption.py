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

from fleetd.health.evidence import HealthState
from fleetd.health.floors import TWO_SNAPSHOTS
from fleetd.health.incidents import Incident, IncidentKey, ResolveReason
from fleetd.health.states import Scope
from fleetd.health.tick import Tick

__all__ = ["resume", "settle_adopted"]

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
