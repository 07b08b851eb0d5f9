"""``FleetHealthMonitor``: the thin scheduler around the pure ``decide``.

Each enabled tick takes one snapshot (:mod:`fleetd.runtime.snapshot`), calls
:func:`~fleetd.health.decide.decide` with the state the previous tick returned, and turns the
returned effects into adapter calls — and nothing else decides anything here. While
``health.enabled`` is false a tick returns at once: no herdr call, no pane read.

Pane reads that ``decide`` asks for in tick N are performed here, at most as many as it granted
(the budget lives in the pure core), and their digests and signature ids enter tick N+1's snapshot.
Routing to a peer lead and human notification are later capabilities: an incident handed to the
router stays open, visible on every local surface, and coverage says ``partial``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from fleetd.bridge.push import PushLoop
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import TRANSITIONS, SessionEvent, SessionState
from fleetd.bridge.work_product import measure_terminal_edges
from fleetd.clock import Clock
from fleetd.config import ConfigRef, NotificationMode
from fleetd.config.floors import TWO_SNAPSHOTS
from fleetd.errors import FleetdError, HerdrError, TargetNotFoundError
from fleetd.health.decide import decide
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
    RequestRouting,
    RequestTargetLookup,
    ResolveIncident,
    UpdateIncident,
)
from fleetd.health.evidence import HealthState
from fleetd.health.incidents import Incident, suggested_tool_calls
from fleetd.health.snapshot import ProbeResult
from fleetd.health.states import ControlLinkState, Scope, spec_of
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import ReadSource
from fleetd.inbox.records import InboxRecord, MessageKind, Severity
from fleetd.metrics import Metrics
from fleetd.runtime.link import LinkState
from fleetd.runtime.snapshot import take_snapshot
from fleetd.screens import digest, match_fatal, parse_agent_kind

__all__ = ["FleetHealthMonitor"]

_log = logging.getLogger("fleetd.health")

_FAIL_CAUSES = {
    FailCause.GONE: ReleaseCause.GONE,
    FailCause.NEVER_READY: ReleaseCause.NEVER_READY,
}
_EVENTS = {
    FailCause.GONE: SessionEvent.TARGET_GONE,
    FailCause.NEVER_READY: SessionEvent.NEVER_READY,
}


@dataclass(slots=True, kw_only=True)
class RoutingNote:
    """Why an incident is not with its owning lead, and what happened instead."""

    reason: str
    outcome: str


@dataclass(slots=True)
class FleetHealthMonitor:
    """One tick at a time; state lives in :attr:`state`, evidence for the next tick beside it."""

    clock: Clock
    control: AgentControl
    bridge: Bridge
    push: PushLoop
    config: ConfigRef
    metrics: Metrics
    state: HealthState = field(default_factory=HealthState)
    ticks: int = 0
    pane_reads: int = 0
    routing: dict[str, RoutingNote] = field(default_factory=dict)
    _probes: list[ProbeResult] = field(default_factory=list)
    _targeted: dict[str, str] = field(default_factory=dict)
    _mute_cursor: int = 0

    @property
    def enabled(self) -> bool:
        return self.config.current.health.enabled

    def interval(self) -> float:
        return float(self.config.current.health.snapshot_interval_seconds)

    async def tick(self) -> None:
        """One fleet tick; a disabled monitor does no herdr or pane work at all."""
        if not self.enabled:
            return
        started = self.clock.monotonic()
        now = self.clock.now()
        probes, self._probes = self._probes, []
        targeted, self._targeted = self._targeted, {}
        await measure_terminal_edges(self.bridge)
        snapshot = await take_snapshot(
            control=self.control,
            bridge=self.bridge,
            push=self.push,
            config=self.config.current,
            probes=probes,
            targeted_errors=targeted,
            mute_counts=self._new_mutes(),
        )
        decision = decide(snapshot, self.state, now)
        self.state = decision.state
        self.ticks += 1
        await self.dispatch(decision.effects)
        self._refresh_gauges()
        self.metrics.tick_seconds.observe(self.clock.monotonic() - started)

    async def dispatch(self, effects: Iterable[Effect]) -> None:
        """Turn effects into adapter calls, in the order ``decide`` gave them."""
        for effect in effects:
            try:
                await self._apply(effect)
            except FleetdError as exc:
                _log.warning("health effect %s failed: %s", type(effect).__name__, exc)

    async def _apply(self, effect: Effect) -> None:
        match effect:
            case OpenIncident(incident=incident):
                self.metrics.health_incidents_total.labels(event="opened").inc()
                _log.warning(
                    "incident %s opened: %s %s (%s)",
                    incident.id,
                    incident.scope.value,
                    incident.state,
                    incident.key.cause,
                )
            case UpdateIncident():
                self.metrics.health_incidents_total.labels(event="updated").inc()
            case ResolveIncident(incident=incident, reason=reason):
                self.metrics.health_incidents_total.labels(event="resolved").inc()
                self.routing.pop(incident.id, None)
                _log.info("incident %s resolved (%s)", incident.id, reason.value)
            case PublishHealthRecord(recipient_lead=lead, incident=incident):
                await self.bridge.keep_for_lead(self._record(lead, incident))
            case RequestRouting(incident=incident, reason=reason):
                self.routing[incident.id] = RoutingNote(
                    reason=reason.value, outcome="no_peer_routing_or_sink_in_this_build"
                )
            case RequestPaneProbe():
                await self._probe(effect)
            case RequestTargetLookup(target=target):
                await self._lookup(target)
            case FailTargetWork():
                await self._fail_target(effect)
            case RequestLostBoundaryRepair(session_id=session_id, token=token):
                _log.warning(
                    "session %s: lost boundary on %s; repair is not available in this build, "
                    "the ticket stays pending and nothing was reconstructed",
                    session_id,
                    token,
                )
            case CountMute():
                pass  # the bridge counts fleet_health_mute_total at each fallback resolution
            case RecordTransition(scope=scope, subject=subject, previous=previous, current=current):
                if scope is Scope.LEAD:
                    if previous is not None:
                        self.metrics.lead_health.labels(lead=subject, state=previous).set(0)
                    self.metrics.lead_health.labels(lead=subject, state=current).set(1)

    async def _probe(self, request: RequestPaneProbe) -> None:
        session = self.bridge.roster.find(request.target)
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
        try:
            await self.control.get_agent(target)
        except TargetNotFoundError as exc:
            self._targeted[target] = exc.code
        except HerdrError:
            return

    async def _fail_target(self, effect: FailTargetWork) -> None:
        session = self.bridge.roster.get(effect.session_id)
        if session is None or self.bridge.releasing(session.session_id):
            return
        if session.state is SessionState.RELEASED or effect.cause not in _FAIL_CAUSES:
            self.bridge.fail_target_work(session, reason=effect.cause.value)
            return
        event = _EVENTS[effect.cause]
        if (session.state, event) in TRANSITIONS:
            session.apply(event, self.clock.now())
        await self.bridge.release(session, _FAIL_CAUSES[effect.cause])

    def _record(self, lead: str, incident: Incident) -> InboxRecord:
        now_ms = int(self.clock.now().timestamp() * 1000)
        opened_ms = int(incident.opened_at.timestamp() * 1000)
        return InboxRecord(
            msg_id=f"health-{incident.id}-{self.bridge.runs.current}",  # unique per run
            kind=MessageKind.HEALTH,
            target=incident.target or incident.subject,
            recipient_lead=lead,
            content=_summary(incident),
            created_at_epoch_millis=now_ms,
            subject_terminal=incident.subject,
            severity=Severity(incident.severity.value),
            state=str(incident.state),
            evidence=dict(incident.evidence),
            first_seen_epoch_millis=opened_ms,
            last_seen_epoch_millis=max(opened_ms, now_ms),
            recovery_tried=False,
            suggested_tool_calls=suggested_tool_calls(incident),
        )

    def _new_mutes(self) -> dict[str, int]:
        """Fallback resolutions since the last tick, per session (the bridge keeps a tail)."""
        counts: dict[str, int] = {}
        mutes = self.bridge.mutes
        fresh = min(self.bridge.mutes_total - self._mute_cursor, len(mutes))
        for event in mutes[len(mutes) - fresh :] if fresh > 0 else ():
            counts[event.session_id] = counts.get(event.session_id, 0) + 1
        self._mute_cursor = self.bridge.mutes_total
        return counts

    def _refresh_gauges(self) -> None:
        gauge = self.metrics.health_incidents
        gauge.clear()
        for incident in self.state.open_incidents():
            gauge.labels(
                scope=incident.scope.value,
                state=str(incident.state),
                severity=incident.severity.value,
            ).inc()

    # ---------------------------------------------------------------- views
    def coverage(self) -> dict[str, Any]:
        """What detection and escalation this deployment has (§10.2)."""
        health = self.config.current.health
        if not health.enabled:
            return {"detection": "disabled", "humanEscalation": "unavailable", "status": "off"}
        webhook = health.notifications.mode is NotificationMode.WEBHOOK
        return {
            "detection": "enabled",
            "peerRouting": "unavailable",
            "humanEscalation": "unavailable",
            "status": "partial",
            "reason": (
                "webhook configured but the human sink is not part of this build"
                if webhook
                else "notifications disabled: no person is told when no lead can act"
            ),
        }

    def classified_link(self) -> ControlLinkState | None:
        """The control link as the last tick classified it; None while health is off or unticked."""
        return self.state.link.state if self.enabled and self.ticks else None

    def link_view(self, link: LinkState) -> dict[str, Any]:
        """The control link for ``fleet_list``, ``/healthz`` and the link gauge: health's verdict,
        or (health off) the calls judged over the same two-snapshot window."""
        window = timedelta(seconds=TWO_SNAPSHOTS * self.interval())
        return link.view(self.classified_link(), now=self.clock.now(), window=window)

    def member_health(self, session_id: str) -> dict[str, Any] | None:
        evidence = self.state.members.get(session_id)
        if evidence is None:
            return None
        now = self.clock.now()
        return {
            "state": str(evidence.state),
            "certainty": spec_of(evidence.state).certainty.value,
            "cause": evidence.cause,
            "ageSeconds": round((now - evidence.since).total_seconds(), 3),
        }

    def view(self) -> dict[str, Any]:
        """The health part of ``fleet_list``: leads, incidents, link, coverage — no pane content."""
        now = self.clock.now()
        return {
            "health": {
                "enabled": self.enabled,
                "ticks": self.ticks,
                "paneReads": self.pane_reads,
                "controlLink": str(self.state.link.state),
                "leads": [
                    {
                        "name": lead.name,
                        "state": str(lead.state),
                        "ageSeconds": round((now - lead.since).total_seconds(), 3),
                    }
                    for lead in sorted(self.state.leads.values(), key=lambda e: e.name)
                ],
            },
            "incidents": [self._incident_row(i, now) for i in self.state.open_incidents()],
            "healthCoverage": self.coverage(),
        }

    def _incident_row(self, incident: Incident, now: Any) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": incident.id,
            "scope": incident.scope.value,
            "subject": incident.subject,
            "state": str(incident.state),
            "severity": incident.severity.value,
            "certainty": incident.certainty.value,
            "ageSeconds": round((now - incident.opened_at).total_seconds(), 3),
            "owner": incident.owner_lead,
            "recipient": incident.recipient_lead,
        }
        note = self.routing.get(incident.id)
        if note is not None:
            row["routing"] = {"reason": note.reason, "outcome": note.outcome}
        return row

    def component(self) -> dict[str, Any]:
        """The nested ``fleetHealth`` component of ``/healthz``."""
        coverage = self.coverage()
        return {
            "status": coverage["status"],
            "openIncidents": len(self.state.incidents),
            "ticks": self.ticks,
            "coverage": coverage,
        }


def _summary(incident: Incident) -> str:
    """The lead-visible line of a health record: codes and names only."""
    return (
        f"fleetd health: {incident.scope.value} {incident.subject} is {incident.state} "
        f"({incident.certainty.value}, cause {incident.key.cause}). No task was replayed."
    )
