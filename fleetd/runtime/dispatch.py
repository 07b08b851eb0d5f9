"""``EffectDispatcher``: the one place effects from ``decide`` become adapter calls.

:meth:`EffectDispatcher.apply` holds the only ``match`` over :data:`~fleetd.health.effects.Effect`
in fleetd, closed by ``assert_never``: an effect added to the union without a case here fails
``mypy --strict`` (and raises at run time). Each case is one short handler; the journal and the
human sink plug in here, beside the metrics and the log.

Effects are applied in the order ``decide`` gave them; an adapter failure (any ``FleetdError``) is
logged and the next effect still runs. Pane reads and target lookups do not feed back at once:
their results wait here until the next tick takes them (:meth:`take_evidence`) for its snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import assert_never

from fleetd.bridge.push import PushLoop
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import SessionState
from fleetd.clock import Clock
from fleetd.errors import FleetdError, HerdrError
from fleetd.health.effects import (
    CountMute,
    Effect,
    FailCause,
    FailTargetWork,
    OpenIncident,
    PublishHealthRecord,
    RecordTransition,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RequestTargetLookup,
    ResolveIncident,
    RetireLead,
    RouteToHuman,
    SupersedeAssignment,
    UpdateIncident,
)
from fleetd.health.incidents import Assignment, Incident
from fleetd.health.snapshot import ProbeResult
from fleetd.health.states import Scope
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import ReadSource
from fleetd.metrics import Metrics
from fleetd.runtime.escalation import Escalation
from fleetd.runtime.lead_records import health_record, superseded_record
from fleetd.runtime.pane_excerpts import PaneExcerpts
from fleetd.screens import digest, match_fatal, parse_agent_kind

__all__ = ["PASSIVE_NO_SINK", "WEBHOOK_QUEUED", "EffectDispatcher", "RoutingNote"]

_log = logging.getLogger("fleetd.health")

_FAIL_CAUSES = {
    FailCause.GONE: ReleaseCause.GONE,
    FailCause.NEVER_READY: ReleaseCause.NEVER_READY,
}


@dataclass(slots=True, kw_only=True)
class RoutingNote:
    """What became of an incident routed to a person, for the local surfaces: ``webhook`` (the
    human leg records and sends its events) or ``passive_no_sink`` (notifications are off: it
    stays open and visible here only)."""

    reason: str
    outcome: str


PASSIVE_NO_SINK = "passive_no_sink"
WEBHOOK_QUEUED = "webhook"
"""The outcome of the human leg: the webhook sink has it, or (off) nobody is told."""


@dataclass(slots=True, kw_only=True)
class EffectDispatcher:
    """Applies effects; keeps routing notes (one per open incident) and next tick's evidence."""

    clock: Clock
    control: AgentControl
    bridge: Bridge
    metrics: Metrics
    push: PushLoop | None = None  # told which failed leads a peer covers, for its nudge
    escalation: Escalation | None = None  # the journal and the human leg
    excerpts: PaneExcerpts | None = None  # health.includePaneExcerpt: lead records only
    pane_reads: int = 0
    routing: dict[str, RoutingNote] = field(default_factory=dict)
    _probes: list[ProbeResult] = field(default_factory=list)
    _targeted: dict[str, str] = field(default_factory=dict)

    def take_evidence(self) -> tuple[list[ProbeResult], dict[str, str]]:
        """Probe results and per-target lookup errors gathered since the last call, handed over."""
        probes, self._probes = self._probes, []
        targeted, self._targeted = self._targeted, {}
        return probes, targeted

    async def dispatch(self, effects: Iterable[Effect]) -> None:
        """Turn effects into adapter calls, in the order ``decide`` gave them."""
        for effect in effects:
            try:
                await self.apply(effect)
            except FleetdError as exc:
                _log.warning("health effect %s failed: %s", type(effect).__name__, exc)

    async def apply(self, effect: Effect) -> None:
        """One effect; the only ``match`` over effects, exhaustive."""
        match effect:
            case OpenIncident(incident=incident):
                self._opened(incident)
                self._journal_change(incident)
            case UpdateIncident(incident=incident):
                self.metrics.health_incidents_total.labels(event="updated").inc()
                self._journal_change(incident)
            case ResolveIncident():
                self._resolved(effect)
                if (escalation := self.escalation) is not None:
                    escalation.note_resolved(
                        effect.incident, reason=effect.reason, resolved_at=effect.resolved_at
                    )
            case PublishHealthRecord(recipient_lead=lead, incident=incident):
                self.routing.pop(incident.id, None)
                await self._publish(lead, incident)
                # a lead of another instance is pushed by its own instance (this one's push
                # loop serves its configured leads only)
                local = effect.recipient_instance is None
                if effect.on_behalf_of is not None and self.push is not None and local:
                    self.push.cover(lead, effect.on_behalf_of)
            case RouteToHuman(incident=incident, reason=reason):
                self._to_human(incident, reason.value)
                self._journal_change(incident)
            case SupersedeAssignment(incident=incident, previous=previous):
                await self._superseded(incident, previous)
            case RetireLead(lead=lead):
                await self._retire(lead)
            case RequestPaneProbe():
                await self._probe(effect)
            case RequestTargetLookup(target=target):
                await self._lookup(target)
            case FailTargetWork():
                await self._fail_target(effect)
            case RequestLostBoundaryRepair():
                await self._lost_boundary(effect)
            case CountMute():
                pass  # the bridge counts fleet_health_mute_total at each fallback resolution
            case RecordTransition():
                self._transition(effect)
            case _:
                assert_never(effect)

    def _opened(self, incident: Incident) -> None:
        self.metrics.health_incidents_total.labels(event="opened").inc()
        _log.warning(
            "incident %s opened: %s %s (%s)",
            incident.id,
            incident.scope.value,
            incident.state,
            incident.key.cause,
        )

    def _resolved(self, effect: ResolveIncident) -> None:
        self.metrics.health_incidents_total.labels(event="resolved").inc()
        self.routing.pop(effect.incident.id, None)
        _log.info("incident %s resolved (%s)", effect.incident.id, effect.reason.value)

    def _to_human(self, incident: Incident, reason: str) -> None:
        if self.escalation is not None and self.escalation.notify:
            self.routing[incident.id] = RoutingNote(reason=reason, outcome=WEBHOOK_QUEUED)
            _log.warning(
                "incident %s: no lead can act (%s); a person is notified", incident.id, reason
            )
            return
        self.routing[incident.id] = RoutingNote(reason=reason, outcome=PASSIVE_NO_SINK)
        _log.warning(
            "incident %s: no lead can act (%s); notifications are off (health.notifications.mode), "
            "kept open",
            incident.id,
            reason,
        )

    def _journal_change(self, incident: Incident) -> None:
        """The journal and the human leg take the incident as it now stands (never awaited:
        :class:`Escalation` records it in its own pass)."""
        if (escalation := self.escalation) is not None:
            escalation.note(incident)

    async def _superseded(self, incident: Incident, previous: Assignment) -> None:
        """Tell the lead that held the superseded assignment that it is no longer its own (the
        human leg's policy cancels a person's undelivered events when a lead takes it back)."""
        self.metrics.health_incidents_total.labels(event="reassigned").inc()
        self._journal_change(incident)
        _log.info(
            "incident %s: routing generation %d (%s) superseded by %d",
            incident.id,
            previous.generation,
            previous.recipient or previous.route.value,
            incident.routing_generation,
        )
        if previous.recipient is None or previous.recipient == incident.recipient_lead:
            return
        record = superseded_record(
            incident, previous, now=self.clock.now(), run=self.bridge.runs.current
        )
        await self.bridge.outbox.keep(record)

    async def _retire(self, lead: str) -> None:
        """A lead gone from the identity map past its grace: its inbox key goes once nothing of
        it is held in memory and its queue is empty (the registry refuses otherwise)."""
        held = any(record.recipient_lead == lead for record in self.bridge.reads.unpublished)
        released = not held and await self.bridge.lead_inboxes.retire(lead, incidents_settled=True)
        _log.info(
            "lead %s retired from health after its grace; inbox key %s",
            lead,
            "released" if released else "kept (records wait in it)",
        )

    async def _publish(self, lead: str, incident: Incident) -> None:
        now = self.clock.now()
        record = health_record(incident, lead=lead, now=now, run=self.bridge.runs.current)
        if self.excerpts is not None:  # the lead's record only: never the incident or a person
            record = self.excerpts.attach(record, incident, now=now)
        await self.bridge.outbox.keep(record)

    async def _probe(self, request: RequestPaneProbe) -> None:
        session = self.bridge.reads.find_live(request.target)
        kind = parse_agent_kind(session.kind if session else None)
        self.pane_reads += 1
        try:
            read = await self.control.read(request.pane_id, ReadSource(request.source.value))
        except HerdrError as exc:
            self.metrics.pane_reads_total.labels(outcome="failed").inc()
            self._probes.append(
                ProbeResult(
                    target=request.target, source=request.source, ok=False, error_code=exc.code
                )
            )
            return
        self.metrics.pane_reads_total.labels(outcome="ok").inc()
        if self.excerpts is not None:
            self.excerpts.note(
                request.target, read.text, read_at=self.clock.now(), reason=request.reason.value
            )
        signature = match_fatal(kind, read.text)
        self._probes.append(
            ProbeResult(
                target=request.target,
                source=request.source,
                ok=True,
                digest=digest(read.text),
                fatal_signature_id=signature.id if signature else None,
            )
        )

    async def _lookup(self, target: str) -> None:
        """One per-target call; any error's code is evidence (only ``*_not_found`` is loss)."""
        try:
            await self.control.get_agent(target)
        except HerdrError as exc:
            self._targeted[target] = exc.code

    async def _fail_target(self, effect: FailTargetWork) -> None:
        session = self.bridge.reads.session(effect.session_id)
        if session is None or self.bridge.reads.releasing(session.session_id):
            return
        if session.state is SessionState.RELEASED or effect.cause not in _FAIL_CAUSES:
            self.bridge.lifecycle.fail_target_work(session, reason=effect.cause.value)
            return
        await self.bridge.lifecycle.release_lost(session, _FAIL_CAUSES[effect.cause])

    async def _lost_boundary(self, effect: RequestLostBoundaryRepair) -> None:
        """The one repair call; its answer reaches the lead through the next tick's snapshot."""
        outcome = await self.bridge.repair.reconcile_lost_boundary(effect.target, effect.token)
        self.metrics.repairs_total.labels(result=outcome.result.value).inc()

    def _transition(self, effect: RecordTransition) -> None:
        if effect.scope is not Scope.LEAD:
            return
        if effect.previous is not None:
            self.metrics.lead_health.labels(lead=effect.subject, state=effect.previous).set(0)
        self.metrics.lead_health.labels(lead=effect.subject, state=effect.current).set(1)
