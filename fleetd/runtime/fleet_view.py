"""``fleet_list``: the one view of the whole fleet.

It joins the control link, herdr's live agents (as last listed, no herdr call of its own:
:mod:`~fleetd.runtime.live_agents`), the bridge's sessions and capacity, orphans a previous run
left running (state ``orphaned``), the leads and their push outcomes, inbox decode failures and
records held in memory for an unreachable inbox (counts), the config status, the outbound
dependencies (:mod:`fleetd.runtime.dependencies`) and — once the health monitor runs — member and
lead health, open incidents and ``healthCoverage``. Never pane content, prompts, replies, tokens
or URLs. Preserved worktrees (paths included) are shown to leads only. A lead sees its own
members, and of the inbox only its own key's decode failures and held records; the operator sees
the whole fleet.

A view is cut in two steps: :meth:`FleetViewBuilder.facts` reads everything once (one inbox
statistics read per lead, the manifests through a :class:`~fleetd.bridge.manifests.ManifestShelf`),
and :meth:`FleetViewBuilder.scoped` cuts each caller's part from those facts without reading
anything again. Every age in a view (``stateAgeSeconds``, ``idleForSeconds``, incident ages,
``agentsAgeSeconds``) is as of its ``generatedAt``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import is_
from pathlib import Path
from typing import Any, Literal

from fleetd.bridge.answers import CapacityRow, WireModel, wire
from fleetd.bridge.backlog import MemberBacklog, member_backlogs, read_lead_stats
from fleetd.bridge.manifests import ManifestShelf
from fleetd.bridge.push import PushLoop, PushOutcome
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import Session
from fleetd.config import ConfigRef, LeadConfig
from fleetd.errors import HerdrError
from fleetd.health.audience import lead_may_see
from fleetd.health.snapshot import MemberView
from fleetd.identity import Caller, Role
from fleetd.inbox.failures import DecodeFailure
from fleetd.inbox.records import InboxRecord
from fleetd.runtime.dependencies import DependencyView
from fleetd.runtime.fleet_models import (
    ConfigStatus,
    ControlLink,
    FleetListResult,
    FleetMember,
    HeldInMemory,
    InboxBlock,
    LeadHealth,
    LeadRow,
    OpenIncident,
    OrphanMember,
    PreservedWorktreeRow,
)
from fleetd.runtime.fleet_parts import failure_row, orphan_row, preserved_rows
from fleetd.runtime.health_views import FleetHealthPart
from fleetd.runtime.link import LinkState
from fleetd.runtime.live_agents import LiveAgents
from fleetd.runtime.monitor import FleetHealthMonitor

__all__ = ["FleetFacts", "FleetReading", "FleetViewBuilder", "InboxComponent"]

VIEW_VERSION = 1


class InboxComponent(WireModel):
    """The ``inbox`` component of ``/healthz``: counts only, never content (see
    :meth:`FleetViewBuilder.inbox_component` for when it warns or fails)."""

    status: Literal["pass", "warn", "fail"]
    reachable: bool
    backend: str
    held_in_memory: HeldInMemory
    decode_failures: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetFacts:
    """Everything the views of one version are cut from, read once at ``now``.

    ``members`` and ``orphans`` are ``(owner, agent name, row)``; ``leads`` holds each configured
    lead with its push outcome, health row and live status; ``preserved`` worktrees by owner.
    """

    version: int
    now: datetime
    agents: list[dict[str, Any]] | None
    agents_listed_at: datetime | None
    control_link: ControlLink
    members: tuple[tuple[str, str, dict[str, Any]], ...]
    orphans: tuple[tuple[str, str, OrphanMember], ...]
    capacity: list[CapacityRow]
    leads: tuple[tuple[LeadConfig, PushOutcome | None, LeadHealth | None, str | None], ...]
    failures: tuple[DecodeFailure, ...]
    held: tuple[InboxRecord, ...]
    reachable: bool
    teardown_failures: list[str]
    config: ConfigStatus
    health: FleetHealthPart | None
    preserved: dict[str, list[PreservedWorktreeRow]]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetReading:
    """What the member rows of one version are made of, read once at ``now``: the sessions in
    order, their member views, herdr's last status of each agent, the replies waiting."""

    now: datetime
    sessions: list[Session]
    views: list[MemberView]
    statuses: dict[str, str]
    backlogs: dict[str, MemberBacklog]


