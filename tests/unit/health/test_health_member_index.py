"""The member index: a steady tick that asks only the members that could have changed decides
exactly what asking every member decides (hypothesis), and every mismatch takes the full pass."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetd.health.members as members_module
from fleetd.health import (
    Decision,
    FleetSnapshot,
    HealthSettings,
    HealthState,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberState,
    MemberView,
    ProbeResult,
    ProbeSource,
    SessionState,
    WorktreeFacts,
    decide,
)
from fleetd.health.member_index import MemberIndex
from tests.unit.health.health_fleet import LEAD, LEAD_AGENT, T0, agent, inbox, lead, member, turn

S, L = SessionState, LiveStatus
member_pass = importlib.import_module("fleetd.health.member_pass")
LEADS = (LEAD, lead("lead-b"))
LEAD_AGENTS = (LEAD_AGENT, agent("lead-b"))


@dataclass(frozen=True)
class Step:
    advance: timedelta
    snapshot: FleetSnapshot


def _view(draw: st.DrawFn, name: str, offset: timedelta, **keep: Any) -> MemberView:
    """An arbitrary view of member ``name`` (its identity fields from ``keep``)."""
    state = draw(st.sampled_from(list(S)))
    return member(
        name,
        state=state,
        owner=draw(st.sampled_from([None, "lead-a", "lead-b"])),
        profile=draw(st.sampled_from(["opus", "sonnet"])),
        presence=draw(st.booleans()),
        turn=turn(
            draw(st.sampled_from(["tok-a", "tok-b"])),
            at=T0 + offset - timedelta(seconds=draw(st.integers(0, 900))),
            delivered=draw(st.booleans()),
            waiter_open=draw(st.booleans()),
        )
        if state is S.BUSY or draw(st.booleans())
        else None,
        queued_sends=draw(st.integers(0, 1)),
        pending_tasks=draw(st.integers(0, 2)),
        uncollected_replies=draw(st.integers(0, 1)),
        mute_events=draw(st.sampled_from([0, 0, 0, 1])),
        since=T0 + offset - timedelta(seconds=draw(st.integers(0, 1200))),
        worktree=draw(st.sampled_from([None, WorktreeFacts(commits_ahead=1)])),
        **keep,
    )


def _agent(draw: st.DrawFn, name: str, terminal: str | None) -> LiveAgent:
    return agent(
        name,
        draw(st.sampled_from(list(L))),
        seq=draw(st.integers(0, 3)),
        terminal=terminal or f"term_{name}",
    )


@st.composite
def evolving_runs(draw: st.DrawFn) -> list[Step]:
    """A fleet whose members keep their positions while a few change each tick: new views (now
    and then one that changed its terminal), equal copies, agents that change, leave and come
    back, probes and errors naming members, push caps that flip, blind ticks, a member that
    joins, a config change, and clock steps short and long."""
    names = [f"m{i}" for i in range(draw(st.integers(1, 7)))]
    terminals: dict[str, str | None] = {
        name: draw(st.sampled_from([f"term_{name}", f"term_{name}", None])) for name in names
    }
    offset = timedelta(0)
    views = {name: _view(draw, name, offset, terminal=terminals[name]) for name in names}
    agents: dict[str, LiveAgent | None] = {
        name: _agent(draw, name, terminals[name]) for name in names
    }
    config = HealthSettings()
    caps = {"lead-a": False, "lead-b": False}
    steps = []
    for _ in range(draw(st.integers(2, 14))):
        offset += timedelta(seconds=draw(st.sampled_from([1, 5, 30, 30, 30, 120, 400, 900])))
        if not draw(st.integers(0, 12)):
            name = f"m{len(names)}"
            names.append(name)
            terminals[name] = f"term_{name}"
            views[name] = _view(draw, name, offset, terminal=terminals[name])
            agents[name] = _agent(draw, name, terminals[name])
        for name in names:
            action = draw(st.integers(0, 15))
            if action == 0:
                views[name] = _view(draw, name, offset, terminal=terminals[name])
            elif action == 1:
                views[name] = replace(views[name])
            elif action == 2:
                views[name] = replace(views[name], mute_events=1 - min(views[name].mute_events, 1))
            elif action == 3 and not draw(st.integers(0, 3)):
                terminals[name] = f"term_{name}_again"
                views[name] = replace(views[name], terminal_id=terminals[name])
            move = draw(st.integers(0, 11))
            if move == 0:
                agents[name] = _agent(draw, name, terminals[name])
            elif move == 1:
                agents[name] = None if agents[name] is not None else _agent(draw, name, None)
        if not draw(st.integers(0, 9)):
            flipped = draw(st.sampled_from(sorted(caps)))
            caps[flipped] = not caps[flipped]
        if not draw(st.integers(0, 15)):
            config = replace(config, working_suspect_after=timedelta(seconds=600))
        list_ok = bool(draw(st.integers(0, 9)))
        targets = draw(st.lists(st.sampled_from(names), max_size=2))
        listed = tuple(a for a in (agents[n] for n in names) if a is not None) + LEAD_AGENTS
        snapshot = FleetSnapshot(
            live=LiveView(
                list_ok=list_ok,
                agents=listed if list_ok else (),
                targeted_errors=dict.fromkeys(targets[:1], "timeout") if list_ok else {},
            ),
            members=tuple(views[n] for n in names),
            leads=LEADS,
            inboxes=tuple(inbox(key, capped=capped) for key, capped in sorted(caps.items())),
            probes=tuple(
                ProbeResult(
                    target=t,
                    source=draw(st.sampled_from(list(ProbeSource))),
                    ok=True,
                    digest=draw(st.sampled_from(["d1", "d2"])),
                    fatal_signature_id=draw(st.sampled_from([None, "claude.api_error_529"])),
                )
                for t in targets[1:]
            ),
            config=config,
        )
        steps.append(Step(advance=offset, snapshot=snapshot))
        for _ in range(draw(st.integers(0, 2))):  # the same snapshot again, later
            offset += timedelta(seconds=draw(st.sampled_from([30, 30, 300])))
            steps.append(Step(advance=offset, snapshot=snapshot))
    return steps


def replay(steps: list[Step], *, indexed: bool) -> list[Decision]:
    """Decisions tick by tick; without ``indexed`` each tick gets a state without its index, so
    every member is asked."""
    state, out = HealthState(), []
    for step in steps:
        decision = decide(
            step.snapshot, state if indexed else replace(state, index=None), T0 + step.advance
        )
        state = decision.state
        out.append(decision)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evolving_runs())
def test_asking_only_changed_members_decides_what_asking_every_member_decides(
    steps: list[Step],
) -> None:
    """Same effects in the same order and equal states, tick after tick."""
    for fast, full in zip(replay(steps, indexed=True), replay(steps, indexed=False), strict=True):
        assert fast.effects == full.effects
        assert fast.state == full.state
        assert fast.state.members == full.state.members


class Counted:
    """Counts the members ``decide`` asks (calls of ``step_member``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[str] = []
        original = members_module.step_member

        def counted(tick: Any, view: MemberView, prior: Any) -> Any:
            self.asked.append(view.session_id)
            return original(tick, view, prior)

        monkeypatch.setattr(member_pass, "step_member", counted)


def _fleet(size: int) -> tuple[list[MemberView], list[LiveAgent]]:
    return [member(f"m{i}") for i in range(size)], [agent(f"m{i}") for i in range(size)]


def _snapshot(views: list[MemberView], agents: list[LiveAgent], **fields: Any) -> FleetSnapshot:
    return FleetSnapshot(
        live=LiveView(list_ok=True, agents=(*agents, LEAD_AGENT)),
        members=tuple(views),
        leads=(LEAD,),
        **fields,
    )


def _settled(views: list[MemberView], agents: list[LiveAgent]) -> tuple[HealthState, int]:
    state, seconds = HealthState(), 0
    for _ in range(3):
        seconds += 30
        state = decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds)).state
    return state, seconds


