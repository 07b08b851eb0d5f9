"""``IncidentDesk``: what an operator (or a lead) may ask of the incident journal over the API.

* :meth:`IncidentDesk.incidents` — open incidents and those resolved in the last
  :data:`RESOLVED_WINDOW`, with routing and the delivery state of every outbound event. The
  operator sees all of them; a lead sees those it owns or receives (``routing.owner`` or
  ``routing.recipient``); nobody else asks (the API refuses members).
* :meth:`IncidentDesk.replay` — a person asks for a permanently failed event to be tried again
  (§10.4 "until config changes or a person requests replay"). Which events come back is the
  human-leg policy's decision (:mod:`fleetd.notify.core.policy`: a resolved incident's ``open``
  never
  does, its ``resolved`` does), carried out by the ``replay`` callable the composition root hands
  in; the delivery worker's next pass sends them. Refusals come back as values (``found``,
  ``rearmed``), never as exceptions; a journal failure does raise
  :class:`~fleetd.errors.JournalError` for the API to answer 503.

Read-only apart from the re-arm; no clock of its own (``now`` is passed in).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

from fleetd.identity import Caller, Role
from fleetd.journal.port import DEFAULT_RECENT_LIMIT, Journal
from fleetd.journal.values import StoredIncident

__all__ = ["RESOLVED_WINDOW", "IncidentDesk", "IncidentListing", "Replay", "ReplayResult"]

RESOLVED_WINDOW: Final = timedelta(hours=24)
"""How long a resolved incident stays on the list."""


class Replay(Protocol):
    """Carries out an operator's replay of one incident: how many events were re-armed, or
    ``None`` when the journal does not know it."""

    async def __call__(self, incident_id: str, *, now: datetime) -> int | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentListing:
    """The incidents a caller may see, newest first; ``truncated`` when more exist than
    ``limit``."""

    incidents: tuple[StoredIncident, ...]
    resolved_since: datetime
    limit: int
    truncated: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """``found``: the incident exists; ``rearmed``: how many failed events got a new attempt;
    ``enabled``: how many webhook receivers a 410 had disabled are enabled again."""

    incident_id: str
    found: bool
    rearmed: int = 0
    enabled: int = 0


class IncidentDesk:
    """The journal's operator view."""

    def __init__(
        self,
        journal: Journal,
        *,
        replay: Replay,
        window: timedelta = RESOLVED_WINDOW,
        limit: int = DEFAULT_RECENT_LIMIT,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._journal = journal
        self._replay = replay
        self._window = window
        self._limit = limit

    async def incidents(self, caller: Caller, *, now: datetime) -> IncidentListing:
        """What ``caller`` may see (an operator: all; a lead: what ``fleet_list`` shows it,
        :func:`fleetd.health.audience.lead_may_see`)."""
        if caller.role not in (Role.OPERATOR, Role.LEAD):
            raise ValueError("only an operator or a lead lists incidents")
        since = now - self._window
        found = await self._journal.recent(
            resolved_since=since,
            limit=self._limit + 1,
            involving=caller.name if caller.role is Role.LEAD else None,
        )
        return IncidentListing(
            incidents=found[: self._limit],
            resolved_since=since,
            limit=self._limit,
            truncated=len(found) > self._limit,
        )

    async def replay(self, incident_id: str, *, now: datetime) -> ReplayResult:
        """Re-arm the incident's permanently failed events the policy still wants sent."""
        rearmed = await self._replay(incident_id, now=now)
        if rearmed is None:
            return ReplayResult(incident_id=incident_id, found=False)
        return ReplayResult(incident_id=incident_id, found=True, rearmed=rearmed)
