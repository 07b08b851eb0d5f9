"""The composition root: the one place that builds fleetd.

Nothing in fleetd is created at import. :func:`build_service` takes the live config and, for every
port, an optional replacement; production passes none and gets the real adapters (the herdr
socket, the configured inbox, git worktrees, the system clock), tests pass fakes and a
:class:`~fleetd.clock.FakeClock` and get the same wiring.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from prometheus_client import disable_created_metrics

from fleetd.api.auth import Authenticator
from fleetd.api.fleet_tools import register_fleet_tools
from fleetd.api.tools import ToolRegistry, ToolResult
from fleetd.bridge import DurableState
from fleetd.bridge.git_worktrees import GitWorktrees
from fleetd.bridge.marks import SESSIONS_DIR
from fleetd.bridge.push import PushLoop
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.service import Bridge
from fleetd.bridge.spawn import SpawnRequest
from fleetd.bridge.worktrees import Worktrees
from fleetd.catalog.port import ModelCatalog
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import Clock, SystemClock
from fleetd.config import ConfigRef, ReloadStatus
from fleetd.errors import FleetdError
from fleetd.herdr.control import AgentControl
from fleetd.identity import Caller, Role
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.registry import LeadInboxRegistry
from fleetd.journal.health import watch_journal
from fleetd.journal.port import Journal
from fleetd.journal.retention import RETENTION_PASS_SECONDS, JournalRetention
from fleetd.journal.sql import SqlJournal
from fleetd.metrics import Metrics
from fleetd.notify.desk import IncidentDesk, IncidentListing, ReplayResult
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.worker import LEASE_MARGIN, SinkWorker
from fleetd.outbound import (
    build_inbox,
    herdr_control,
    inbox_from,
    model_health,
    receiver_generation,
    repoint_inbox,
    sink_problem,
    webhook_sink,
)
from fleetd.runs import Runs, remember_run
from fleetd.runtime.fleet_versions import FleetViews
from fleetd.runtime.fleet_view import FleetViewBuilder
from fleetd.runtime.instances import InstanceWatch
from fleetd.runtime.link import LinkObserver, LinkState
from fleetd.runtime.live_agents import LiveAgents
from fleetd.runtime.monitor import FleetHealthMonitor
from fleetd.runtime.scheduler import STALL_FLOOR_SECONDS, Loop, Scheduler
from fleetd.state.memory import MemoryStateStore
from fleetd.state.port import StateStore
from fleetd.wiring import feed_metrics, lead_tokens, start_series

__all__ = ["Fleetd", "build_inbox", "build_service"]

_log = logging.getLogger("fleetd")

PUSH_INTERVAL_SECONDS = 2.0
CONFIG_CHECK_SECONDS = 2.0
AGENTS_REFRESH_SECONDS = 10.0
"""The ``herdr-agents`` loop: the orphans check, and an ``agent.list`` for the fleet view when
none is this recent (with health on, the tick lists every snapshot interval: the loop lists only
when no tick has for that interval and this long besides)."""

#: Tools that change nothing: every other call ends with a new fleet view version.
_READ_TOOLS = frozenset({"fleet_list", "fleet_status"})
WEBHOOK_PASS_SECONDS = 0.5  # one delivery pass: escalation reaches the receiver well within 1 s
#: How often the model-health loop looks for a provider whose catalog probe is due (each
#: provider is still read at most once per modelHealth.probeIntervalSeconds, floor 5 min).
MODEL_HEALTH_SECONDS = 15.0


@dataclass(slots=True, kw_only=True)
class Fleetd:
    """Everything one fleetd process runs."""

    config: ConfigRef
    clock: Clock
    metrics: Metrics
    link: LinkState
    control: AgentControl
    inbox: ReplyInbox
    bridge: Bridge
    push: PushLoop
    health: FleetHealthMonitor
    scheduler: Scheduler
    registry: ToolRegistry
    authenticator: Authenticator
    view: FleetViewBuilder
    views: FleetViews
    environ: Mapping[str, str]
    models: ModelHealth
    desk: IncidentDesk  # the journal's operator view (/v1/incidents)
    sink: SinkWorker  # delivers the journal's outbound events to the webhook
    sender: HttpWebhookSender
    retention: JournalRetention  # deletes resolved history past journal.retentionDays
    instances: InstanceWatch  # this instance's journal row; INSTANCE_DOWN for the others
    started: bool = False

    @property
    def run(self) -> str:
        """This run's id (the fleet view's ``ETag`` values name it)."""
        return self.bridge.runs.current

    async def start(self) -> None:
        """Record this run, own the leads' inbox keys, say hello to herdr, find the members a
        previous run left running, start the loops."""
        runs = self.bridge.runs
        try:
            runs.previous = await asyncio.to_thread(
                remember_run, self.bridge.manifest_root, runs.current
            )
        except FleetdError as exc:
            _log.warning("run %s not recorded: %s", runs.current, exc)
        _log.info("run %s starts", runs.current)
        await self.restore()
        await self.own_lead_keys()
        try:
            pong = await self.control.ping()
            _log.info("herdr %s (protocol %s) answers", pong.version, pong.protocol)
        except FleetdError as exc:
            _log.warning("herdr does not answer yet: %s", exc)
        await self.observe_herdr()
        await self.health.resume()
        self.scheduler.start()
        self.started = True

    async def restore(self) -> None:
        """Take back the members, tokens, tickets and open turns the state store holds."""
        store = self.bridge.durable.store
        snapshot = await asyncio.to_thread(store.load)
        restored = self.bridge.restore(snapshot, adopt_token=self.authenticator.adopt_member)
        if restored.members or restored.tickets:
            _log.info(
                "state store: %d members, %d tickets and %d open turns taken back",
                restored.members,
                restored.tickets,
                restored.turns,
            )

    async def observe_herdr(self) -> None:
        """Match the members taken back from the state store and the marks of earlier runs (one
        ``agent.list`` while there are any), then list herdr's agents for the fleet view unless a
        list this recent is known."""
        await self.bridge.confirm_restored()
        await self.bridge.orphans.check()
        older_than = timedelta(seconds=AGENTS_REFRESH_SECONDS)
        health = self.config.current.health
        if health.enabled:
            older_than += health.snapshot_interval
        await self.view.refresh_agents(older_than)

    async def incidents(self, caller: Caller) -> IncidentListing:
        """``GET /v1/incidents``: what ``caller`` may see of the journal."""
        return await self.desk.incidents(caller, now=self.clock.now())

    async def replay(self, incident_id: str) -> ReplayResult:
        """``POST /v1/incidents/{id}/replay``: re-arm the incident's failed events, and give
        back every webhook receiver a 410 disabled (the operator has acted)."""
        result = await self.desk.replay(incident_id, now=self.clock.now())
        if result.found:
            self.sink.enable_receivers()
        return result

    def stop_requested(self) -> None:
        """SIGTERM/SIGINT arrived: synchronous ``fleet_send`` callers get their ticket now, so
        the server's wait for open requests never waits out a long ``wait``."""
        self.bridge.stopping.set()

    async def stop(self) -> None:
        """Stop the loops (the writes under way finish with them) and close connections. The
        members keep running and the next start adopts them from the state store, unless
        ``bridge.releaseOnStop`` asks to release every live member (SHUTDOWN: stop, preserve,
        manifest; M4 §5.3)."""
        await self.scheduler.stop()
        if self.config.current.bridge.release_on_stop:
            await self.bridge.release_all(ReleaseCause.SHUTDOWN)
        elif self.bridge.live_members():
            _log.info(
                "stopping with %d members kept running: the next start adopts them",
                len(self.bridge.live_members()),
            )
        await self.bridge.flush_unpublished()  # a last try for what waits in memory
        held = self.bridge.unpublished
        if held:
            kinds = Counter(record.kind.value for record in held)
            _log.warning(
                "stopping with %d records the inbox could not take (%s): they are lost with "
                "this process; their tickets' results were not stored in any inbox",
                len(held),
                ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())),
            )
        await self.inbox.close()
        await self.models.aclose()
        await self.sender.aclose()
        if self.health.journal is not None:
            await self.health.journal.close()
        self.started = False

    async def own_lead_keys(self) -> None:
        """Own every configured lead's inbox key (at start, and when the config adds a lead)."""
        try:
            await self.bridge.lead_inboxes.sync()
        except FleetdError as exc:
            _log.warning("lead inbox keys not owned yet: %s", type(exc).__name__)

    async def check_config(self) -> None:
        """Reload the config file if it changed (each tick, and on SIGHUP)."""
        result = self.config.reload(self.clock.now())
        if result.status is not ReloadStatus.UNCHANGED:
            self.metrics.config_reloads_total.labels(outcome=result.status.value).inc()
        if result.status is ReloadStatus.APPLIED:
            settings = self.config.current
            try:
                self.authenticator.set_fixed(
                    lead_tokens=lead_tokens(settings, self.environ),
                    operator_token=self.environ.get(settings.operator_token_env or "") or None,
                )
            except FleetdError as exc:
                _log.warning("lead tokens kept from before the reload: %s", exc)
            repoint_inbox(self.inbox, settings)  # a changed broker list or watchdog is hot
            start_series(self.metrics, registry=self.registry, settings=settings)
            await self.own_lead_keys()