def test_a_steady_tick_asks_only_the_members_whose_view_or_agent_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a steady tick only the members whose view or herdr agent changed are stepped; every other
    member keeps its prior state object."""
    views, agents = _fleet(50)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    views[7] = replace(views[7], pending_tasks=1)
    agents[31] = agent("m31", L.WORKING, seq=1)
    decision = decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 30))
    assert counted.asked == ["s-m7", "s-m31"]
    assert decision.state.members["s-m31"].raw_status is L.WORKING
    assert decision.state.members["s-m1"] is state.members["s-m1"]


def test_a_member_whose_recheck_time_came_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A member is not asked again before its recheck time; once that time comes it is, and an
    unchanged prior then means a full pass."""
    views, agents = _fleet(5)
    views[2] = member("m2", state=S.SPAWNING, presence=False, turn=turn(delivered=False))
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 1))
    assert counted.asked == []
    decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 300))
    assert counted.asked == [f"s-m{i}" for i in range(5)]  # the same prior again: full pass


def test_a_busy_member_with_its_task_pending_has_no_teardown_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A working member's pending task is the teardown invariant's cause only once the member is
    released or failed: while it works, the teardown grace is no time a rule waits for, so the
    member is not asked again when that grace has passed since it became busy."""
    views, agents = _fleet(3)
    state, seconds = _settled(views, agents)
    began = T0 + timedelta(seconds=seconds + 30)
    busy = member("m1", state=S.BUSY, turn=turn(at=began), pending_tasks=1, since=began)
    views[1], agents[1] = busy, agent("m1", L.WORKING, seq=1)
    counted = Counted(monkeypatch)
    state = decide(_snapshot(views, agents), state, began).state
    state = decide(_snapshot(views, agents), state, began + timedelta(seconds=30)).state
    assert counted.asked == ["s-m1"]  # became busy; quiet from its first sighting on
    state = decide(_snapshot(views, agents), state, began + timedelta(seconds=90)).state
    assert counted.asked == ["s-m1"]  # not asked again once the teardown grace passed
    ended = began + timedelta(seconds=100)
    views[1] = replace(busy, session_state=S.RELEASED, turn=None, state_since=ended)
    state = decide(_snapshot(views, agents), state, ended).state
    state = decide(_snapshot(views, agents), state, ended + timedelta(seconds=30)).state
    assert counted.asked == ["s-m1", "s-m1"]
    later = decide(_snapshot(views, agents), state, ended + timedelta(seconds=61))
    assert counted.asked == ["s-m1", "s-m1", "s-m1"]  # released: the grace is a time to wait for
    assert later.state.members["s-m1"].state is MemberState.DELEGATION_ORPHANED


def test_a_due_member_is_asked_and_the_rest_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the member whose timer rule came due (a spawning member past the readiness grace) is
    stepped, and it turns NEVER_READY."""
    views, agents = _fleet(5)
    views[2] = member("m2", state=S.SPAWNING, presence=False, turn=turn(delivered=False))
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    decision = decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 300))
    assert counted.asked == ["s-m2"]
    assert decision.state.members["s-m2"].state is MemberState.NEVER_READY


