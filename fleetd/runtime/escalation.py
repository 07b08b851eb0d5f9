"""``Escalation``: incidents into the journal, and the human leg's events (M4 §10.1–§10.3).

The dispatcher hands every incident change here after the lead side is done. Each change is
recorded in the journal (one transaction with its outbound events, the outbox of §10.3), so open
incidents, their routing and what a person was told survive a restart. Only an incident routed to
a person (``route: human`` — no known owner, the control link down, no healthy lead for it) earns
outbound events, and only while ``health.notifications.mode`` is ``webhook``:

* ``open`` when it is routed to a person (again after a lead held it meanwhile);
* ``severity_changed`` when its severity moves while a person holds it;
* ``resolved`` only if an earlier event of it reached the person; an incident that resolves
  before anything was delivered cancels its pending events and is resolved locally.

Turning the mode on resumes eligible open incidents (their ``open`` is recorded on the next
tick); turning it off records no events and keeps every incident. Reminders and delivery are the
sink worker's (:mod:`fleetd.notify.worker`). A journal that fails never stops detection: the
error is logged once per reason, the journal's own health says ``degraded``, and the next change
is tried again.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from fleetd.config import FleetdConfig, NotificationMode
from fleetd.errors import JournalError
from fleetd.health.incidents import Incident, ResolveReason, Route
from fleetd.journal.port import Journal
from fleetd.journal.records import (
    EventState,
    EventType,
    IncidentChange,
    NewEvent,
    StoredIncident,
)
from fleetd.notify.keys import EventType as PayloadEventType
from fleetd.notify.payload import CoverageStatus, encode_event, event_from_incident

__all__ = ["Escalation", "instance_name"]

_log = logging.getLogger("fleetd.health")

_DELIVERED = EventState.DELIVERED


def instance_name() -> str:
    """A stable name for this fleetd in outbound events: the host name, in the payload grammar."""
    name = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")[:40]
    return name if name and name[0].isalpha() else f"fleetd-{name}".rstrip("-")


@dataclass(slots=True, kw_only=True)
class Escalation:
    """Records incident changes and decides the human leg's events."""

    journal: Journal
    settings: Callable[[], FleetdConfig]
    instance: str = field(default_factory=instance_name)
    _told: set[str] = field(default_factory=set)  # open incidents with a human event recorded
    _severity: dict[str, str] = field(default_factory=dict)  # last severity a person was told
    _was_webhook: bool = False
    _failing: str | None = None

    @property
    def webhook(self) -> bool:
        return self.settings().health.notifications.mode is NotificationMode.WEBHOOK

    async def seed(self, incidents: Iterable[Incident]) -> None:
        """After a restart: which open incidents a person already has an event of."""
        for incident in incidents:
            stored = await self._get(incident.id)
            if stored is not None and stored.events:
                self._told.add(incident.id)
                self._severity[incident.id] = incident.severity.value

    async def changed(self, incident: Incident, *, now: datetime) -> None:
        """An incident opened or changed (routing included)."""
        events: list[NewEvent] = []
        if (
            self.webhook
            and incident.route is Route.HUMAN
            and incident.id in self._told
            and self._severity.get(incident.id) != incident.severity.value
        ):
            events.append(await self._event(incident, EventType.SEVERITY_CHANGED, now))
            self._severity[incident.id] = incident.severity.value
        await self._record(IncidentChange(incident=incident), events, now=now)

    async def to_person(self, incident: Incident, *, now: datetime) -> None:
        """The incident is routed to a person: record its ``open`` event (webhook mode only)."""
        if not self.webhook:
            return
        event = await self._event(incident, EventType.OPEN, now)
        if await self._record(IncidentChange(incident=incident), [event], now=now):
            self._told.add(incident.id)
            self._severity[incident.id] = incident.severity.value

    async def back_to_lead(self, incident: Incident, *, now: datetime) -> None:
        """A lead holds the incident again: a person's undelivered events are cancelled."""
        await self._record(IncidentChange(incident=incident, cancel_pending=True), [], now=now)

    async def resolved(
        self, incident: Incident, *, reason: ResolveReason, resolved_at: datetime, now: datetime
    ) -> None:
        """Resolved: ``resolved`` follows only an event the person received; otherwise the
        pending ones are cancelled and the resolution stays local."""
        self._told.discard(incident.id)
        self._severity.pop(incident.id, None)
        stored = await self._get(incident.id)
        delivered = stored is not None and any(e.state is _DELIVERED for e in stored.events)
        events: list[NewEvent] = []
        if delivered and self.webhook:
            events.append(
                await self._event(
                    incident,
                    EventType.RESOLVED,
                    now,
                    resolved_at=resolved_at,
                    resolve_reason=reason,
                )
            )
        change = IncidentChange(
            incident=incident,
            resolved_at=resolved_at,
            resolve_reason=reason,
            cancel_pending=True,  # nothing older may still go out after it is resolved
        )
        await self._record(change, events, now=now)

    async def resume(self, open_incidents: Iterable[Incident], *, now: datetime) -> None:
        """Once per tick: the mode turned on resumes every open incident a person holds."""
        webhook = self.webhook
        turned_on = webhook and not self._was_webhook
        self._was_webhook = webhook
        if not turned_on:
            return
        for incident in open_incidents:
            if incident.route is Route.HUMAN and incident.id not in self._told:
                await self.to_person(incident, now=now)

    # ------------------------------------------------------------------ internals
    async def _event(
        self,
        incident: Incident,
        kind: EventType,
        now: datetime,
        *,
        resolved_at: datetime | None = None,
        resolve_reason: ResolveReason | None = None,
    ) -> NewEvent:
        stored = await self._get(incident.id)
        revision = (len(stored.events) if stored is not None else 0) + 1
        payload = event_from_incident(
            incident,
            event_type=PayloadEventType(kind.value),
            revision=revision,
            occurred_at=now,
            instance=self.instance,
            coverage=CoverageStatus.FULL,
            routing_reason=incident.routing_reason,
            resolved_at=resolved_at,
            resolve_reason=resolve_reason,
        )
        body: dict[str, object] = json.loads(encode_event(payload))
        return NewEvent(type=kind, payload=body)

    async def _get(self, incident_id: str) -> StoredIncident | None:
        try:
            return await self.journal.get(incident_id)
        except JournalError as exc:
            self._failed(exc)
            return None

    async def _record(
        self, change: IncidentChange, events: list[NewEvent], *, now: datetime
    ) -> bool:
        try:
            await self.journal.record(change, events, now=now)
        except JournalError as exc:
            self._failed(exc)
            return False
        if self._failing is not None:
            _log.info("incident journal records again")
            self._failing = None
        return True

    def _failed(self, exc: JournalError) -> None:
        reason = str(exc)
        if reason != self._failing:
            _log.warning("incident journal: %s; detection goes on, coverage is degraded", reason)
        self._failing = reason