def build_service(
    config: ConfigRef,
    *,
    environ: Mapping[str, str],
    clock: Clock | None = None,
    control: AgentControl | None = None,
    inbox: ReplyInbox | None = None,
    worktrees: Worktrees | None = None,
    metrics: Metrics | None = None,
    catalog: ModelCatalog | None = None,
    journal: Journal | None = None,
    state: StateStore | None = None,
) -> Fleetd:
    """Build one fleetd from its config; any port may be replaced (tests pass fakes).

    The journal defaults to ``journal.url`` (the SQLite file beside the config unless a PostgreSQL
    URL is configured); it connects, and applies its migrations, on first use. Each of its
    operations is bounded by ``journal.operationTimeoutMs`` (hot), on the system clock.

    ``state`` is the bridge's state store; ``fleetd serve`` opens ``state.url`` (and its writer
    lock) and passes it; without one the state is kept in memory only (a restart loses it).
    """
    clock = clock or SystemClock()
    # No *_created series: a scrape shows what fleetd counts, not when each child was made.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client
    metrics = metrics or Metrics()
    settings = config.current
    link = LinkState()
    agents = LiveAgents()
    observed = control or herdr_control(config, environ, clock)
    observed.observe(LinkObserver(clock=clock, state=link, metrics=metrics, agents=agents))
    inbox = inbox or inbox_from(settings, clock=clock, metrics=metrics)
    lead_inboxes = LeadInboxRegistry(
        inbox, lambda: [lead.name for lead in config.current.leads], clock=clock
    )
    runs = Runs()
    authenticator = Authenticator(
        lead_tokens=lead_tokens(settings, environ),
        operator_token=environ.get(settings.operator_token_env or "") or None,
        run=runs.current,
        ended_run=runs.ended,
    )
    manifest_root = settings.worktrees.root
    models, dependencies = model_health(
        config, environ=environ, clock=clock, inbox=inbox, metrics=metrics, catalog=catalog
    )
    bridge = Bridge(
        clock=clock,
        control=observed,
        inbox=inbox,
        worktrees=worktrees or GitWorktrees(),
        metrics=metrics,
        settings=lambda: config.current,
        manifest_root=manifest_root,
        lead_inboxes=lead_inboxes,
        revoke=authenticator.revoke,
        runs=runs,
        bench=models,  # placement, fleet_list and the heartbeat read one capacity view
        durable=DurableState(state or MemoryStateStore(), environ=environ),
    )
    push = PushLoop(
        control=observed,
        clock=clock,
        settings=lambda: config.current,
        metrics=metrics,
        inbox=inbox,
        outbox=bridge.outbox,
        view=bridge.view,
    )
    journal = journal or SqlJournal(
        settings.journal.url.get_secret_value(),
        deadline=lambda: config.current.journal.operation_timeout,
    )
    journal_watch = watch_journal(journal, clock=clock, metrics=metrics)
    health = FleetHealthMonitor(
        clock=clock,
        control=observed,
        bridge=bridge,
        push=push,
        config=config,
        metrics=metrics,
        journal=journal,
        journal_watch=journal_watch,
    )
    escalation = health.escalation
    assert escalation is not None  # built with the journal above
    escalation.receivers = lambda: receiver_generation(config, environ)
    sink, sender = webhook_sink(
        config,
        environ=environ,
        clock=clock,
        journal=journal,
        metrics=metrics,
        owner=f"{escalation.instance}-{runs.current}",
        delivered=escalation.delivered,
        dependencies=dependencies,
    )
    health.sink_problem = lambda: sink_problem(sink)
    view = FleetViewBuilder(
        bridge=bridge,
        link=link,
        config=config,
        push=push,
        manifest_root=manifest_root,
        health=health,
        agents=agents,
        dependencies=dependencies,
    )
    views = FleetViews(view, clock=clock, stopping=bridge.stopping)
    registry = ToolRegistry()

    async def spawn(request: SpawnRequest) -> dict[str, Any]:
        # placement refuses a benched profile (its model is gone: the lead picks another one)
        session = await bridge.spawn(
            request,
            mint_token=authenticator.mint_member_token,
            base_url=config.current.api.base_url,
            session_root=manifest_root / SESSIONS_DIR,
        )
        return bridge.view.session_row(session, now=clock.now())

    register_fleet_tools(registry, bridge=bridge, fleet_view=views.view, spawn=spawn)

    async def on_contact(caller: Caller) -> None:
        if caller.role is Role.MEMBER and caller.session_id is not None:
            bridge.presence(caller.session_id)

    def settle(tool: str | None, _result: ToolResult) -> None:
        if tool is not None and tool not in _READ_TOOLS:
            views.touched()

    registry.on_contact.append(on_contact)
    registry.on_result.append(settle)
    feed_metrics(metrics, registry=registry, bridge=bridge, link=link, health=health)
    start_series(metrics, registry=registry, settings=settings)

    service = Fleetd(
        config=config,
        clock=clock,
        metrics=metrics,
        link=link,
        control=observed,
        inbox=inbox,
        bridge=bridge,
        push=push,
        health=health,
        scheduler=Scheduler(clock),
        registry=registry,
        authenticator=authenticator,
        view=view,
        views=views,
        environ=environ,
        models=models,
        desk=IncidentDesk(journal, replay=escalation.replay),
        sink=sink,
        sender=sender,
        retention=JournalRetention(
            journal, retention=lambda: config.current.journal.retention, clock=clock
        ),
        instances=InstanceWatch(
            journal=journal,
            escalation=escalation,
            settings=lambda: config.current,
            run=runs.current,
            started_at=clock.now(),
        ),
    )
    _schedule(service)
    return service


