"""``Escalation``: incidents into the journal, and the human leg carried out (M4 §10.1–§10.4).

Health decides where an incident goes; :mod:`fleetd.notify.core.policy` decides what a person is
told
about it. This shell only carries both out, in its own pass, so the health tick never waits on
the journal:

* :meth:`Escalation.note` (from the effect dispatcher, synchronous) keeps the incident's latest
  truth — opened, changed, routed, resolved — as *owed* until the journal has it;
* :meth:`Escalation.step` (the delivery loop, before the sink worker's pass) records every owed
  incident with the events its policy plan asks for (one transaction each), then reconciles what
  the journal already holds: incidents a delivery just touched at once, and every open or
  unsettled incident at least once per :data:`SWEEP` (reminders, notifications turned on, a new
  receiver list, a resolution whose ``resolved`` is still owed). On a journal several instances
  share, an incident another live instance opened is that instance's to reconcile (its
  reminders counted on its own clock, never on two); one whose instance is judged down or whose
  row is gone is swept here too, so its person still hears how it ends, and before the rows were
  first read no other instance's is;
* :meth:`Escalation.replay` is the operator's replay of one incident (§10.4).

A journal that fails stops a pass, never detection: the owed truths wait in memory (at most
:data:`MAX_OWED`; past that the oldest is dropped and logged, and health's next change of it is
owed again), one INFO says how much is owed and one that it records again, and until every
owed incident is recorded :attr:`Escalation.problem` keeps notification coverage ``degraded``
(the journal's own health logs the outage's one WARNING; this shell adds an INFO with the count).
"""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Final

from fleetd.config import FleetdConfig
from fleetd.errors import JournalError, JournalRefusedError
from fleetd.health.incidents import Incident, ResolveReason
from fleetd.health.states import Scope
from fleetd.journal.port import Journal
from fleetd.journal.values import IncidentChange, NewEvent, StoredIncident
from fleetd.model.events import EventType
from fleetd.notify.core.policy import EMPTY, HumanPlan, Leg, leg_of, plan
from fleetd.notify.payload import CoverageStatus, encode_event, event_from_incident

__all__ = ["MAX_OWED", "SWEEP", "TOLD_WINDOW", "Escalation", "instance_name"]

_log = logging.getLogger("fleetd.health")

SWEEP: Final = timedelta(seconds=30)
"""The journal's open and unsettled incidents are reconciled at least this often."""
MAX_OWED: Final = 10_000
"""Most incident truths kept while the journal does not take them."""
_FIRST_WINS: Final = frozenset({"open_key_conflict", "generation_conflict"})
"""Refusals that mean another fleetd recorded the same INSTANCE_DOWN first (issue 24)."""
TOLD_WINDOW: Final = timedelta(hours=24)
"""A sweep also looks at resolved incidents with a delivery this recent and no ``resolved``
event: an ``open`` that landed after its incident's resolution was recorded (a restart between
the two must not lose the ``resolved`` the person is owed)."""


def instance_name(config: FleetdConfig | None = None) -> str:
    """This fleetd's name in outbound events: ``instance`` from the config, else the host name
    in the payload grammar."""
    if config is not None and config.instance is not None:
        return config.instance
    name = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")[:40]
    return name if name and name[0].isalpha() else f"fleetd-{name}".rstrip("-")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Truth:
    """An incident as health last left it."""

    incident: Incident
    resolved_at: datetime | None = None
    reason: ResolveReason | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Setting:
    """What one pass plans with, read once: notifications on, the receiver list's generation,
    the reminder interval, the sink's re-post interval (alertmanager mode)."""

    notify: bool
    receivers: str | None
    repeat: timedelta
    refresh: timedelta | None = None


def _no_receivers() -> str | None:
    return None


def _every_owner(_owner: str | None) -> bool:
    return True


def _full() -> CoverageStatus:
    return CoverageStatus.FULL


