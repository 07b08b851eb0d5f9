"""``FleetHealthMonitor``: the tick around the pure ``decide``.

Each enabled tick takes one snapshot (:mod:`fleetd.runtime.snapshot`), calls
:func:`~fleetd.health.decide.decide` with the state the previous tick returned, and hands the
returned effects to the :class:`~fleetd.runtime.dispatch.EffectDispatcher` — and nothing else
decides anything here. The tick has no loop of its own: the scheduler calls it every interval.
While ``health.enabled`` is false a tick returns at once: no herdr call, no pane read.

Pane reads that ``decide`` asks for in tick N are performed by the dispatcher, at most as many as
it granted (the budget lives in the pure core), and their digests and signature ids enter tick
N+1's snapshot. ``decide`` also routes every incident (owner, healthy peer, or person); peer
records go to the recipient's inbox like the owner's; an incident routed to a person reaches the
journal and the human leg through :class:`~fleetd.runtime.escalation.Escalation`, which the tick
only tells (it never waits on the journal).
The views over this state (``fleet_list`` health, ``/healthz``) live in
:mod:`fleetd.runtime.health_views`; the methods below only hand them the monitor's state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from fleetd.bridge.push import PushLoop
from fleetd.bridge.service import Bridge
from fleetd.clock import Clock
from fleetd.config import ConfigRef
from fleetd.errors import FleetdError
from fleetd.health.adoption import adopt_late, resume
from fleetd.health.decide import decide
from fleetd.health.evidence import HealthState
from fleetd.health.incidents import Incident, ResolveReason, Route
from fleetd.health.routing import foreign_assignments
from fleetd.health.snapshot import RemoteLead
from fleetd.health.states import ControlLinkState, Scope
from fleetd.herdr.control import AgentControl
from fleetd.journal.port import Journal
from fleetd.journal.values import JournalSnapshot
from fleetd.journal.watch import JournalWatch
from fleetd.metrics import Metrics
from fleetd.notify.payload import CoverageStatus
from fleetd.runtime import health_views
from fleetd.runtime.dispatch import EffectDispatcher, RoutingNote
from fleetd.runtime.escalation import Escalation
from fleetd.runtime.fleet_models import ControlLink, HealthCoverage, LeadHealth, MemberHealth
from fleetd.runtime.health_views import BLIND, FleetHealthComponent
from fleetd.runtime.link import LinkState
from fleetd.runtime.pane_excerpts import PaneExcerpts
from fleetd.runtime.snapshot import SeenAgents, take_snapshot

__all__ = ["FleetHealthMonitor"]

_COVERAGE = frozenset(status.value for status in CoverageStatus)

_log = logging.getLogger("fleetd.health")


@dataclass(slots=True)
class FleetHealthMonitor:
    """One tick at a time; state lives in :attr:`state`, effects go through :attr:`dispatcher`."""

    clock: Clock
    control: AgentControl
    bridge: Bridge
    push: PushLoop
    config: ConfigRef
    metrics: Metrics
    journal: Journal | None = None
    journal_watch: JournalWatch | None = None  # the journal's observer: its health
    sink_problem: Callable[[], str | None] | None = None  # the webhook sink's failure, if any
    # the leads other live instances sharing the journal last published (issue 24): the
    # instances loop reads them, with the journal's deadline; routing takes them as values
    remote_leads: Callable[[], tuple[RemoteLead, ...]] = tuple
    state: HealthState = field(default_factory=HealthState)
    ticks: int = 0
    dispatcher: EffectDispatcher = field(init=False)
    escalation: Escalation | None = field(init=False, default=None)
    _mute_cursor: int = 0
    _seen: SeenAgents = field(default_factory=SeenAgents)
    _gauged: tuple[object, object] = (None, None)  # the incidents and leads the gauges show
    _resume_owed: bool = False  # the journal could not be read at start: read it when it answers
    _blind: bool = False  # herdr's agent list kept failing while herdr answered (said once)

    def __post_init__(self) -> None:
        if not self.state.namespace:  # new incident ids are unique to this run
            self.state = replace(self.state, namespace=self.bridge.runs.current)
        if self.journal is not None:
            self.escalation = Escalation(
                journal=self.journal,
                settings=lambda: self.config.current,
                coverage=self._coverage_status,
            )
        config = self.config
        self.dispatcher = EffectDispatcher(
            excerpts=PaneExcerpts(
                enabled=lambda: config.current.health.include_pane_excerpt,
                known=config.secret_values,
            ),
            escalation=self.escalation,
            clock=self.clock,
            control=self.control,
            bridge=self.bridge,
            metrics=self.metrics,
            push=self.push,
        )

    async def resume(self) -> int:
        """At start: carry on from the incidents this instance opened that the journal kept open
        (none are opened twice); returns how many. A journal that cannot be read leaves the
        monitor starting afresh."""
        if self.journal is None or self.escalation is None:
            return 0
        try:  # its own: other instances sharing the journal resume theirs
            kept = await self.journal.load_open(instance=self.escalation.instance)
        except FleetdError as exc:
            _log.warning(
                "incident journal not read at start (%s); detection starts afresh, and its open "
                "incidents are taken up once it answers",
                exc,
            )
            self._resume_owed = True
            return 0
        incidents = _resumable(kept)
        self.state = resume(
            incidents,
            kept.generations,
            self.bridge.runs.current,
            floor=kept.generation_floor,
        )
        if incidents:
            _log.info("resumed %d open incidents from the journal", len(incidents))
        return len(incidents)

    async def journal_step(self, now: datetime) -> None:
        """The webhook loop's journal work: the start's resume if the journal could not be read
        then, and the escalation's pass (the health tick never waits on the journal)."""
        if self.escalation is None:
            return
        if self._resume_owed:
            await self._resume_late(now)
            if self._resume_owed:
                return  # nothing is recorded before the journal's own incidents are known
        await self.escalation.step(now)

    async def _resume_late(self, now: datetime) -> None:
        """Take up the journal's open incidents once it answers after a start it did not: they
        are adopted as at a start, and one this run has opened again is superseded by this run's
        (:func:`~fleetd.health.adoption.adopt_late`), so a person who was told of it is told it
        closed, exactly once, and no incident is left open in the journal for good."""
        if self.journal is None or self.escalation is None:
            return
        try:
            kept = await self.journal.load_open(instance=self.escalation.instance)
        except FleetdError:
            return  # still away: the next pass asks again
        self._resume_owed = False
        incidents = _resumable(kept)
        late = adopt_late(self.state, incidents, kept.generations, floor=kept.generation_floor)
        self.state = late.state
        self.escalation.renumber(late.lifted)
        for incident in late.superseded:
            self.escalation.note_resolved(
                incident, reason=ResolveReason.SUPERSEDED, resolved_at=now
            )
        for incident in late.renumbered:
            self.escalation.note(incident)
        adopted = len(incidents) - len(late.superseded)
        _log.info(
            "incident journal read after the start: %d open incidents taken up, %d superseded "
            "by this run's",
            adopted,
            len(late.superseded),
        )

    @property
    def enabled(self) -> bool:
        return self.config.current.health.enabled

    @property
    def pane_reads(self) -> int:
        return self.dispatcher.pane_reads

    @property
    def routing(self) -> dict[str, RoutingNote]:
        return self.dispatcher.routing

    def interval(self) -> float:
        return self.config.current.health.snapshot_interval.total_seconds()

    async def tick(self) -> None:
        """One fleet tick; a disabled monitor does no herdr or pane work at all."""
        if not self.enabled:
            return
        started = self.clock.monotonic()
        now = self.clock.now()
        probes, targeted = self.dispatcher.take_evidence()
        await self.bridge.lifecycle.measure_terminal_edges()
        snapshot = await take_snapshot(
            control=self.control,
            bridge=self.bridge,
            push=self.push,
            config=self.config.current,
            probes=probes,
            targeted_errors=targeted,
            mute_counts=self._new_mutes(),
            seen=self._seen,
            remote_leads=self.remote_leads(),
        )
        decision = decide(snapshot, self.state, now)
        self.state = decision.state
        self.ticks += 1
        self._say_blind(health_views.blind(self.state.link))
        await self.dispatcher.dispatch(decision.effects)
        self._refresh_gauges()
        self.metrics.tick_seconds.observe(self.clock.monotonic() - started)

    def _say_blind(self, blind: bool) -> None:
        """One WARNING when the agent list has failed long enough for detection to be blind, one
        INFO when a list reads again."""
        if blind is self._blind:
            return
        self._blind = blind
        if blind:
            _log.warning("%s; members' health is as last seen until a list reads", BLIND)
        else:
            _log.info("herdr's agent list reads again: detection sees the fleet")

    def _new_mutes(self) -> dict[str, int]:
        """Fallback resolutions since the last tick, per session (the bridge keeps a tail)."""
        counts: dict[str, int] = {}
        events, self._mute_cursor = self.bridge.reads.mutes_since(self._mute_cursor)
        for event in events:
            counts[event.session_id] = counts.get(event.session_id, 0) + 1
        return counts

    def _refresh_gauges(self) -> None:
        """The open-incident and foreign-assignment gauges, rebuilt when the open incidents or the
        configured leads changed (a tick that changed no incident hands on the very mapping)."""
        shown = (self.state.incidents, self.config.current.leads)
        if shown[0] is self._gauged[0] and shown[1] is self._gauged[1]:
            return
        self._gauged = shown
        gauge = self.metrics.health_incidents
        self.metrics.reset(gauge)
        for incident in self.state.open_incidents():
            # routed after opening within the same tick: never unrouted here, so not a person
            human = incident.route is Route.HUMAN
            gauge.labels(
                scope=incident.scope.value,
                state=str(incident.state),
                severity=incident.severity.value,
                route=(Route.HUMAN if human else Route.LEAD).value,
            ).inc()
        held = foreign_assignments(self.state.open_incidents())
        assigned = self.metrics.lead_assigned_incidents
        assigned.clear()
        for lead in self.config.current.leads:
            assigned.labels(lead=lead.name).set(len(held.get(lead.name, ())))

    # ------------------------------------------- views (rendered in health_views)
    def coverage(self) -> HealthCoverage:
        """What detection and escalation this deployment has (§10.2): ``degraded`` while
        detection is blind (herdr's agent list keeps failing), or the journal or the human sink
        fails."""
        degraded: list[str] = []
        if self.ticks and health_views.blind(self.state.link):
            degraded.append(BLIND)
        watch = self.journal_watch
        if watch is not None and not watch.health.ok:
            degraded.append(f"incident journal failing ({watch.health.reason})")
        elif self.escalation is not None and (owed := self.escalation.problem) is not None:
            degraded.append(owed)
        if self.sink_problem is not None and (problem := self.sink_problem()) is not None:
            kind = self.config.current.health.notifications.mode.value
            degraded.append(f"{kind} sink failing ({problem})")
        return health_views.coverage(
            self.config.current.health, leads=self._lead_count(), degraded=degraded
        )

    def _coverage_status(self) -> CoverageStatus:
        """The coverage an outbound event reports when it is recorded (§10.2)."""
        status = self.coverage().status
        return CoverageStatus(status) if status in _COVERAGE else CoverageStatus.PARTIAL

    def _lead_count(self) -> int:
        return len(self.config.current.leads)

    def classified_link(self) -> ControlLinkState | None:
        """The control link as the last tick classified it; None while health is off or unticked."""
        return self.state.link.state if self.enabled and self.ticks else None

    def link_view(self, link: LinkState) -> ControlLink:
        """The control link for ``fleet_list``, ``/healthz`` and the link gauge."""
        return health_views.link_view(
            link,
            classified=self.classified_link(),
            now=self.clock.now(),
            interval=self.config.current.health.snapshot_interval,
        )

    def member_health(self, session_id: str) -> MemberHealth | None:
        return health_views.member_health(self.state, session_id, now=self.clock.now())

    def lead_health(self, name: str) -> LeadHealth | None:
        return health_views.lead_health(self.state, name, now=self.clock.now())

    def view(self) -> health_views.FleetHealthPart:
        """The health part of ``fleet_list``."""
        return health_views.fleet_health(
            self.state,
            health=self.config.current.health,
            leads=self._lead_count(),
            ticks=self.ticks,
            pane_reads=self.pane_reads,
            routing=self.routing,
            now=self.clock.now(),
            covered=self.coverage(),
        )

    def component(self) -> FleetHealthComponent:
        """The nested ``fleetHealth`` component of ``/healthz``."""
        return health_views.healthz_component(self.state, ticks=self.ticks, covered=self.coverage())


def _resumable(kept: JournalSnapshot) -> list[Incident]:
    """The open incidents a monitor takes up: every scope but INSTANCE (the instances loop's)."""
    return [
        stored.incident
        for stored in kept.open_incidents
        if stored.incident.scope is not Scope.INSTANCE
    ]
