"""The one function that builds fleetd: every side built and handed what it needs.

Nothing in fleetd is created at import. :func:`build_service` takes the live config and, for every
port, an optional replacement; production passes none and gets the real adapters (the herdr
socket, the configured inbox, git worktrees, the system clock), tests pass fakes and a
:class:`~fleetd.clock.FakeClock` and get the same wiring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from prometheus_client import disable_created_metrics

from fleetd.api.auth import Authenticator
from fleetd.bridge import DurableState
from fleetd.bridge.git_worktrees import GitWorktrees
from fleetd.bridge.push import PushLoop
from fleetd.bridge.service import Bridge
from fleetd.bridge.worktrees import Worktrees
from fleetd.catalog.port import ModelCatalog
from fleetd.clock import Clock, SystemClock
from fleetd.compose.api_side import lead_tokens, tool_registry
from fleetd.compose.catalog_side import model_health
from fleetd.compose.herdr_side import herdr_control
from fleetd.compose.inbox_side import inbox_from
from fleetd.compose.journal_side import receiver_generation, sink_problem, webhook_sink
from fleetd.compose.loops import schedule
from fleetd.compose.series import feed_metrics, start_series
from fleetd.compose.service import Fleetd
from fleetd.config import ConfigRef
from fleetd.herdr.control import AgentControl
from fleetd.identity import Caller, Role
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.registry import LeadInboxRegistry
from fleetd.journal.port import Journal
from fleetd.journal.retention import JournalRetention
from fleetd.journal.sql import SqlJournal
from fleetd.journal.watch import watch_journal
from fleetd.metrics import Metrics
from fleetd.notify.desk import IncidentDesk
from fleetd.runs import Runs
from fleetd.runtime.escalation import instance_name
from fleetd.runtime.fleet_all import FleetAcross
from fleetd.runtime.fleet_summary import summarize
from fleetd.runtime.fleet_versions import FleetViews
from fleetd.runtime.fleet_view import FleetViewBuilder
from fleetd.runtime.instances import InstanceWatch, RemotePeers
from fleetd.runtime.link import LinkObserver, LinkState
from fleetd.runtime.live_agents import LiveAgents
from fleetd.runtime.monitor import FleetHealthMonitor
from fleetd.runtime.scheduler import Scheduler
from fleetd.state.memory import MemoryStateStore
from fleetd.state.port import StateStore

__all__ = ["build_service", "published_summary"]

_OPERATOR = Caller(role=Role.OPERATOR, name="operator")  # the operator's scope is its role's


def published_summary(
    views: FleetViews, instance: Callable[[], str]
) -> Callable[[], Awaitable[Mapping[str, Any] | None]]:
    """What this instance publishes with each renewal of its journal row: the summary of its
    operator view of the current version (:mod:`fleetd.runtime.fleet_summary`)."""

    async def summary() -> Mapping[str, Any] | None:
        view = await views.view(_OPERATOR)
        return summarize(view, instance=instance()).model_dump(mode="json", by_alias=True)

    return summary


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
    remote = RemotePeers()  # the leads other instances publish: filled by the instances loop
    lead_inboxes = LeadInboxRegistry(
        inbox,
        lambda: [lead.name for lead in config.current.leads],
        clock=clock,
        remote_leads=remote.names,
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
        remote_leads=remote.leads,
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
        settled=escalation.settled,
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
    registry = tool_registry(
        config=config,
        clock=clock,
        bridge=bridge,
        views=views,
        mint_token=authenticator.mint_member_token,
    )
    feed_metrics(metrics, registry=registry, bridge=bridge, link=link, health=health)
    start_series(metrics, registry=registry, settings=settings)

    watch = InstanceWatch(
        journal=journal,
        escalation=escalation,
        settings=lambda: config.current,
        run=runs.current,
        started_at=clock.now(),
        summary=published_summary(views, lambda: instance_name(config.current)),
        peers=remote,
    )
    escalation.sweeps = watch.sweeps
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
        instances=watch,
        across=FleetAcross(
            views=views,
            watch=watch,
            journal=journal,
            clock=clock,
            interval=lambda: config.current.health.snapshot_interval,
        ),
    )
    schedule(service)
    return service
