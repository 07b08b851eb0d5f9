"""Assembling one :class:`~fleetd.health.snapshot.FleetSnapshot` from the live service.

The herdr side is exactly one ``agent.list`` (plus a ping only when that list failed or an
expected lead is missing from it); the bridge side is read from memory: sessions, open turns,
tickets, the leads' inbox statistics and push outcomes, the inbox's redacted decode failures, and
the pane reads the previous tick asked for. The push loop's outcomes per lead (the status it
last read, its last error, nudges and heartbeats) travel on each lead's view. Each lead's inbox
is read once: what the lead can collect becomes its backlog (entries held for a decode failure
are not: they are their own incident), and each waiting reply is counted on the member that
wrote it.
Only codes, names, counts, times and digests go into the snapshot — never pane text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from itertools import compress
from operator import attrgetter, is_not

from fleetd.bridge.backlog import member_backlogs, read_lead_stats
from fleetd.bridge.push import PushLoop
from fleetd.bridge.service import Bridge
from fleetd.bridge.view import health_settings, profile_inputs
from fleetd.config import FleetdConfig
from fleetd.errors import HerdrError
from fleetd.health.snapshot import (
    FleetSnapshot,
    InboxFailureView,
    InboxKind,
    InboxView,
    LeadView,
    LiveAgent,
    LiveStatus,
    LiveView,
    ProbeResult,
    RemoteLead,
)
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.inbox.failures import DecodeFailure, Disposition
from fleetd.inbox.records import InboxRecord, InboxStats, MessageKind

__all__ = ["SeenAgents", "take_snapshot"]


async def take_snapshot(
    *,
    control: AgentControl,
    bridge: Bridge,
    push: PushLoop,
    config: FleetdConfig,
    probes: Iterable[ProbeResult],
    targeted_errors: Mapping[str, str],
    mute_counts: Mapping[str, int],
    seen: SeenAgents,
    remote_leads: tuple[RemoteLead, ...] = (),
) -> FleetSnapshot:
    """Everything one tick of ``decide`` reads, with one fleet-wide herdr list; ``seen`` holds
    the health view of each agent the previous tick listed."""
    try:
        agents: tuple[AgentInfo, ...] = await control.list_agents()
        list_ok = True
    except HerdrError:
        agents, list_ok = (), False
    # the health view of each agent (most are the previous tick's), and the leads' terminals
    lead_agents = {lead.agent for lead in config.leads}
    live_agents = seen.health_view(agents, names=lead_agents)
    if list_ok:  # the stable gate of lost-boundary repair reads the same list
        bridge.repair.observe(seen.listed, moved=seen.moved)
    terminals = seen.terminals
    ping_ok: bool | None = None
    if not list_ok or not lead_agents <= terminals.keys():
        try:
            await control.ping()
            ping_ok = True
        except HerdrError:
            ping_ok = False
    live = LiveView(
        list_ok=list_ok,
        agents=live_agents,
        ping_ok=ping_ok,
        targeted_errors=dict(targeted_errors),
    )
    # A member whose readiness grace ended since the poller's last pass is released by the
    # bridge now, so this tick reads the bridge's loss (with the tickets it failed) instead of
    # racing it with health's own NEVER_READY rule at the same deadline.
    await bridge.lifecycle.check_readiness()
    stats = await read_lead_stats(bridge.inbox, [lead.name for lead in config.leads])
    sessions = bridge.reads.sessions()
    backlogs = member_backlogs(stats, sessions)
    members = bridge.view.tick_views(sessions, mute_counts=mute_counts, backlogs=backlogs)
    inboxes, leads = _leads(push, config, terminals, stats)
    return FleetSnapshot(
        live=live,
        members=members,
        leads=leads,
        inboxes=inboxes,
        probes=tuple(probes),
        config=health_settings(config),
        profiles=profile_inputs(config),
        inbox_failures=tuple(_failure(f) for f in bridge.inbox.failures()),
        unpublished_since=_oldest_health(bridge.reads.unpublished),
        remote_leads=remote_leads,
    )


def _oldest_health(held: Iterable[InboxRecord]) -> datetime | None:
    """When the oldest health record still waiting for the inbox was made (held oldest first)."""
    for record in held:
        if record.kind is MessageKind.HEALTH and record.created_at_epoch_millis is not None:
            return datetime.fromtimestamp(record.created_at_epoch_millis / 1000, UTC)
    return None


def _failure(failure: DecodeFailure) -> InboxFailureView:
    """A decode failure as health sees it: codes, a safe id, counts and a time."""
    return InboxFailureView(
        key=failure.key,
        reason=failure.reason.value,
        message_id=failure.message_id,
        unsettled=failure.disposition is not Disposition.QUARANTINED,
        occurrences=failure.occurrences,
        last_seen_at=datetime.fromtimestamp(failure.last_seen_epoch_millis / 1000, UTC),
    )


def _status(value: str | None) -> LiveStatus | None:
    """The raw status the push loop last read, as health spells it (None if unknown to it)."""
    return LiveStatus(value) if value in frozenset(LiveStatus) else None


#: herdr's status as health spells it (looked up, not parsed: every agent, every tick).
_LIVE_STATUSES = {status: LiveStatus(status.value) for status in AgentStatus}


class SeenAgents:
    """The health view (:class:`~fleetd.health.snapshot.LiveAgent`) of each agent herdr listed,
    kept from one tick to the next by terminal id.

    Between two ticks of a large fleet almost every agent reads as before; its view is handed
    back as the same object when every field health reads is equal, instead of being built again.
    The client hands back an unchanged agent as the previous list's very object
    (:class:`~fleetd.herdr.agent_list.AgentListDecoder`), so when the list has the previous one's
    length only the positions holding a new object are looked at: the rest keep their view.
    Views of terminals herdr stopped listing are dropped, so what is kept is bounded by the list.
    The same pass indexes the list by terminal id (:attr:`listed`), which the bridge's
    observation of open turns reads.
    """

    __slots__ = ("_agents", "_kept", "_names", "_views", "listed", "moved", "terminals")

    def __init__(self) -> None:
        self._kept: dict[str, LiveAgent] = {}
        self._agents: tuple[AgentInfo, ...] = ()  # the last list, as it came
        self._views: list[LiveAgent] = []  # its views, position by position
        self._names: frozenset[str] = frozenset()  # the names asked for, last list
        self.listed: dict[str, AgentInfo] = {}  # the last list, by terminal id
        self.terminals: dict[str, str] = {}  # the terminal of each name asked for, last list
        #: The agents of the last list that are new objects at a position which kept its terminal
        #: and name; ``None`` when the list was indexed afresh (anything may have moved).
        self.moved: list[AgentInfo] | None = None

    def health_view(
        self, agents: Iterable[AgentInfo], *, names: Collection[str] = ()
    ) -> tuple[LiveAgent, ...]:
        """The health view of ``agents``, in order; also indexes them by terminal
        (:attr:`listed`) and notes the terminal of each agent named in ``names``
        (:attr:`terminals`; the last one listed under a name wins).

        When only agents at positions that kept their terminal and name changed (a status moved,
        say), the index is updated in place at those terminals and the named terminals stand: at
        ten thousand agents, reading each agent again costs more than the rest of this pass."""
        agents = tuple(agents)
        before = self._agents
        asked = frozenset(names)
        if len(agents) == len(before):
            views = list(self._views)
            changed: list[int] = list(compress(range(len(agents)), map(is_not, agents, before)))
        else:
            views = [_NO_VIEW] * len(agents)
            changed = list(range(len(agents)))
        kept = self._kept
        previous, statuses = kept.get, _LIVE_STATUSES
        for position in changed:
            agent = agents[position]
            status = statuses[agent.agent_status]
            view = previous(agent.terminal_id)
            if (
                view is None
                or view.state_change_seq != agent.state_change_seq
                or view.status is not status
                or view.name != agent.name
                or view.pane_id != agent.pane_id
                or view.kind != agent.agent
            ):
                view = LiveAgent(
                    name=agent.name,
                    pane_id=agent.pane_id,
                    terminal_id=agent.terminal_id,
                    status=status,
                    state_change_seq=agent.state_change_seq,
                    kind=agent.agent,
                )
                kept[agent.terminal_id] = view
            views[position] = view
        listed = self.listed
        in_place = (
            len(agents) == len(before) == len(listed)  # aligned, and no terminal listed twice
            and asked == self._names
            and all(
                agents[p].terminal_id == before[p].terminal_id and agents[p].name == before[p].name
                for p in changed
            )
        )
        if in_place:
            self.moved = moved = [agents[position] for position in changed]
            for agent in moved:  # a key kept keeps its place: the order is the list's
                listed[agent.terminal_id] = agent
        else:
            self.moved = None
            self.listed = listed = dict(zip(map(_TERMINAL, agents), agents, strict=True))
            self.terminals = {
                agent.name: agent.terminal_id
                for agent in compress(agents, map(asked.__contains__, map(_NAME, agents)))
                if agent.name is not None
            }
        self._agents, self._views, self._names = agents, views, asked
        if len(kept) > len(listed) + _SLACK:
            self._kept = {terminal: view for terminal, view in kept.items() if terminal in listed}
        return tuple(views)


_TERMINAL, _NAME = attrgetter("terminal_id"), attrgetter("name")
_NO_VIEW = LiveAgent(name=None, pane_id="", terminal_id="", status=LiveStatus.UNKNOWN)


#: Views kept beyond the agents listed before those of unlisted terminals are dropped.
_SLACK = 64


def _leads(
    push: PushLoop,
    config: FleetdConfig,
    terminals: Mapping[str, str],
    all_stats: dict[str, InboxStats],
) -> tuple[tuple[InboxView, ...], tuple[LeadView, ...]]:
    inboxes: list[InboxView] = []
    leads: list[LeadView] = []
    for lead in config.leads:
        outcome = push.outcomes.get(lead.name)
        stats = all_stats.get(lead.name)
        depth = stats.actionable if stats else 0
        oldest = (
            datetime.fromtimestamp(stats.oldest_created_epoch_millis / 1000, UTC)
            if stats and stats.oldest_created_epoch_millis is not None
            else None
        )
        kinds = tuple(
            InboxKind(kind.value)
            for kind in (MessageKind.REPLY, MessageKind.HEALTH)
            if stats and stats.by_kind.get(kind)
        )
        cap_reached = outcome is not None and outcome.cap_reached_at is not None
        inboxes.append(
            InboxView(
                key=lead.name,
                depth=depth,
                oldest_created_at=oldest,
                kinds=kinds,
                push_cap_reached=cap_reached,
            )
        )
        leads.append(
            LeadView(
                name=lead.name,
                agent_name=lead.agent,
                terminal_id=terminals.get(lead.agent),
                actionable_waiting=depth,
                oldest_actionable_at=oldest,
                nudges_sent=outcome.nudges_for_head if outcome else 0,
                nudge_cap_reached_at=outcome.cap_reached_at if outcome else None,
                push_status=_status(outcome.last_status) if outcome else None,
                last_push_error=outcome.last_error if outcome else None,
                last_nudge_at=outcome.last_nudge_at if outcome else None,
                last_heartbeat_at=outcome.last_heartbeat_at if outcome else None,
            )
        )
    return tuple(inboxes), tuple(leads)
