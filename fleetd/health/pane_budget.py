"""The pane budget: which panes one tick may read, under brakes config cannot loosen (§6.1).

Pane reads are evidence of last resort. A pane is a *candidate* only for a stable lost boundary,
sustained BLOCKED or UNKNOWN, work older than the suspect threshold, or one final evidence read for
a confirmed fault — so a healthy fleet yields no candidates and no reads. Candidates then pass the
compiled brakes:

* a per-target cooldown of at least :data:`~fleetd.health.floors.PANE_COOLDOWN_FLOOR`
  (``max(config, 60 s)``), counted from the last *grant* and kept per target name by the budget
  itself — not in a subject's evidence — so a failing read is not retried faster and a subject
  that leaves and comes back cannot reset it;
* at most :data:`~fleetd.health.floors.MAX_PANE_READS_PER_TICK` reads per tick, one per target;
* fair rotation: eligible targets are served in name order starting just after the last target
  served (a round-robin cursor kept in the health state), so no pane can starve another.

A lost-boundary repair counts as a read: the repair reads the pane itself, so it spends a slot of
the same budget. Only a digest and a signature id ever come back into health; excerpts stay with
the runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum

from fleetd.health.fact import fact
from fleetd.health.floors import MAX_PANE_READS_PER_TICK
from fleetd.health.snapshot import ProbeSource
from fleetd.health.states import Scope

__all__ = ["ProbeCandidate", "ProbeReason", "allocate"]


class ProbeReason(StrEnum):
    """Why a pane is eligible for a read (§6.1); the order is the priority within one target."""

    LOST_BOUNDARY = "lost_boundary"
    FINAL_EVIDENCE = "final_evidence"
    SUSTAINED_BLOCKED = "sustained_blocked"
    SUSTAINED_UNKNOWN = "sustained_unknown"
    WORKING_SUSPECT = "working_suspect"


_PRIORITY = {reason: index for index, reason in enumerate(ProbeReason)}


@fact
class ProbeCandidate:
    """One pane that may be read this tick.

    ``source`` is ``None`` for a lost-boundary repair (the repair chooses its own read).
    ``scope`` and ``subject`` (member session id or lead name) say whose evidence records the
    grant.
    """

    target: str
    pane_id: str
    source: ProbeSource | None
    reason: ProbeReason
    scope: Scope
    subject: str
    token: str | None = None


def allocate(
    candidates: Iterable[ProbeCandidate],
    *,
    cursor: str,
    recent: Mapping[str, datetime],
    now: datetime,
    cooldown: timedelta,
) -> tuple[tuple[ProbeCandidate, ...], str, dict[str, datetime]]:
    """Grant at most two reads, one per target, round-robin after ``cursor``.

    ``recent`` maps a target to the time its last read was granted. Returns the granted
    candidates (in grant order), the new cursor, and the new ``recent`` map: entries whose
    cooldown has passed are dropped, so the map holds at most a few minutes of grants.
    ``cooldown`` must already carry its floor (see :class:`fleetd.health.settings.Effective`).
    """
    best: dict[str, ProbeCandidate] = {}
    for candidate in candidates:
        last = recent.get(candidate.target)
        if last is not None and now - last < cooldown:
            continue
        held = best.get(candidate.target)
        if held is None or _rank(candidate) < _rank(held):
            best[candidate.target] = candidate
    still_cooling = {t: at for t, at in recent.items() if now - at < cooldown}
    if not best:
        return (), cursor, still_cooling
    ordered = sorted(best)
    after = [target for target in ordered if target > cursor]
    before = [target for target in ordered if target <= cursor]
    chosen = (after + before)[:MAX_PANE_READS_PER_TICK]
    for target in chosen:
        still_cooling[target] = now
    return tuple(best[target] for target in chosen), chosen[-1], still_cooling


def _rank(candidate: ProbeCandidate) -> tuple[int, str, str]:
    return (_PRIORITY[candidate.reason], candidate.subject, candidate.pane_id)
