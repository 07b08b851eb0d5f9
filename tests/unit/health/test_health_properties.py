"""Invariants of ``decide`` over generated fleets (hypothesis)."""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetd.health.members as members_module
from fleetd.health import (
    Decision,
    FleetSnapshot,
    HealthSettings,
    HealthState,
    LeadView,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberView,
    ProbeResult,
    ProbeSource,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    SessionState,
    WorktreeFacts,
    decide,
)
from fleetd.health.settings import Effective
from tests.unit.health.health_fleet import T0, agent, inbox, lead, member, turn

S, L = SessionState, LiveStatus
_T = TypeVar("_T")
SECONDS = st.integers(min_value=0, max_value=4000).map(lambda s: timedelta(seconds=s))

settings_strategy = st.builds(
    HealthSettings,
    snapshot_interval=SECONDS,
    working_suspect_after=SECONDS,
    pane_probe_interval=SECONDS,
    lead_unresponsive_after=SECONDS,
    capacity_long_idle_after=SECONDS,
    readiness_grace=SECONDS,
)


@dataclass(frozen=True)
class Tick:
    """One generated tick: a snapshot and how far the clock moved."""

    advance: timedelta
    snapshot: FleetSnapshot


def _member(
    draw: st.DrawFn, name: str, now_offset: timedelta
) -> tuple[MemberView, LiveAgent | None]:
    state = draw(st.sampled_from(list(S)))
    has_turn = state is S.BUSY or draw(st.booleans())
    token = draw(st.sampled_from(["tok-a", "tok-b"]))
    view = member(
        name,
        state=state,
        presence=draw(st.booleans()),
        owner=draw(st.sampled_from([None, "lead-a", "lead-b", "lead-x"])),
        profile=draw(st.sampled_from(["opus", "sonnet"])),
        turn=turn(
            token,
            at=T0 + now_offset - draw(SECONDS),
            delivered=draw(st.booleans()),
            waiter_open=draw(st.booleans()),
        )
        if has_turn
        else None,
        queued_sends=draw(st.integers(0, 2)),
        pending_tasks=draw(st.integers(0, 2)),
        uncollected_replies=draw(st.integers(0, 2)),
        mute_events=draw(st.sampled_from([0, 0, 0, 0, 0, 1, 3])),
        since=T0 + now_offset - draw(SECONDS),
        spawned_at=T0 - draw(SECONDS),
        worktree=draw(st.sampled_from([None, WorktreeFacts(commits_ahead=2)])),
    )
    status = draw(st.sampled_from([None, *L]))
    live_agent = None if status is None else agent(name, status, seq=draw(st.integers(0, 2)))
    return view, live_agent


@st.composite
def runs(
    draw: st.DrawFn, *, max_members: int = 8, max_ticks: int = 8, repeats: int = 1
) -> list[Tick]:
    """A sequence of arbitrary (not necessarily healthy) fleet snapshots.

    With ``repeats`` above one, each snapshot may be seen again on a few later ticks, so that
    steady members (and the shortcut that serves them) appear.
    """
    names = [f"m{i}" for i in range(draw(st.integers(0, max_members)))]
    config = draw(settings_strategy)
    ticks, offset = [], timedelta(0)
    for _ in range(draw(st.integers(1, max_ticks))):
        advance = timedelta(seconds=draw(st.integers(1, 900)))
        offset += advance
        list_ok = draw(st.booleans().map(lambda b: b or draw(st.booleans())))
        pairs = [_member(draw, name, offset) for name in names if draw(st.integers(0, 9))]
        members = tuple(view for view, _ in pairs)
        agents = tuple(a for _, a in pairs if a is not None)
        leads: tuple[LeadView, ...] = (
            lead("lead-a", actionable_waiting=draw(st.integers(0, 1)), nudge_cap_reached_at=T0),
            lead("lead-b"),
        )
        agents += tuple(
            agent(v.agent_name, draw(st.sampled_from(list(L))))
            for v in leads
            if draw(st.booleans())
        )
        targets = [v.name for v in members] + [v.agent_name for v in leads]
        errors = {
            t: draw(st.sampled_from(["agent_not_found", "timeout"]))
            for t in targets
            if not draw(st.integers(0, 6))
        }
        probes = tuple(
            ProbeResult(
                target=t,
                source=draw(st.sampled_from(list(ProbeSource))),
                ok=True,
                digest=draw(st.sampled_from(["d1", "d2"])),
                fatal_signature_id=draw(st.sampled_from([None, "claude.api_error_529"])),
            )
            for t in targets
            if not draw(st.integers(0, 3))
        )
        boxes = tuple(
            inbox(t, draw(st.integers(1, 3)), capped=draw(st.booleans()))
            for t in [*(v.name for v in leads), "orphan"]
            if not draw(st.integers(0, 4))
        )
        snapshot = FleetSnapshot(
            live=LiveView(
                list_ok=list_ok,
                agents=agents if list_ok else (),
                ping_ok=draw(st.sampled_from([None, True, False])),
                targeted_errors=errors if list_ok else {},
            ),
            members=members,
            leads=leads,
            inboxes=boxes,
            probes=probes,
            config=config,
        )
        ticks.append(Tick(advance=advance, snapshot=snapshot))
        for _ in range(draw(st.integers(0, repeats - 1))):
            again = timedelta(seconds=draw(st.integers(1, 400)))
            offset += again
            ticks.append(Tick(advance=again, snapshot=snapshot))
    return ticks


