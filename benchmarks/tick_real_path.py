"""The health tick as ``fleetd serve`` runs it, against its floor, at 1k, 5k and 10k members.

What is timed is ``FleetHealthMonitor.tick()`` of a fleet built through the production
composition root (:func:`fleetd.testing.build_test_fleet`, fake clock, in-memory inbox), whose
``agent.list`` goes over a real Unix socket: the port is ``HerdrAgentControl`` on a
``HerdrSocketClient`` (one connection per request, the request deadline on the system clock),
and the answer is decoded by the client exactly as in ``fleetd serve``; the link observer then
hands the list to the fleet view. The rest of herdr (spawning, prompts, pane reads) is the
in-memory fake, so the fleet can be built in minutes.

The socket answers with the simulator's reply: each agent is serialised by the simulator's own
``SimAgent.to_wire`` and the frame is written the way its server writes one (compact JSON, one
line). The reply is encoded between ticks and only the request id is spliced in per request, so
neither the tick nor the floor pays for the simulator's Python serialisation — herdr writes it in
Rust. At 10,000 agents the line is about 3 MB.

The floor is measured in the same run, one sample after each tick on the same state: the same
request over the same socket, the same bytes read, ``json.loads`` of the line and a bare loop over
the bridge's sessions reading five fields of each. That is the least any tick must do: read and
parse herdr's list and touch every member once.

The fleet: one lead per 100 members; 35 % of the members work a delivered turn (herdr
``working``), the rest idle at their prompt; ``HISTORY_PER_MEMBER`` ended tickets each. Between
ticks (not timed) the clock moves one snapshot interval (30 s) and 10 % of the members change
status (a busy one replies and goes ``idle``, an idle one is sent a task and goes ``working``);
the leads' inboxes are then drained. The collector runs as it does in the service: no
``gc.collect()`` between ticks, and the heap frozen once the service is built and before its
members are spawned, as ``fleetd serve`` freezes its start-up heap
(:func:`fleetd.runtime.heap.freeze_startup_heap`). Also printed: how many full (oldest
generation) collections ran inside the timed ticks and floors, and how long they took.

Printed per size: p50, p99 and worst of the tick and of the floor (ms), and the ratio tick/floor at
p50 and at the worst; also the p50 ratio in CPU time of the process (both ends of the socket run in
it), which other work on a shared machine does not stretch. Target: the tick within 2x of its floor
at p50 (wall) at every size; the worst is reported. Exits 1 when missed. Run:
``.venv/bin/python benchmarks/tick_real_path.py`` (``BENCH_SIZES=1000,5000`` and ``BENCH_TICKS=20``
shorten it).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from fleetd.clock import SystemClock
from fleetd.herdr.control import HerdrAgentControl
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.identity import Caller, Role
from fleetd.runtime.heap import freeze_startup_heap
from fleetd.sim.agent import SimAgent
from fleetd.sim.state import AgentState
from fleetd.testing import TestFleet, build_test_fleet

SIZES = tuple(int(s) for s in os.environ.get("BENCH_SIZES", "1000,5000,10000").split(","))
HISTORY_PER_MEMBER = int(os.environ.get("BENCH_HISTORY", "10"))
TIMED_TICKS = int(os.environ.get("BENCH_TICKS", "44"))
WARMUP_TICKS = 3
BUSY_SHARE = 0.35
CHURN_SHARE = 0.10
TARGET_RATIO = 2.0
_READ_LIMIT = 64 * 1024 * 1024

T = TypeVar("T")


class _AsSimAgent:
    """A fake herdr agent seen through the attributes the simulator's serialiser reads."""

    title = SimAgent.title  # the simulator's own title (a glyph for the state, then the name)

    def __init__(self, agent: AgentInfo) -> None:
        self.pane = agent  # terminal_id, workspace_id, tab_id, pane_id, cwd
        self.status = agent.agent_status
        working = agent.agent_status is AgentStatus.WORKING
        self.state = AgentState.WORKING if working else AgentState.IDLE
        self.state_change_seq = agent.state_change_seq
        self.kind = agent.agent
        self.name = agent.name
        self.launch_pending = agent.launch_pending
        self.interactive_ready = agent.interactive_ready


class SocketListedHerdr(FakeAgentControl):
    """The in-memory herdr, except that ``agent.list`` goes to the real port over the socket."""

    herdr: HerdrAgentControl | None = None

    def agents(self) -> list[AgentInfo]:
        return [pane.agent for pane in self._panes.values() if pane.agent is not None]

    async def list_agents(self) -> tuple[AgentInfo, ...]:
        if self.herdr is None:
            return await super().list_agents()
        return await self._call("list_agents", self.herdr.list_agents())


