"""Median time of one whole health tick at 1,000 and 10,000 members: snapshot, decide, dispatch.

What is timed is ``FleetHealthMonitor.tick()`` of a fleet built through the production
composition root (:func:`fleetd.testing.build_test_fleet`: fake herdr, in-memory inbox, fake
clock): the snapshot it takes (one ``agent.list`` of the fake herdr, every lead's inbox
statistics, one member view per session with its open turn, tickets and backlog), the pure
``decide``, and the dispatch of its effects (incidents, health records to lead inboxes, pane
probes within the budget). Nothing of the tick is prebuilt: every tick's snapshot holds fresh
turn objects read from the bridge.

The fleet is realistic and carries history:

* one lead per 100 members; 35 % of the members work a delivered turn (herdr ``working``), the rest
  are idle at their prompt;
* ten ended tickets per member are held (``bridge.ticketsKept`` raised so the book really holds
  them: 100,000 at 10,000 members);
* between ticks (not timed) the clock moves one snapshot interval (30 s) and 1 % of the members
  change status: a busy one replies (its turn ends, herdr shows it ``idle``), an idle one is sent
  a task (delivered at once, herdr shows it ``working``); the leads' inboxes are then drained, so
  each tick sees that tick's replies waiting.

The collector runs as in the service: no ``gc.collect()`` before a tick, and the heap frozen once
the service is built, before its members are spawned, as ``fleetd serve`` freezes its start-up
heap. A tick that pays for a full
collection is part of the median's sample like any other.

Also printed: how the tick splits between snapshot, decide and dispatch, and the same ratio for a
bare loop that only reads each session's fields (the scaling this machine's memory hierarchy
allows before fleetd does any work).

Targets (M4 Unit 1, one core): the whole tick at 10,000 members under 100 ms; 10k/1k ratio at most
12. Exits 1 when either is missed. Run: ``.venv/bin/python benchmarks/decide.py``.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus
from fleetd.identity import Caller, Role
from fleetd.runtime import monitor
from fleetd.runtime.heap import freeze_startup_heap
from fleetd.testing import TestFleet, build_test_fleet

SIZES = (1_000, 10_000)  # BENCH_SIZES
HISTORY_PER_MEMBER = 10
BUSY_SHARE = 0.35
CHURN_SHARE = 0.01
WARMUP_TICKS = 3
TIMED_TICKS = 21
TARGET_10K_MS = 100.0
TARGET_RATIO = 12.0

T = TypeVar("T")


def _document(root: Path, members: int) -> tuple[dict[str, Any], dict[str, str]]:
    leads = max(1, members // 100)
    environ = {f"T_LEAD_{n}": f"lead-token-{n:04d}-for-the-benchmark" for n in range(leads)}
    document = {
        "api": {"publicUrl": "http://127.0.0.1:1"},
        "leads": [
            {"name": f"lead{n}", "agent": f"lead{n}", "tokenEnv": f"T_LEAD_{n}"}
            for n in range(leads)
        ],
        "profiles": {f"p{n}": {"kind": "claude"} for n in range(8)},
        "worktrees": {"root": str(root / "worktrees")},
        "health": {"enabled": True, "snapshotIntervalSeconds": 30},
        "bridge": {
            "ticketsKept": members * HISTORY_PER_MEMBER,
            "ticketRetentionSeconds": 24 * 3600,
        },
    }
    return document, environ


class Bench:
    """One fleet of ``size`` members with its history, and the churn between ticks."""

    def __init__(self, root: Path, size: int) -> None:
        document, environ = _document(root, size)
        control = FakeAgentControl(keep_calls=False)
        for lead in document["leads"]:
            control.add_agent(lead["agent"], status=AgentStatus.IDLE)
        self.fleet: TestFleet = build_test_fleet(  # member views unchecked: this is the timing
            root, document=document, environ=environ, control=control, check_views=False
        )
        self.leads = [Caller(role=Role.LEAD, name=lead["name"]) for lead in document["leads"]]
        self.members: list[tuple[Caller, str, Caller]] = []  # (lead, session id, member)
        self.busy: set[str] = set()
        self.random = random.Random(12)

    async def build(self, size: int) -> None:
        fleet = self.fleet
        await fleet.service.own_lead_keys()
        freeze_startup_heap()  # the service is up, its members not yet spawned: as `fleetd serve`
        for n in range(size):
            lead = self.leads[n % len(self.leads)]
            row = await fleet.ok("fleet_spawn", lead, profile=f"p{n % 8}")
            member = fleet.member(row["sessionId"])
            await fleet.service.registry.contact(member)
            self.members.append((lead, row["sessionId"], member))
        for _ in range(HISTORY_PER_MEMBER):  # ten ended tickets per member
            for lead, sid, member in self.members:
                await fleet.ok("fleet_send", lead, target=sid, prompt="an old task")
                await fleet.ok("fleet_reply", member, content="done")
            fleet.clock.advance(1)
            await self.drain()
        for lead, sid, _member in self.members:
            if self.random.random() < BUSY_SHARE:
                await self.start_turn(lead, sid)

    async def start_turn(self, lead: Caller, sid: str) -> None:
        await self.fleet.ok("fleet_send", lead, target=sid, prompt="a task")
        self.fleet.set_status(sid, AgentStatus.WORKING)
        self.busy.add(sid)

    async def churn(self) -> None:
        """Move the clock one snapshot interval; 1 % of the members change status."""
        self.fleet.clock.advance(30)
        for lead, sid, member in self.random.sample(
            self.members, max(1, int(len(self.members) * CHURN_SHARE))
        ):
            if sid in self.busy:
                self.fleet.set_status(sid, AgentStatus.IDLE)
                await self.fleet.ok("fleet_reply", member, content="done")
                self.busy.discard(sid)
            else:
                await self.start_turn(lead, sid)
        await self.drain()

    async def drain(self) -> None:
        for lead in self.leads:
            await self.fleet.ok("fleet_poll", lead)


class Split:
    """Time spent in the snapshot and in ``decide``, summed over the ticks being timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def install(self) -> None:
        # the names the tick calls, replaced in its own module for the benchmark's timing
        snapshot, decide = getattr(monitor, "take_snapshot"), getattr(monitor, "decide")  # noqa: B009

        async def timed_snapshot(**kwargs: Any) -> Any:
            return await self._timed("snapshot", snapshot(**kwargs))

        def timed_decide(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return decide(*args)
            finally:
                self.seconds["decide"] += time.perf_counter() - started

        setattr(monitor, "take_snapshot", timed_snapshot)  # noqa: B010
        setattr(monitor, "decide", timed_decide)  # noqa: B010

    async def _timed(self, part: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await work
        finally:
            self.seconds[part] += time.perf_counter() - started


def _bare_us(bench: Bench) -> float:
    """Microseconds per member of a loop that only reads each session's fields."""
    sessions = bench.fleet.bridge.reads.sessions()
    samples = []
    for _ in range(TIMED_TICKS):
        started = time.perf_counter()
        kept = [(s.session_id, s.state, s.turn, s.owner, s.state_since) for s in sessions]
        samples.append((time.perf_counter() - started) * 1e6 / len(kept))
    return statistics.median(samples)


async def measure(size: int, split: Split) -> tuple[float, dict[str, float], float, int]:
    with tempfile.TemporaryDirectory(prefix="fleetd-bench-") as tmp:
        bench = Bench(Path(tmp), size)
        started = time.perf_counter()
        await bench.build(size)
        built = time.perf_counter() - started
        health = bench.fleet.service.health
        for _ in range(WARMUP_TICKS):
            await bench.churn()
            await health.tick()
        split.seconds.clear()
        samples = []
        for _ in range(TIMED_TICKS):
            await bench.churn()
            started = time.perf_counter()
            await health.tick()
            samples.append((time.perf_counter() - started) * 1000)
        parts = {part: s * 1000 / TIMED_TICKS for part, s in split.seconds.items()}
        parts["dispatch and the rest"] = statistics.mean(samples) - sum(parts.values())
        tickets = bench.fleet.bridge.reads.tickets_kept()
        print(
            f"  {size:>6} members: built in {built:5.1f} s ({tickets} tickets held, "
            f"{len(bench.busy)} busy)"
        )
        return statistics.median(samples), parts, _bare_us(bench), tickets


async def main() -> int:
    split = Split()
    split.install()
    print("whole health tick (snapshot + decide + dispatch), fake herdr, in-memory inbox")
    results = {}
    for size in SIZES:
        results[size] = await measure(size, split)
    for size, (ms, parts, _, _) in results.items():
        shares = ", ".join(f"{part} {value:.1f}" for part, value in parts.items())
        print(f"  {size:>6} members: median {ms:8.2f} ms/tick ({ms * 1000 / size:5.2f} us/member)")
        print(f"                  mean split (ms): {shares}")
    small, large = results[SIZES[0]], results[SIZES[1]]
    ratio = large[0] / small[0]
    floor = large[2] / small[2] * (SIZES[1] / SIZES[0])
    print(f"  10k/1k ratio: {ratio:.2f} (a bare field-reading loop on this machine: {floor:.2f})")
    fast = large[0] < TARGET_10K_MS
    flat = ratio <= TARGET_RATIO
    print(f"target 10k < {TARGET_10K_MS:.0f} ms: {'met' if fast else 'MISSED'}")
    print(f"target ratio <= {TARGET_RATIO:.0f}: {'met' if flat else 'MISSED'}")
    return 0 if fast and flat else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