def replay(ticks: list[Tick], *, indexed: bool = True) -> list[Decision]:
    """Decisions tick by tick; without ``indexed`` no tick keeps a member index, so every
    member is stepped."""
    state, now, out = HealthState(), T0, []
    for tick in ticks:
        now += tick.advance
        decision = decide(tick.snapshot, state if indexed else replace(state, index=None), now)
        state = decision.state
        out.append(decision)
    return out


def reads(decision: Decision) -> list[str]:
    return [
        e.target
        for e in decision.effects
        if isinstance(e, RequestPaneProbe | RequestLostBoundaryRepair)
    ]


HEAVY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HEAVY
@given(runs())
def test_no_fleet_or_config_breaks_the_read_budget(ticks: list[Tick]) -> None:
    """At most two reads per tick, one per pane, and never the same pane within sixty seconds."""
    now = T0
    last_read: dict[str, datetime] = {}
    for tick, decision in zip(ticks, replay(ticks), strict=True):
        now += tick.advance
        targets = reads(decision)
        assert len(targets) <= 2
        assert len(set(targets)) == len(targets)
        for target in targets:
            if target in last_read:
                assert now - last_read[target] >= timedelta(seconds=60)
            last_read[target] = now


@given(settings_strategy)
def test_effective_settings_never_fall_below_a_floor(config: HealthSettings) -> None:
    """Every effective value is at least its floor and at least what config asked for."""
    eff = Effective.of(config)
    assert eff.pane_cooldown >= max(config.pane_probe_interval, timedelta(seconds=60))
    assert eff.working_suspect_after >= max(config.working_suspect_after, timedelta(seconds=300))
    assert eff.lead_unresponsive_after >= max(
        config.lead_unresponsive_after, timedelta(seconds=120)
    )
    assert eff.long_idle_after >= max(config.capacity_long_idle_after, timedelta(seconds=300))
    assert eff.readiness_grace >= max(config.readiness_grace, timedelta(seconds=10))


@HEAVY
@given(runs(), st.randoms(use_true_random=False))
def test_decide_is_deterministic_and_independent_of_input_order(
    ticks: list[Tick], rnd: random.Random
) -> None:
    """Shuffled members, agents, leads, inboxes and probes give the very same decisions, in
    which every open incident is routed and a lead's own incident never goes to that lead."""

    def shuffled(items: tuple[_T, ...]) -> tuple[_T, ...]:
        copy = list(items)
        rnd.shuffle(copy)
        return tuple(copy)

    permuted = []
    for tick in ticks:
        snap = tick.snapshot
        permuted.append(
            Tick(
                advance=tick.advance,
                snapshot=FleetSnapshot(
                    live=LiveView(
                        list_ok=snap.live.list_ok,
                        agents=shuffled(snap.live.agents),
                        ping_ok=snap.live.ping_ok,
                        targeted_errors=dict(reversed(list(snap.live.targeted_errors.items()))),
                    ),
                    members=shuffled(snap.members),
                    leads=shuffled(snap.leads),
                    inboxes=shuffled(snap.inboxes),
                    probes=shuffled(snap.probes),
                    config=snap.config,
                ),
            )
        )
    decisions = replay(ticks)
    assert decisions == replay(permuted)
    assert decisions == replay(ticks)
    for decision in decisions:  # and every open incident is routed, never to its lead subject
        for incident in decision.state.open_incidents():
            assert incident.assignment is not None
            assert incident.scope != "lead" or incident.recipient_lead != incident.subject