@dataclass(slots=True, kw_only=True)
class FleetViewBuilder:
    """Builds ``fleet_list``: the facts of one version once (:meth:`facts`), then each caller's
    part of them (:meth:`scoped`). :meth:`change_key` says cheaply whether a new build would
    differ; :class:`~fleetd.runtime.fleet_versions.FleetViews` keeps the versions."""

    bridge: Bridge
    link: LinkState
    config: ConfigRef
    push: PushLoop
    manifest_root: Path
    health: FleetHealthMonitor | None = None
    dependencies: DependencyView | None = None
    agents: LiveAgents = field(default_factory=LiveAgents)
    manifests: ManifestShelf = field(init=False)
    # the last version's live member views, capacity inputs and capacity rows (see _capacity)
    _kept_capacity: tuple[list[MemberView], object, list[CapacityRow]] | None = field(
        default=None, init=False
    )

    def __post_init__(self) -> None:
        self.manifests = ManifestShelf(self.manifest_root)

    async def build(self, caller: Caller) -> dict[str, Any]:
        """One caller's view from facts read now, outside any version (``viewVersion`` 0)."""
        return self.scoped(await self.facts(0), caller)

    async def facts(self, version: int) -> FleetFacts:
        """Read what every scope's view shows: herdr's agents as last seen (no herdr call), the
        inbox statistics (once per lead), the sessions, orphans, health, config and manifests."""
        return (await self.read(version, rows=True))[0]

    async def read(self, version: int, *, rows: bool) -> tuple[FleetFacts, FleetReading]:
        """:meth:`facts`, and what the member rows are made of. Without ``rows`` the facts hold
        no member rows: the caller makes them from the reading (the encoded view,
        :mod:`fleetd.runtime.fleet_body`, keeps them between versions)."""
        now = self.bridge.clock.now()
        statuses, ok = self.agents.statuses(), self.agents.list_ok
        stats = await read_lead_stats(
            self.bridge.inbox, [lead.name for lead in self.config.current.leads]
        )
        sessions = self.bridge.reads.sessions()
        backlogs = member_backlogs(stats, sessions)
        views = self.bridge.view.version_views(sessions, backlogs=backlogs)  # the moved only
        preserved = await asyncio.to_thread(self.manifests.load)
        reading = FleetReading(
            now=now, sessions=sessions, views=views, statuses=statuses, backlogs=backlogs
        )
        facts = FleetFacts(
            version=version,
            now=now,
            agents=self.agents.rows(),
            agents_listed_at=self.agents.listed_at,
            control_link=self.health.link_view(self.link) if self.health else self.link.view(),
            members=tuple(
                (s.owner, s.name, self.member_row(s, now, statuses, backlogs, view))
                for s, view in zip(sessions, views, strict=True)
            )
            if rows
            else (),
            orphans=tuple(
                (o.mark.owner, o.mark.name, orphan_row(o, now, statuses))
                for o in self.bridge.orphans.members()
            ),
            capacity=self._capacity(sessions, views, now),
            leads=tuple(
                (
                    lead,
                    self.push.outcomes.get(lead.name),
                    self.health.lead_health(lead.name) if self.health is not None else None,
                    _lead_status(self.push.outcomes.get(lead.name), statuses.get(lead.agent), ok),
                )
                for lead in self.config.current.leads
            ),
            failures=tuple(self.bridge.inbox.failures()),
            held=tuple(self.bridge.reads.unpublished),
            reachable=self.bridge.inbox.reachable(),
            teardown_failures=list(self.bridge.teardown_failures),
            config=self._config_status(),
            health=self.health.view() if self.health is not None else None,
            preserved=preserved_rows(preserved.manifests),
        )
        return facts, reading

    def _capacity(
        self, sessions: list[Session], views: list[MemberView], now: datetime
    ) -> list[CapacityRow]:
        """The capacity rows of ``views``: those of the last version when every live member's
        view is the very same object (a view is a frozen value, made again when its member
        moved) and the profiles' caps and benches and the orphans are as they were — most
        versions of a busy fleet move a herdr status or a member's row, not its view."""
        bridge = self.bridge.view
        live = [v for s, v in zip(sessions, views, strict=True) if s.live]
        inputs = (
            bridge.profile_inputs(now),
            tuple((o.profile, o.session_state) for o in self.bridge.orphans.members()),
        )
        kept = self._kept_capacity
        if (
            kept is not None
            and kept[1] == inputs
            and len(kept[0]) == len(live)
            and all(map(is_, kept[0], live))
        ):
            return kept[2]
        rows = bridge.capacity_view(None, live, now=now)
        self._kept_capacity = (live, inputs, rows)
        return rows

    def scoped(self, facts: FleetFacts, caller: Caller) -> dict[str, Any]:
        """What ``caller`` sees of ``facts``: the operator everything, a lead its own part."""
        operator = caller.role is Role.OPERATOR
        members = [row for owner, _, row in facts.members if operator or owner == caller.name]
        orphans = [wire(row) for owner, _, row in facts.orphans if operator or owner == caller.name]
        live = facts.agents
        if not operator:
            seen = {
                name for owner, name, _ in (*facts.members, *facts.orphans) if owner == caller.name
            }
            seen |= {lead.agent for lead, *_ in facts.leads}
            live = None if live is None else [a for a in live if a["name"] in seen]
        listed = facts.agents_listed_at
        capacity = facts.capacity
        if self.dependencies is not None:  # each profile's effective context window
            capacity = self.dependencies.decorate_capacity(capacity, facts.now)
        shown: dict[str, object] = {}  # the blocks a view has only when their part is there
        if (health := facts.health) is not None:
            shown["health"] = health.block
            shown["incidents"] = [i for i in health.incidents if _sees_incident(caller, i)]
            shown["health_coverage"] = health.coverage
        if self.dependencies is not None:  # outbound endpoints, providers, model benches
            shown["dependencies"] = self.dependencies.view(facts.now)
        if caller.role is Role.LEAD:
            shown["preserved_worktrees"] = facts.preserved.get(caller.name, [])
        result = FleetListResult.of(
            version=VIEW_VERSION,
            view_version=facts.version,
            generated_at=facts.now.isoformat(),
            agents_listed_at=listed.isoformat() if listed else None,
            agents_age_seconds=round((facts.now - listed).total_seconds(), 3) if listed else None,
            control_link=facts.control_link,
            agents=None,  # the rows, kept as their wire JSON, are put in below
            members=[],
            capacity=capacity,
            leads=self._leads(caller, facts),
            inbox=self._inbox(caller, facts),
            teardown_failures=facts.teardown_failures,
            config=facts.config,
            **shown,
        )
        view = wire(result)
        view["agents"] = live
        view["members"] = members + orphans
        return view

    def change_key(self) -> tuple[object, ...]:
        """Everything :meth:`facts` reads, counted cheaply: an unchanged key means an unchanged
        view but for its ages. The bridge's revision counts its sessions and tickets; health moves
        with each tick; herdr's agents with each list or changed status; dependencies with their
        events, not with each answered call."""
        link, bridge, status = self.link, self.bridge, self.config.status
        failures = bridge.inbox.failures()
        return (
            bridge.reads.revision,
            self.agents.revision,
            link.status,
            link.consecutive_failures,
            link.last_failure_code,
            link.herdr_version,
            (self.health.enabled, self.health.ticks) if self.health is not None else None,
            tuple(
                (o.depth, o.nudges_for_head, o.cap_reached_at, o.last_status)
                for o in self.push.outcomes.values()
            ),
            len(bridge.reads.unpublished),
            bridge.reads.held_dropped,
            bridge.reads.drains,
            bridge.inbox.reachable(),
            len(failures),
            sum(f.occurrences for f in failures),
            tuple(o.mark.session_id for o in bridge.orphans.members()),
            status.loaded_at,
            status.reload_failures,
            status.last_error_key,
            self.dependencies.change_key(self.bridge.clock.now()) if self.dependencies else None,
        )

    async def refresh_agents(self, older_than: timedelta) -> None:
        """List herdr's agents unless a list younger than ``older_than`` is known (the health
        tick and the orphans check list too); the observer records the answer or the failure."""
        listed = self.agents.listed_at
        if self.agents.list_ok and listed and self.bridge.clock.now() - listed < older_than:
            return
        with contextlib.suppress(HerdrError):
            await self.bridge.control.list_agents()

    def inbox_component(self) -> InboxComponent:
        """The nested ``inbox`` component of ``/healthz``: counts only, never content.

        ``fail`` while the inbox is known to be unreachable (replies are refused, polls answer
        ``inbox_unavailable``); ``warn`` while a record waits in memory for the inbox (a kill
        would lose it) or an entry could not be decoded.
        """
        held = self._held(self.bridge.reads.unpublished)
        failures = self.bridge.inbox.failures()
        reachable = self.bridge.inbox.reachable()
        status = "fail" if not reachable else "warn" if held.records or failures else "pass"
        return InboxComponent.of(
            status=status,
            reachable=reachable,
            backend=self.config.current.inbox.backend.value,
            held_in_memory=held,
            decode_failures=len(failures),
        )

    def _inbox(self, caller: Caller, facts: FleetFacts) -> InboxBlock:
        """Reachability, decode failures and records held in memory. A lead's figures are its
        own key's (another lead's counts are theirs to see); the operator sees every key."""
        failures: Sequence[DecodeFailure] = facts.failures
        held: Sequence[InboxRecord] = facts.held
        if caller.role is not Role.OPERATOR:
            failures = [f for f in failures if f.key == caller.name]
            held = [r for r in held if r.recipient_lead == caller.name]
        return InboxBlock.of(
            reachable=facts.reachable,
            failures=[failure_row(f) for f in failures],
            held_in_memory=self._held(held),
        )

    def _held(self, held: Sequence[InboxRecord]) -> HeldInMemory:
        """Records accepted for a lead that the inbox has not taken yet (they live in memory).

        ``gaveWay`` counts the records that gave way to the bound, which all leads share.
        """
        created = [r.created_at_epoch_millis for r in held if r.created_at_epoch_millis]
        return HeldInMemory.of(
            records=len(held),
            by_lead=dict(sorted(Counter(r.recipient_lead for r in held).items())),
            by_kind=dict(sorted(Counter(r.kind.value for r in held).items())),
            oldest_created_epoch_millis=min(created) if created else None,
            gave_way=self.bridge.reads.held_dropped,
        )

    def member_row(
        self,
        session: Session,
        now: datetime,
        statuses: dict[str, str],
        backlogs: dict[str, MemberBacklog],
        view: MemberView,
    ) -> dict[str, Any]:
        """One member's row, built as :class:`FleetMember`, as its wire JSON (a fresh dict: the
        encoded view leaves its ages open in it)."""
        fields = self.bridge.view.session_fields(
            session, now=now, backlog=backlogs.get(session.session_id), view=view
        )
        if session.live and session.name in statuses:
            fields["live_status"] = statuses[session.name]  # herdr's last word on the agent
        if self.health is not None:
            fields["health"] = self.health.member_health(session.session_id)
        return wire(FleetMember.of(**fields))

    def _leads(self, caller: Caller, facts: FleetFacts) -> list[LeadRow]:
        """Every configured lead; a lead sees its own push and inbox counts and the foreign
        incidents it holds, of a peer only its name, agent, herdr status (``liveStatus``, see
        :func:`_lead_status`) and health with the count of foreign incidents it holds (§7.4)."""
        rows = []
        for lead, outcome, lead_health, live_status in facts.leads:
            fields: dict[str, object] = {}
            own = caller.role is Role.OPERATOR or caller.name == lead.name
            if own:
                fields["inbox_depth"] = outcome.depth if outcome else None
                fields["nudges_for_head"] = outcome.nudges_for_head if outcome else 0
                fields["nudge_cap_reached"] = bool(outcome and outcome.cap_reached_at)
            if self.health is not None:
                health = lead_health
                if health is not None and not own:  # a peer sees the count, not the incidents
                    health = LeadHealth.of(
                        state=health.state,
                        age_seconds=health.age_seconds,
                        assigned_foreign_incidents=health.assigned_foreign_incidents,
                    )
                fields["health"] = health
            rows.append(
                LeadRow.of(name=lead.name, agent=lead.agent, live_status=live_status, **fields)
            )
        return rows

    def _config_status(self) -> ConfigStatus:
        status = self.config.status
        return ConfigStatus.of(
            loaded_at=status.loaded_at.isoformat(),
            last_reload_error_key=status.last_error_key,
            last_reload_error_reason=status.last_error_reason,
            pending_restart_keys=list(status.pending_restart_keys),
            reload_failures=status.reload_failures,
        )


def _sees_incident(caller: Caller, incident: OpenIncident) -> bool:
    """The operator sees every incident; a lead what :func:`lead_may_see` allows (the rule
    ``GET /v1/incidents`` follows too)."""
    if caller.role is Role.OPERATOR:
        return True
    return lead_may_see(
        caller.name,
        scope=incident.scope,
        subject=incident.subject,
        owner=incident.owner,
        recipient=incident.recipient,
    )


def _lead_status(outcome: PushOutcome | None, listed: str | None, list_ok: bool) -> str | None:
    """The lead's status in herdr's last list (None if unlisted); with no list, the push's read."""
    return listed if list_ok else outcome.last_status if outcome else None