def test_a_probe_or_an_error_naming_a_member_asks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe result naming a member makes the next tick step that member, and only it."""
    views, agents = _fleet(5)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    snapshot = _snapshot(
        views, agents, probes=(ProbeResult(target="m3", source=ProbeSource.VISIBLE, ok=True),)
    )
    decide(snapshot, state, T0 + timedelta(seconds=seconds + 30))
    assert counted.asked == ["s-m3"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda v, a: v.append(member("m9")), id="a member joined"),
        pytest.param(lambda v, a: a.pop(), id="an agent left the list"),
        pytest.param(lambda v, a: v.__setitem__(1, member("m1", terminal="t-new")), id="terminal"),
        pytest.param(lambda v, a: v.__setitem__(1, member("m1", session_id="s-x")), id="session"),
    ],
)
def test_anything_that_does_not_line_up_asks_every_member(
    monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    """A joined member, a vanished agent, or a changed terminal or session id makes the tick step
    every member and build the index afresh."""
    views, agents = _fleet(4)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    change(views, agents)
    decision = decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 30))
    assert len(counted.asked) == len(views)
    assert decision.state.index is not None  # built afresh for the next tick


def test_a_push_cap_that_flips_or_a_blind_tick_asks_every_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flipped push cap steps every member; a blind tick steps them all blind and drops the index,
    so the next tick steps them all again."""
    views, agents = _fleet(4)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    capped = _snapshot(views, agents, inboxes=(inbox("lead-a", capped=True),))
    state = decide(capped, state, T0 + timedelta(seconds=seconds + 30)).state
    assert len(counted.asked) == 4
    blind = FleetSnapshot(live=LiveView(list_ok=False), members=tuple(views), leads=(LEAD,))
    state = decide(blind, state, T0 + timedelta(seconds=seconds + 60)).state
    assert state.index is None  # a blind tick steps every member blind and keeps no index
    decide(capped, state, T0 + timedelta(seconds=seconds + 90))
    assert len(counted.asked) == 8