@st.composite
def healthy_runs(draw: st.DrawFn) -> list[Tick]:
    """Fleets with nothing wrong: idle members, quick turns, leads that are idle or briefly busy."""
    names = [f"m{i}" for i in range(draw(st.integers(0, 10)))]
    config = draw(settings_strategy)
    ticks, offset = [], timedelta(0)
    for index in range(draw(st.integers(1, 12))):
        advance = timedelta(seconds=draw(st.integers(15, 3600)))
        offset += advance
        members, agents = [], []
        for name in names:
            kind = draw(st.sampled_from(["idle", "done", "working", "spawning", "pending"]))
            if kind == "working":
                age = timedelta(seconds=draw(st.integers(0, 299)))
                view = member(
                    name,
                    state=S.BUSY,
                    turn=turn(f"tok-{index}", index + 1, at=T0 + offset - age),
                )
                status = L.WORKING
            elif kind == "spawning":
                view = member(name, state=S.SPAWNING, presence=False)
                status = L.UNKNOWN
            elif kind == "pending":
                view = member(name, state=S.READY, queued_sends=1)
                status = L.IDLE
            else:
                view = member(name, state=S.DONE if kind == "done" else S.READY)
                status = L.DONE if kind == "done" else L.IDLE
            members.append(view)
            agents.append(agent(name, status))
        lead_status = L.WORKING if index % 2 and draw(st.booleans()) else L.IDLE
        agents.append(agent("lead-a", lead_status))
        ticks.append(
            Tick(
                advance=advance,
                snapshot=FleetSnapshot(
                    live=LiveView(list_ok=True, agents=tuple(agents)),
                    members=tuple(members),
                    leads=(lead("lead-a"),),
                    config=config,
                ),
            )
        )
    return ticks


@HEAVY
@given(healthy_runs())
def test_a_healthy_fleet_never_causes_a_pane_read(ticks: list[Tick]) -> None:
    """Idle members, recent working members and quiet leads are never read, under any config."""
    for decision in replay(ticks):
        assert reads(decision) == []
        assert not any(type(e).__name__ == "OpenIncident" for e in decision.effects)


@st.composite
def calm_runs(draw: st.DrawFn) -> list[Tick]:
    """Mostly unchanging fleets: old turns, blocked and idle members, short ticks, no answers."""
    names = [f"m{i}" for i in range(draw(st.integers(1, 8)))]
    config = HealthSettings(
        working_suspect_after=timedelta(seconds=draw(st.integers(0, 900))),
        pane_probe_interval=timedelta(seconds=draw(st.integers(0, 120))),
    )
    ticks, offset = [], timedelta(0)
    for _ in range(draw(st.integers(1, 4))):
        views, agents = [], []
        for name in names:
            state = draw(st.sampled_from([S.BUSY, S.BUSY, S.READY, S.SPAWNING, S.FAILED]))
            started = T0 - timedelta(seconds=draw(st.integers(0, 1200)))
            views.append(
                member(
                    name,
                    state=state,
                    presence=state is not S.SPAWNING,
                    turn=turn(f"tok-{name}", at=started) if state is S.BUSY else None,
                    pending_tasks=draw(st.integers(0, 1)),
                    queued_sends=draw(st.integers(0, 1)),
                )
            )
            agents.append(agent(name, draw(st.sampled_from(list(L)))))
        snapshot = FleetSnapshot(
            live=LiveView(list_ok=True, agents=(*agents, agent("lead-a"))),
            members=tuple(views),
            leads=(lead("lead-a"),),
            config=config,
        )
        for _ in range(draw(st.integers(1, 8))):
            advance = timedelta(seconds=draw(st.integers(5, 90)))
            offset += advance
            ticks.append(Tick(advance=advance, snapshot=snapshot))
    return ticks


@HEAVY
@given(st.one_of(calm_runs(), runs(max_members=6, max_ticks=6, repeats=5)))
def test_the_steady_shortcut_never_changes_a_decision(ticks: list[Tick]) -> None:
    """Reusing prior evidence and asking only the members that could have changed gives exactly
    the decisions a full evaluation of every member would give."""
    shortcut = replay(ticks)
    member_pass = importlib.import_module("fleetd.health.member_pass")
    # member_pass imports step_member without re-exporting it; the test swaps that binding
    original = member_pass.step_member
    member_pass.step_member = members_module._step  # type: ignore[attr-defined]
    try:
        full = replay(ticks, indexed=False)
    finally:
        member_pass.step_member = original  # type: ignore[attr-defined]
    assert shortcut == full