@dataclass(slots=True, kw_only=True)
class Escalation:
    """Records incident changes and carries out the human-leg policy's plans."""

    journal: Journal
    settings: Callable[[], FleetdConfig]
    receivers: Callable[[], str | None] = _no_receivers  # the receiver list's generation
    coverage: Callable[[], CoverageStatus] = _full
    # whether this instance reconciles an incident the given instance opened (on a shared
    # journal, a live instance reconciles its own: InstanceWatch.sweeps)
    sweeps: Callable[[str | None], bool] = _every_owner
    _owed: dict[str, _Truth] = field(default_factory=dict)
    _touched: set[str] = field(default_factory=set)  # delivered to: reconcile at the next step
    _next_sweep: datetime | None = None
    _notify: bool = False
    _receivers: str | None = None
    _failing: str | None = None
    _lift: Callable[[Incident], Incident] | None = None  # a journal read late renumbered this run

    @property
    def notify(self) -> bool:
        """Whether a person can be told at all (``health.notifications.mode`` sends)."""
        return self.settings().health.notifications.mode.sends

    @property
    def instance(self) -> str:
        return instance_name(self.settings())

    @property
    def owed(self) -> int:
        """How many incident truths the journal has not taken yet."""
        return len(self._owed)

    @property
    def problem(self) -> str | None:
        """Why notification coverage is degraded here (bounded words), or ``None``."""
        if self._failing is None:
            return None
        return f"incident journal failing ({self._failing}); {len(self._owed)} incidents owed"

    # ------------------------------------------------------------------ from health
    def note(self, incident: Incident) -> None:
        """An incident opened or changed (routing included): owed to the journal."""
        self._owe(incident.id, _Truth(incident=incident))

    def note_resolved(
        self, incident: Incident, *, reason: ResolveReason, resolved_at: datetime
    ) -> None:
        """An incident resolved: owed to the journal with its resolution."""
        self._owe(incident.id, _Truth(incident=incident, resolved_at=resolved_at, reason=reason))

    def settled(self, incident_id: str) -> None:
        """The sink delivered an event of ``incident_id``, or its receiver refused one for good:
        reconcile it at the next step (a refusal may have ended a doubt the plan counted on)."""
        if len(self._touched) < MAX_OWED:
            self._touched.add(incident_id)

    def renumber(self, lifted: Callable[[Incident], Incident]) -> None:
        """The journal was read only after the start: ``lifted`` moves what this run numbered
        before above the journal's generations; every owed truth and every later note goes
        through it (a tick under way may still note an incident with its old generation)."""
        self._lift = lifted
        for incident_id, truth in list(self._owed.items()):
            self._owed[incident_id] = replace(truth, incident=lifted(truth.incident))

    def _owe(self, incident_id: str, truth: _Truth) -> None:
        if self._lift is not None:
            truth = replace(truth, incident=self._lift(truth.incident))
        self._owed.pop(incident_id, None)
        self._owed[incident_id] = truth
        if len(self._owed) > MAX_OWED:
            dropped = next(iter(self._owed))
            del self._owed[dropped]
            _log.warning("incident journal: %d incidents owed; %s dropped", MAX_OWED, dropped)

    # ------------------------------------------------------------------ the pass
    async def step(self, now: datetime) -> None:
        """Record what is owed, then reconcile what the journal holds (module docstring)."""
        setting = self._setting()
        try:
            await self._flush(now, setting)
            if (setting.notify, setting.receivers) != (self._notify, self._receivers):
                self._notify, self._receivers = setting.notify, setting.receivers
                self._next_sweep = None  # turned on, or a new receiver list: look at once
            touched, self._touched = self._touched, set()
            for incident_id in sorted(touched - self._owed.keys()):
                stored = await self.journal.get(incident_id)
                if stored is not None:
                    await self._reconcile(stored, now, setting)
            if self._next_sweep is None or now >= self._next_sweep:
                await self._sweep(now, setting)
        except JournalError as exc:
            self._failed(exc)
            return
        if self._failing is not None and not self._owed:
            _log.info("incident journal records again; every owed incident is recorded")
            self._failing = None

    async def replay(self, incident_id: str, *, now: datetime) -> int | None:
        """The operator's replay: the incident's failed events the policy still wants are
        re-armed; ``None`` when the journal does not know the incident."""
        stored = await self.journal.get(incident_id)
        if stored is None:
            return None
        done = await self._reconcile(stored, now, self._setting(), replay=True)
        return len(done.rearm)

    async def _flush(self, now: datetime, setting: _Setting) -> None:
        for incident_id, truth in list(self._owed.items()):
            stored = await self.journal.get(incident_id)
            events = stored.events if stored is not None else ()
            leg = leg_of(truth.incident, resolved=truth.resolved_at is not None, events=events)
            decided = _plan(leg, now, setting)
            last = max((e.revision for e in events), default=0)
            change = IncidentChange(
                incident=truth.incident,
                resolved_at=truth.resolved_at,
                resolve_reason=truth.reason,
                cancel=decided.cancel,
                instance=self.instance,
            )
            new = self._events(truth.incident, truth, decided, last, now)
            try:
                await self.journal.record(change, new, now=now)
            except JournalRefusedError as exc:  # never recordable: waiting would block the rest
                if truth.incident.scope is Scope.INSTANCE and exc.reason in _FIRST_WINS:
                    _log.info("incident %s: another instance recorded it first", incident_id)
                else:
                    _log.error("incident %s not recorded: %s", incident_id, exc)
                self._owed.pop(incident_id, None)
                continue
            if decided.rearm:
                await self.journal.settle(
                    incident_id, now=now, after_revision=last + len(new), rearm=decided.rearm
                )
            if self._owed.get(incident_id) is truth:  # health may have noted a newer one
                del self._owed[incident_id]

    async def _sweep(self, now: datetime, setting: _Setting) -> None:
        snapshot = await self.journal.load_open(told_since=now - TOLD_WINDOW)
        next_sweep = now + SWEEP
        for stored in (*snapshot.open_incidents, *snapshot.pending_resolutions):
            if stored.incident.id in self._owed:
                continue  # its newer truth is recorded first
            if not self.sweeps(stored.instance):
                continue  # a live instance reconciles its own
            done = await self._reconcile(stored, now, setting)
            if done.recheck_at is not None:
                next_sweep = min(next_sweep, max(done.recheck_at, now))
        self._next_sweep = next_sweep

    async def _reconcile(
        self, stored: StoredIncident, now: datetime, setting: _Setting, *, replay: bool = False
    ) -> HumanPlan:
        leg = leg_of(stored.incident, resolved=stored.resolved_at is not None, events=stored.events)
        decided = _plan(leg, now, setting, replay=replay)
        if not decided.writes:
            return decided
        last = max((e.revision for e in stored.events), default=0)
        truth = _Truth(
            incident=stored.incident, resolved_at=stored.resolved_at, reason=stored.resolve_reason
        )
        done = await self.journal.settle(
            stored.incident.id,
            now=now,
            after_revision=last,
            events=self._events(stored.incident, truth, decided, last, now),
            cancel=decided.cancel,
            rearm=decided.rearm,
        )
        return EMPTY if done is None else decided  # another writer moved it: next time

    def _setting(self) -> _Setting:
        health = self.settings().health
        return _Setting(
            notify=health.notifications.mode.sends,
            receivers=self.receivers(),
            repeat=health.human_repeat,
            refresh=health.notifications.refresh,
        )

    def _events(
        self, incident: Incident, truth: _Truth, decided: HumanPlan, last: int, now: datetime
    ) -> list[NewEvent]:
        instance, coverage = self.instance, self.coverage()
        events: list[NewEvent] = []
        for offset, kind in enumerate(decided.record, start=1):
            payload = event_from_incident(
                incident,
                event_type=kind,
                revision=last + offset,
                occurred_at=now,
                instance=instance,
                coverage=coverage,
                routing_reason=incident.routing_reason,
                resolved_at=truth.resolved_at if kind is EventType.RESOLVED else None,
                resolve_reason=truth.reason if kind is EventType.RESOLVED else None,
            )
            body: dict[str, object] = json.loads(encode_event(payload))
            events.append(NewEvent(type=kind, payload=body))
        return events

    def _failed(self, exc: JournalError) -> None:
        reason = f"{exc.operation}: {exc.reason}"
        if self._failing is None:  # the journal's own health logs the outage's one WARNING
            _log.info(
                "incident journal failed (%s); detection goes on, coverage is degraded, "
                "%d incidents owed",
                reason,
                len(self._owed),
            )
        self._failing = reason
        self._next_sweep = None  # the journal answering a read is what ends the outage


def _plan(leg: Leg, now: datetime, setting: _Setting, *, replay: bool = False) -> HumanPlan:
    return plan(
        leg,
        notify=setting.notify,
        receivers=setting.receivers,
        replay=replay,
        repeat=setting.repeat,
        now=now,
        refresh=setting.refresh,
    )