class SimReply:
    """A Unix socket answering ``agent.list`` with the simulator's reply for the fake's agents."""

    def __init__(self, path: Path, control: SocketListedHerdr) -> None:
        self.path, self.control = path, control
        self.head, self.tail = b"", b""
        self.size = 0
        self._server: asyncio.Server | None = None

    def render(self) -> None:
        """Encode the reply for the agents as they are now (between ticks, not timed)."""
        wires = [
            SimAgent.to_wire(cast(SimAgent, _AsSimAgent(agent)), focused=False)
            for agent in self.control.agents()
        ]
        frame = {"id": "\0", "result": {"type": "agent_list", "agents": wires}}
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        self.head, self.tail = line.split(b'"\\u0000"', 1)
        self.size = len(line)

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self.path), limit=1024 * 1024
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            if request.get("method") == "agent.list":
                writer.write(self.head + json.dumps(request["id"]).encode() + self.tail)
            else:
                error = {"code": "unknown_method", "message": "only agent.list is served"}
                writer.write(json.dumps({"id": request["id"], "error": error}).encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()


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
            "ticketsKept": max(1, members * HISTORY_PER_MEMBER),
            "ticketRetentionSeconds": 24 * 3600,
        },
    }
    return document, environ


class Bench:
    """One fleet of ``size`` members with its history, its socket, and the churn between ticks."""

    def __init__(self, root: Path, size: int) -> None:
        document, environ = _document(root, size)
        self.control = SocketListedHerdr(keep_calls=False)
        for lead in document["leads"]:
            self.control.add_agent(lead["agent"], status=AgentStatus.IDLE)
        self.fleet: TestFleet = build_test_fleet(
            root, document=document, environ=environ, control=self.control, check_views=False
        )
        # AF_UNIX paths are short: the socket lives in its own short directory
        self.socket_dir = Path(tempfile.mkdtemp(prefix="ftick"))
        self.reply = SimReply(self.socket_dir / "herdr.sock", self.control)
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
        for _ in range(HISTORY_PER_MEMBER):
            for lead, sid, member in self.members:
                await fleet.ok("fleet_send", lead, target=sid, prompt="an old task")
                await fleet.ok("fleet_reply", member, content="done")
            fleet.clock.advance(1)
            await self.drain()
        for lead, sid, _member in self.members:
            if self.random.random() < BUSY_SHARE:
                await self.start_turn(lead, sid)
        await self.reply.start()
        self.control.herdr = HerdrAgentControl.for_socket(
            self.reply.path, clock=SystemClock(), request_timeout=10.0
        )

    async def stop(self) -> None:
        await self.reply.stop()
        shutil.rmtree(self.socket_dir, ignore_errors=True)

    async def start_turn(self, lead: Caller, sid: str) -> None:
        await self.fleet.ok("fleet_send", lead, target=sid, prompt="a task")
        self.fleet.set_status(sid, AgentStatus.WORKING)
        self.busy.add(sid)

    async def churn(self) -> None:
        """Move the clock one snapshot interval; 10 % of the members change status."""
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
        self.reply.render()

    async def drain(self) -> None:
        for lead in self.leads:
            await self.fleet.ok("fleet_poll", lead)

    async def floor(self) -> tuple[float, float]:
        """Seconds of the floor, wall and CPU: the same request and bytes, ``json.loads``, a bare
        loop."""
        line = json.dumps({"id": "floor", "method": "agent.list", "params": {}}).encode() + b"\n"
        started, cpu = time.perf_counter(), time.process_time()
        reader, writer = await asyncio.open_unix_connection(str(self.reply.path), limit=_READ_LIMIT)
        try:
            writer.write(line)
            await writer.drain()
            answer = await reader.readline()
        finally:
            writer.close()
        frame = json.loads(answer)
        kept = [
            (s.session_id, s.state, s.turn, s.owner, s.state_since)
            for s in self.fleet.bridge.reads.sessions()
        ]
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert len(frame["result"]["agents"]) >= len(kept)
        return elapsed, cpu


class FullCollections:
    """The full collections the interpreter runs while :attr:`on` (their count and durations)."""

    def __init__(self) -> None:
        self.on = False
        self.ms: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2 or not self.on:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.ms.append((time.perf_counter() - self._started) * 1000)

    async def timed(self, work: Awaitable[T]) -> T:
        self.on = True
        try:
            return await work
        finally:
            self.on = False


