"""``Fleetd``: everything one fleetd process runs, and what it does at start, on a reload and
at stop. :func:`fleetd.compose.build.build_service` builds it."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from fleetd.api.auth import Authenticator
from fleetd.api.tools import ToolRegistry
from fleetd.bridge.push import PushLoop
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.service import Bridge
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import Clock
from fleetd.compose.api_side import lead_tokens
from fleetd.compose.inbox_side import repoint_inbox
from fleetd.compose.series import start_series
from fleetd.config import ConfigRef, ReloadStatus
from fleetd.errors import FleetdError, StateStoreError
from fleetd.herdr.control import AgentControl
from fleetd.identity import Caller
from fleetd.inbox.port import ReplyInbox
from fleetd.journal.retention import JournalRetention
from fleetd.metrics import Metrics
from fleetd.notify.desk import IncidentDesk, IncidentListing, ReplayResult
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.worker import SinkWorker
from fleetd.runs import remember_run
from fleetd.runtime.fleet_all import FleetAcross
from fleetd.runtime.fleet_versions import FleetViews
from fleetd.runtime.fleet_view import FleetViewBuilder
from fleetd.runtime.instances import InstanceWatch
from fleetd.runtime.link import LinkState
from fleetd.runtime.monitor import FleetHealthMonitor
from fleetd.runtime.scheduler import Scheduler

__all__ = ["AGENTS_REFRESH_SECONDS", "Fleetd"]

_log = logging.getLogger("fleetd")

AGENTS_REFRESH_SECONDS = 10.0
"""The ``herdr-agents`` loop: the orphans check, and an ``agent.list`` for the fleet view when
none is this recent (with health on, the tick lists every snapshot interval: the loop lists only
when no tick has for that interval and this long besides)."""


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
    across: FleetAcross  # GET /v1/fleet?scope=all: every instance sharing the journal
    started: bool = False
    restored: bool = False  # the state store's contents were taken back (once per run)

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
        await self.resume_health()
        self.scheduler.start()
        self.started = True

    async def resume_health(self) -> int:
        """Carry on from the incidents the journal kept open for this instance; returns how
        many. If one is held by a lead of another instance (routing across hosts), the other
        instances' leads are read first, so that the first tick finds its recipient and keeps
        it pinned instead of routing it afresh (one read, with the journal's deadline)."""
        resumed = await self.health.resume()
        local = {lead.name for lead in self.config.current.leads}
        held = {i.recipient_lead for i in self.health.state.open_incidents()} - {None}
        if held - local:
            await self.instances.read_peers(self.clock.now())
        return resumed

    async def restore(self) -> None:
        """Take back the members, tokens, tickets and open turns the state store holds (once:
        ``fleetd serve`` does it before it binds its port, so a store it cannot read is an exit
        with its reason, not a failed start-up hook). A record that cannot be taken back is
        :class:`~fleetd.errors.StateStoreError` ``load: corrupt``."""
        if self.restored:
            return
        store = self.bridge.durable.store
        snapshot = await asyncio.to_thread(store.load)
        try:
            restored = self.bridge.restore(snapshot, adopt_token=self.authenticator.adopt_member)
        except (LookupError, TypeError, ValueError) as exc:
            raise StateStoreError("load", "corrupt", detail=type(exc).__name__) from None
        self.restored = True
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
            result = replace(result, enabled=self.sink.enable_receivers())
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
            await self.bridge.lifecycle.release_all(ReleaseCause.SHUTDOWN)
        elif self.bridge.reads.live_members():
            _log.info(
                "stopping with %d members kept running: the next start adopts them",
                len(self.bridge.reads.live_members()),
            )
        await self.bridge.outbox.flush()  # a last try for what waits in memory
        held = self.bridge.reads.unpublished
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