def _schedule(service: Fleetd) -> None:
    """The loops; each step that changes what ``fleet_list`` shows is settled."""
    # Each step is settled: what it changed gets a fleet view version of its own.
    settled = service.views.settling
    service.scheduler.add(
        Loop(
            name="status-poller",
            step=settled(service.bridge.poll_once),
            interval=service.config.current.herdr.status_poll_interval.total_seconds,  # no reload
        )
    )
    service.scheduler.add(
        Loop(
            name="push",
            step=settled(service.push.push_once),
            interval=lambda: PUSH_INTERVAL_SECONDS,
        )
    )

    async def deliver() -> None:
        escalation = service.health.escalation
        if escalation is not None:  # what a person is owed is recorded before the pass sends
            await escalation.step(service.clock.now())
        await service.sink.step()

    def longest_pass() -> float:
        """A delivery pass ends by its claims' lease (one request limit per receiver, one more
        and the margin), plus the floor every loop gets for its other calls."""
        notifications = service.config.current.health.notifications
        receivers = max(1, len(notifications.receiver_envs))
        lease = (receivers + 1) * notifications.request_timeout + LEASE_MARGIN
        return lease.total_seconds() + STALL_FLOOR_SECONDS

    async def purge() -> None:
        await service.retention.step()

    service.scheduler.add(
        Loop(
            name="webhook",
            step=deliver,
            interval=lambda: WEBHOOK_PASS_SECONDS,
            stall_after=longest_pass,
        )
    )
    service.scheduler.add(
        Loop(name="journal-retention", step=purge, interval=lambda: RETENTION_PASS_SECONDS)
    )
    service.scheduler.add(
        Loop(name="model-health", step=service.models.step, interval=lambda: MODEL_HEALTH_SECONDS)
    )
    service.scheduler.add(
        Loop(
            name="config",
            step=settled(service.check_config),
            interval=lambda: CONFIG_CHECK_SECONDS,
        )
    )
    service.scheduler.add(
        Loop(name="health", step=settled(service.health.tick), interval=service.health.interval)
    )

    async def renew() -> None:
        await service.instances.step(service.clock.now())

    service.scheduler.add(Loop(name="instances", step=renew, interval=service.health.interval))
    service.scheduler.add(
        Loop(
            name="herdr-agents",
            step=settled(service.observe_herdr),
            interval=lambda: AGENTS_REFRESH_SECONDS,
            run_first_immediately=False,  # start() has just observed
        )
    )