@dataclass(frozen=True, slots=True)
class Figures:
    size: int
    reply_bytes: int
    built_seconds: float
    tick_ms: list[float]
    floor_ms: list[float]
    tick_full: list[float]  # the full collections that ran inside ticks, ms each
    floor_full: list[float]
    tick_cpu: list[float]  # CPU time of the process (both ends of the socket are in it), ms
    floor_cpu: list[float]

    @staticmethod
    def _cut(samples: list[float]) -> tuple[float, float, float]:
        ordered = sorted(samples)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        return statistics.median(ordered), p99, ordered[-1]

    @property
    def tick(self) -> tuple[float, float, float]:
        return self._cut(self.tick_ms)

    @property
    def floor(self) -> tuple[float, float, float]:
        return self._cut(self.floor_ms)

    @property
    def ratio(self) -> float:
        return self.tick[0] / self.floor[0]

    @property
    def worst_ratio(self) -> float:
        return self.tick[2] / self.floor[2]

    @property
    def cpu_ratio(self) -> float:
        """tick/floor at p50 in CPU time: what the process itself spent, which other work on a
        shared machine does not stretch."""
        return statistics.median(self.tick_cpu) / statistics.median(self.floor_cpu)


async def measure(size: int) -> Figures:
    root = Path(tempfile.mkdtemp(prefix="fleetd-tick-"))
    bench = Bench(root, size)
    try:
        started = time.perf_counter()
        await bench.build(size)
        built = time.perf_counter() - started
        health = bench.fleet.service.health
        for _ in range(WARMUP_TICKS):
            await bench.churn()
            await health.tick()
        ticks, floors, ticks_cpu, floors_cpu = [], [], [], []
        in_ticks, in_floors = FullCollections(), FullCollections()
        gc.callbacks.extend((in_ticks, in_floors))
        try:
            for _ in range(TIMED_TICKS):
                await bench.churn()
                started, cpu = time.perf_counter(), time.process_time()
                await in_ticks.timed(health.tick())
                ticks.append((time.perf_counter() - started) * 1000)
                ticks_cpu.append((time.process_time() - cpu) * 1000)
                wall, cpu = await in_floors.timed(bench.floor())
                floors.append(wall * 1000)
                floors_cpu.append(cpu * 1000)
        finally:
            gc.callbacks.remove(in_ticks)
            gc.callbacks.remove(in_floors)
        assert len(health.state.open_incidents()) < size // 10, "the fleet is unhealthy"
        return Figures(
            size,
            bench.reply.size,
            built,
            ticks,
            floors,
            in_ticks.ms,
            in_floors.ms,
            ticks_cpu,
            floors_cpu,
        )
    finally:
        await bench.stop()
        shutil.rmtree(root, ignore_errors=True)


def _collections(ms: list[float]) -> str:
    if not ms:
        return "none"
    return f"{len(ms)} ({sum(ms):.0f} ms, worst {max(ms):.0f} ms)"


async def main() -> int:
    print(
        "health tick over herdr's socket (agent.list decoded by the real client) against its floor"
    )
    print(f"  {TIMED_TICKS} ticks per size, 10 % of members changing status between ticks, no gc")
    print("  start-up heap frozen and young collections spaced out, as `fleetd serve` does")
    results = []
    for size in SIZES:
        figures = await measure(size)
        results.append(figures)
        tick, floor = figures.tick, figures.floor
        print(
            f"  {size:>6} members (built in {figures.built_seconds:5.1f} s, "
            f"reply {figures.reply_bytes / 1e6:.2f} MB)\n"
            f"         tick  p50 {tick[0]:7.2f}  p99 {tick[1]:7.2f}  worst {tick[2]:7.2f} ms\n"
            f"         floor p50 {floor[0]:7.2f}  p99 {floor[1]:7.2f}  worst {floor[2]:7.2f} ms\n"
            f"         tick/floor p50 {figures.ratio:.2f}, worst {figures.worst_ratio:.2f}, "
            f"CPU time p50 {figures.cpu_ratio:.2f}\n"
            f"         full collections in ticks {_collections(figures.tick_full)}, "
            f"in floors {_collections(figures.floor_full)}",
            flush=True,
        )
    print("  tick/floor at p50 (wall):", ", ".join(f"{f.size}: {f.ratio:.2f}" for f in results))
    met = all(f.ratio <= TARGET_RATIO for f in results)
    print(f"target tick/floor <= {TARGET_RATIO:.0f} at p50: {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