def test_evidence_that_is_not_the_indexed_mapping_asks_every_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the prior member evidence is a different mapping from the one the index was built on,
    every member is stepped."""
    views, agents = _fleet(3)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    rebuilt = replace(state, members=dict(state.members))  # the index travels, the map is new
    decide(_snapshot(views, agents), rebuilt, T0 + timedelta(seconds=seconds + 30))
    assert len(counted.asked) == 3


def test_two_members_on_one_terminal_get_no_index() -> None:
    """Two members claiming one terminal cannot be indexed by terminal, so no index is kept."""
    views = [member("m1", terminal="t-1"), member("m2", terminal="t-1")]
    decision = decide(_snapshot(views, []), HealthState(), T0)
    assert decision.state.index is None


def test_the_heap_is_rebuilt_when_stale_entries_pile_up() -> None:
    """Handing the index on rebuilds its due-time heap when stale entries outnumber the members, so
    it stays bounded."""
    views, agents = _fleet(2)
    state, _ = _settled(views, agents)
    index = state.index
    assert index is not None
    index.due.extend((T0, 0) for _ in range(200))  # far more entries than members
    after = index.handed_on(_snapshot(views, agents), state.members, set(), ())
    assert len(after.due) <= len(views)


def test_members_without_a_terminal_match_by_name_and_are_always_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A member with no terminal id cannot be matched by terminal: it is stepped on every tick while
    the others are skipped."""
    views, agents = _fleet(3)
    views[0] = member("m0", terminal=None)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds + 30))
    assert counted.asked == ["s-m0"]


def test_build_indexes_every_position() -> None:
    """MemberIndex.build maps each session id and each terminal id to the member's position."""
    views, agents = _fleet(3)
    state, _ = _settled(views, agents)
    index = MemberIndex.build(_snapshot(views, agents), state.members)
    assert index is not None
    assert index.position == {"s-m0": 0, "s-m1": 1, "s-m2": 2}
    assert index.by_terminal == {"term_m0": 0, "term_m1": 1, "term_m2": 2}


def test_a_member_that_settles_in_a_quiet_state_is_asked_once_per_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A change into a state with no incident to open, at a raw status that waits for no streak,
    is asked on the tick that sees it and not after; a raw BLOCKED, whose detection read waits for
    two sightings, is asked again."""
    views, agents = _fleet(6)
    state, seconds = _settled(views, agents)
    counted = Counted(monkeypatch)
    agents[2] = agent("m2", L.WORKING, seq=1)
    agents[4] = agent("m4", L.BLOCKED, seq=1)
    views[4] = replace(views[4], session_state=S.BUSY, turn=turn("tok-4", at=T0))
    asked = []
    for _ in range(3):
        seconds += 30
        state = decide(_snapshot(views, agents), state, T0 + timedelta(seconds=seconds)).state
        asked.append(list(counted.asked))
        counted.asked.clear()
    assert asked[:2] == [["s-m2", "s-m4"], ["s-m4"]]
    assert "s-m2" not in asked[2]
    working = state.members["s-m2"]
    assert (working.state, working.sustained, working.raw_streak) == (MemberState.WORKING, 2, 2)
    assert working.recheck_at is not None
