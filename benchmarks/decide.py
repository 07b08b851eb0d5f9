"""Median time per fleet-health tick of ``decide`` at 100, 1,000 and 10,000 members.

Steady state: every timed tick starts from the state the previous tick returned, on a fleet in
which nothing changes but time — the case the monitor lives in. The fleet mixes idle members,
members working a young turn, members working a turn past the suspect age (pane-read candidates
every tick), members with queued work or an uncollected reply, spawning and released members,
across eight profiles, with one lead per hundred members. Each tick gets a freshly built
snapshot (new view objects, as the runtime would hand over); building it is not timed.

Also printed: the slow path (a settings reload re-evaluates every member), retained memory per
member (traced size of a freshly built ``HealthState``), and, for the 10k/1k ratio, the same ratio
for a bare loop that only indexes the agents and reads each member's fields — the scaling this
machine's memory hierarchy allows before ``decide`` does any work.

Targets (M4 Unit 1, one core): 10,000 members under 100 ms per tick; 10k/1k ratio at most 12.
Run: ``.venv/bin/python benchmarks/decide.py``.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from fleetd.health import (
    FleetSnapshot,
    HealthSettings,
    HealthState,
    InboxView,
    LeadView,
    LiveAgent,
    LiveStatus,
    LiveView,
    MemberView,
    OpenTurn,
    ProfileCapacityInput,
    SessionState,
    decide,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TICK = timedelta(seconds=30)
TIMED_TICKS = 21
SIZES = (100, 1_000, 10_000)
TARGET_10K_MS = 100.0
TARGET_RATIO = 12.0


def fleet(size: int) -> FleetSnapshot:
    """A mixed, healthy, steady fleet of ``size`` members."""
    members: list[MemberView] = []
    agents: list[LiveAgent] = []
    inboxes: list[InboxView] = []
    leads = [
        LeadView(name=f"lead{i}", agent_name=f"lead{i}", terminal_id=f"term_L{i}")
        for i in range(max(1, size // 100))
    ]
    for i in range(size):
        kind = i % 20
        name = f"m{i:05d}"
        state, turn, status, queued = SessionState.READY, None, LiveStatus.IDLE, 0
        if kind < 7:  # working; the first two of every twenty on a turn past the suspect age
            state, status = SessionState.BUSY, LiveStatus.WORKING
            started = T0 - timedelta(hours=1) if kind < 2 else T0
            turn = OpenTurn(token=f"tok{i}", number=1, accepted_at=started, delivered_at=started)
        elif kind == 7:
            state, status = SessionState.DONE, LiveStatus.DONE
        elif kind == 8:
            queued = 1
        elif kind == 9:
            inboxes.append(InboxView(key=name, depth=1, oldest_created_at=T0))
        elif kind == 10:
            state = SessionState.SPAWNING
        elif kind == 11:
            state = SessionState.RELEASED
        members.append(
            MemberView(
                session_id=f"s{i:05d}",
                name=name,
                profile=f"p{i % 8}",
                session_state=state,
                state_since=T0,
                spawned_at=T0,
                terminal_id=f"term_{i}",
                owner_lead=leads[i % len(leads)].name,
                presence=state is not SessionState.SPAWNING,
                turn=turn,
                queued_sends=queued,
            )
        )
        if state is not SessionState.RELEASED:
            agents.append(
                LiveAgent(name=name, pane_id=f"w1:p{i}", terminal_id=f"term_{i}", status=status)
            )
    agents += [
        LiveAgent(
            name=lead.name, pane_id=f"w0:p{i}", terminal_id=f"term_L{i}", status=LiveStatus.IDLE
        )
        for i, lead in enumerate(leads)
    ]
    return FleetSnapshot(
        live=LiveView(list_ok=True, agents=tuple(agents)),
        members=tuple(members),
        leads=tuple(leads),
        inboxes=tuple(inboxes),
        profiles=tuple(ProfileCapacityInput(profile=f"p{i}", max_load=size) for i in range(8)),
    )


def rebuilt(snapshot: FleetSnapshot, config: HealthSettings | None = None) -> FleetSnapshot:
    """The same fleet as the runtime would hand it over next tick: every view a new object.

    Field values (times, turns) stay the session records' own objects, as a runtime that keeps
    them on its records would pass them; only the view and list objects are new.
    """
    return replace(
        snapshot,
        live=replace(snapshot.live, agents=tuple(replace(a) for a in snapshot.live.agents)),
        members=tuple(replace(m) for m in snapshot.members),
        leads=tuple(replace(lead) for lead in snapshot.leads),
        config=config or snapshot.config,
    )


def _timed(size: int, reload_every_tick: bool) -> float:
    base = fleet(size)
    now = T0 + TICK
    state = decide(rebuilt(base), HealthState(), now).state
    now += TICK
    state = decide(rebuilt(base), state, now).state
    samples = []
    for index in range(TIMED_TICKS):
        now += TICK
        config = None
        if reload_every_tick:
            config = HealthSettings(working_suspect_after=timedelta(seconds=600 + index % 2))
        snapshot = rebuilt(base, config)
        gc.collect()
        started = time.perf_counter()
        state = decide(snapshot, state, now).state
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _baseline_us(size: int) -> float:
    """Per-member cost of a loop that only indexes agents and reads each member's fields."""
    base = fleet(size)
    prior = {m.session_id: m for m in base.members}
    samples = []
    for _ in range(TIMED_TICKS):
        snapshot = rebuilt(base)
        gc.collect()
        started = time.perf_counter()
        index = {a.terminal_id: a for a in snapshot.live.agents}
        kept = {}
        for m in snapshot.members:
            agent = index.get(m.terminal_id)
            kept[m.session_id] = (prior.get(m.session_id), m.session_state, m.turn, agent)
        samples.append((time.perf_counter() - started) * 1e6 / size)
    return statistics.median(samples)


def bytes_per_member(size: int) -> float:
    """Traced bytes of a freshly built HealthState, per member."""
    snapshot = fleet(size)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = decide(snapshot, HealthState(), T0 + TICK).state
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del state
    return (after - before) / size


def _table(title: str, measure: Callable[[int], float]) -> dict[int, float]:
    print(title)
    results = {size: measure(size) for size in SIZES}
    for size, ms in results.items():
        print(f"  {size:>6} members: median {ms:8.2f} ms/tick ({ms * 1000 / size:6.2f} us/member)")
    return results


def main() -> int:
    steady = _table("steady state", lambda size: _timed(size, reload_every_tick=False))
    ratio = steady[10_000] / steady[1_000]
    floor = _baseline_us(10_000) / _baseline_us(1_000) * 10
    print(f"  10k/1k ratio: {ratio:.2f} (bare field-reading loop on this machine: {floor:.2f})")
    _table("every member re-evaluated (settings reload)", lambda s: _timed(s, True))
    print(f"memory: {bytes_per_member(10_000):.0f} bytes/member retained in HealthState")
    fast = steady[10_000] < TARGET_10K_MS
    print(f"target 10k < {TARGET_10K_MS:.0f} ms: {'met' if fast else 'MISSED'}")
    print(f"target ratio <= {TARGET_RATIO:.0f}: {'met' if ratio <= TARGET_RATIO else 'MISSED'}")
    return 0 if fast else 1


if __name__ == "__main__":
    sys.exit(main())
