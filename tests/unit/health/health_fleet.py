"""Builders and a tick driver for the pure health tests.

Every builder returns a plain snapshot value with sensible healthy defaults, so a test states only
what its case is about. :class:`Run` feeds snapshots to ``decide`` one tick at a time, carrying
the returned state forward exactly as the runtime monitor does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from fleetd.health import (
    Decision,
    Effect,
    FleetSnapshot,
    HealthSettings,
    HealthState,
    InboxFailureView,
    InboxView,
    LeadState,
    LeadView,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberState,
    MemberView,
    OpenIncident,
    OpenTurn,
    ProbeResult,
    ProfileCapacityInput,
    RemoteLead,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    SessionState,
    decide,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(seconds=30)
E = TypeVar("E")


def turn(
    token: str = "tok-1",
    number: int = 1,
    *,
    at: datetime = T0,
    delivered: bool = True,
    waiter_open: bool = True,
) -> OpenTurn:
    return OpenTurn(
        token=token,
        number=number,
        accepted_at=at,
        delivered_at=at if delivered else None,
        waiter_open=waiter_open,
    )


def member(
    name: str = "m1",
    *,
    state: SessionState = SessionState.READY,
    session_id: str | None = None,
    profile: str = "sonnet",
    owner: str | None = "lead-a",
    presence: bool = True,
    terminal: str | None = "",
    since: datetime = T0,
    spawned_at: datetime = T0,
    **fields: Any,
) -> MemberView:
    return MemberView(
        session_id=session_id or f"s-{name}",
        name=name,
        profile=profile,
        session_state=state,
        state_since=since,
        spawned_at=spawned_at,
        terminal_id=f"term_{name}" if terminal == "" else terminal,
        owner_lead=owner,
        presence=presence,
        **fields,
    )


def agent(
    name: str,
    status: LiveStatus = LiveStatus.IDLE,
    *,
    seq: int = 0,
    terminal: str | None = None,
    pane: str | None = None,
) -> LiveAgent:
    return LiveAgent(
        name=name,
        pane_id=pane or f"w1:p-{name}",
        terminal_id=terminal or f"term_{name}",
        status=status,
        state_change_seq=seq,
    )


def lead(name: str = "lead-a", **fields: Any) -> LeadView:
    return LeadView(name=name, agent_name=name, terminal_id=f"term_{name}", **fields)


LEAD = lead()
LEAD_AGENT = agent("lead-a")


def live(
    *agents: LiveAgent,
    targeted: dict[str, str] | None = None,
    ping: bool | None = None,
    with_lead: bool = True,
) -> LiveView:
    listed = (*agents, LEAD_AGENT) if with_lead else agents
    return LiveView(list_ok=True, agents=listed, ping_ok=ping, targeted_errors=targeted or {})


def failed_list(*, ping: bool | None) -> LiveView:
    return LiveView(list_ok=False, ping_ok=ping)


def inbox(key: str, depth: int = 1, *, capped: bool = False) -> InboxView:
    return InboxView(key=key, depth=depth, oldest_created_at=T0, push_cap_reached=capped)


def probe(target: str, source: Any, **fields: Any) -> ProbeResult:
    return ProbeResult(target=target, source=source, ok=fields.pop("ok", True), **fields)


@dataclass
class Run:
    """Feeds snapshots to ``decide`` tick after tick."""

    settings: HealthSettings = field(default_factory=HealthSettings)
    now: datetime = T0
    state: HealthState = field(default_factory=HealthState)
    last: Decision | None = None
    history: list[Decision] = field(default_factory=list)

    def tick(
        self,
        live_view: LiveView,
        members: Iterable[MemberView] = (),
        *,
        leads: Iterable[LeadView] = (LEAD,),
        inboxes: Iterable[InboxView] = (),
        probes: Iterable[ProbeResult] = (),
        profiles: Iterable[ProfileCapacityInput] = (),
        advance: timedelta = TICK,
        settings: HealthSettings | None = None,
        inbox_failures: Iterable[InboxFailureView] = (),
        unpublished_since: datetime | None = None,
        remote_leads: Iterable[RemoteLead] = (),
    ) -> Decision:
        self.now += advance
        snapshot = FleetSnapshot(
            live=live_view,
            members=tuple(members),
            leads=tuple(leads),
            inboxes=tuple(inboxes),
            probes=tuple(probes),
            config=settings or self.settings,
            profiles=tuple(profiles),
            inbox_failures=tuple(inbox_failures),
            unpublished_since=unpublished_since,
            remote_leads=tuple(remote_leads),
        )
        self.last = decide(snapshot, self.state, self.now)
        self.state = self.last.state
        self.history.append(self.last)
        return self.last

    def member(self, session_id: str = "s-m1") -> MemberState:
        return self.state.members[session_id].state

    def lead(self, name: str = "lead-a") -> LeadState:
        return self.state.leads[name].state

    def effects(self, kind: type[E]) -> list[E]:
        assert self.last is not None
        return [e for e in self.last.effects if isinstance(e, kind)]

    def all_effects(self, kind: type[E]) -> list[E]:
        return [e for d in self.history for e in d.effects if isinstance(e, kind)]

    def opened(self) -> list[str]:
        return [e.incident.state for e in self.effects(OpenIncident)]

    def answers(self, **fields: Any) -> tuple[ProbeResult, ...]:
        """Successful results for every read the last tick requested (``fields`` per result)."""
        return tuple(
            ProbeResult(target=e.target, source=e.source, ok=True, **fields)
            for e in self.effects(RequestPaneProbe)
        )

    def reads(self) -> int:
        return len(self.effects(RequestPaneProbe)) + len(self.effects(RequestLostBoundaryRepair))


def reads_in(effects: Iterable[Effect]) -> int:
    return sum(isinstance(e, RequestPaneProbe | RequestLostBoundaryRepair) for e in effects)
