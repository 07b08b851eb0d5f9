"""The state store's cost: what writing ahead adds to a send, and how fast a start takes back a
large fleet.

* **send → prompt at herdr** — ``fleet_send`` to a ready member, through the production
  composition root on fakes (the fake herdr answers at once), timed from the call until herdr has
  been asked to type the prompt (on the way the send is stored, then stored
  ``uncertain``). The member replies between sends, so each send finds it ready. The same run on the
  in-memory store is the baseline; the two alternate in rounds so machine noise hits both alike.
  Target: p99 with the SQLite store ≤ 1.2× p99 with the in-memory store.
* **send → prompt typed by ``fleetd sim``** — the same, on the path ``fleetd serve`` runs: the
  composition root with its real herdr client over the socket of ``fleetd sim`` (its own
  process), the API served by uvicorn so the simulated member's ``fleet_reply`` comes back over
  HTTP; timed from the ``fleet_send`` call until the simulator answered ``agent.prompt`` (the
  prompt typed: the real cost of a prompt). Same target, reported beside the first.
* **start-up** — a store holding 1,000 members (each with an open turn) and 10,000 tickets
  (8,000 ended, 1,000 typed with an open turn, 1,000 queued): open it (schema check), load it,
  rebuild the bridge (sessions, tokens, tickets, queues, turns) and match the members against
  herdr's list. Target: < 2 s. Again with 30,000 tickets (28,000 ended), far more than
  ``bridge.ticketsKept`` (10,000) keeps: the start also deletes the ended tickets past it, and
  the store is left holding the bound.

Prints the figures; exits 1 on a miss. Run: ``.venv/bin/python benchmarks/state_store.py
[--sends N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn

from fleetd.api.app import create_app
from fleetd.bridge.sessions import SessionState
from fleetd.clock import SystemClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.identity import Caller, Role
from fleetd.state.facts import DeliveryState, MemberRecord, TicketRecord, TurnRecord
from fleetd.state.memory import MemoryStateStore
from fleetd.state.port import Change, StateStore
from fleetd.state.sql import SqlStateStore
from fleetd.testing import TestFleet, build_test_fleet

DEADLINE = timedelta(seconds=5)
P99_RATIO = 1.2
START_SECONDS = 2.0


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def _sends(root: Path, store: StateStore, count: int) -> list[float]:
    fleet: TestFleet = build_test_fleet(root, state=store, check_views=False)
    await fleet.service.own_lead_keys()
    sid = await fleet.spawn_ready()
    member = fleet.member(sid)
    samples: list[float] = []
    typed_at: list[float] = []
    prompt = fleet.control.prompt

    async def timed(target: str, text: str) -> AgentInfo:
        typed_at.append(time.perf_counter())  # herdr is asked to type it now
        return await prompt(target, text)

    fleet.control.prompt = timed  # type: ignore[method-assign]
    for n in range(count):
        started = time.perf_counter()
        await fleet.ok("fleet_send", target=sid, prompt=f"task {n}")
        assert len(typed_at) == n + 1
        samples.append(typed_at[-1] - started)
        await fleet.ok("fleet_reply", member, content="done")
        fleet.set_status(sid, AgentStatus.IDLE)
        await fleet.poll(3.0)
    return samples


async def bench_sends(count: int) -> bool:
    sql: list[float] = []
    memory: list[float] = []
    rounds = 5
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            root = Path(tmp) / f"r{r}"
            store = SqlStateStore(
                f"sqlite:///{root / 'state.db'}", deadline=lambda: DEADLINE, instance="bench"
            )
            sql += await _sends(root / "sql", store, count // rounds)
            store.close()
            memory += await _sends(root / "mem", MemoryStateStore(), count // rounds)
    p99_sql, p99_mem = _p99(sql), _p99(memory)
    ratio = p99_sql / p99_mem
    print(
        f"send -> prompt at herdr ({len(sql)} sends each): in-memory p50 "
        f"{sorted(memory)[len(memory) // 2] * 1000:.3f} ms p99 {p99_mem * 1000:.3f} ms; "
        f"SQLite p50 {sorted(sql)[len(sql) // 2] * 1000:.3f} ms p99 {p99_sql * 1000:.3f} ms; "
        f"ratio {ratio:.2f} (target <= {P99_RATIO})"
    )
    return ratio <= P99_RATIO


SIM_SCENARIO = {
    "version": 1,
    "defaults": {
        "start_seconds": 0.1,
        "react_seconds": 0.01,
        "turn_seconds": 0.05,
        "frame_seconds": 5.0,
    },
    "existing": [{"name": "lead", "kind": "claude", "cwd": "/tmp", "label": "lead"}],
}
SIM_LEAD_TOKEN = "lead-token-for-the-state-store-benchmark"
LEAD = Caller(role=Role.LEAD, name="lead")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _sim_config(root: Path, sock: Path, port: int) -> Path:
    root.mkdir(parents=True)
    config = root / "fleetd.yaml"
    config.write_text(
        json.dumps(
            {
                "api": {"host": "127.0.0.1", "port": port},
                "herdr": {"socketPath": str(sock)},
                "leads": [{"name": "lead", "agent": "lead", "tokenEnv": "BENCH_LEAD_TOKEN"}],
                "profiles": {"sonnet": {"kind": "claude"}},
                "worktrees": {"root": str(root / "worktrees")},
            }
        )
    )
    return config


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def _sim_sends(root: Path, sock: Path, store: StateStore, count: int) -> list[float]:
    """``count`` sends to one member of a fleetd served in this process against ``fleetd sim``."""
    port = _free_port()
    config = _sim_config(root, sock, port)
    env = {**os.environ, "BENCH_LEAD_TOKEN": SIM_LEAD_TOKEN}
    ref = ConfigRef.load(config, env, now=SystemClock().now())
    service = build_service(ref, environ=env, state=store)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(service), host="127.0.0.1", port=port, log_level="warning", lifespan="on"
        )
    )
    serving = asyncio.create_task(server.serve())
    await _until(lambda: server.started, "uvicorn")
    bridge = service.bridge
    answered: list[float] = []
    prompt = bridge.control.prompt

    async def timed(target: str, text: str) -> AgentInfo:
        info = await prompt(target, text)
        answered.append(time.perf_counter())  # the simulator typed it and said so
        return info

    bridge.control.prompt = timed  # type: ignore[method-assign]
    samples: list[float] = []
    try:
        spawned = await service.registry.call(
            LEAD, "fleet_spawn", {"profile": "sonnet", "name": f"m-{root.parent.name}-{root.name}"}
        )
        assert spawned.ok, spawned
        assert spawned.result is not None
        sid = spawned.result["sessionId"]
        for n in range(count):
            session = bridge.reads.session(sid)
            while session is None or session.state not in (SessionState.READY, SessionState.DONE):
                await asyncio.sleep(0.005)
                session = bridge.reads.session(sid)
            before = len(answered)
            started = time.perf_counter()
            sent = await service.registry.call(
                LEAD, "fleet_send", {"target": sid, "prompt": f"task {n}"}
            )
            assert sent.ok, sent
            assert sent.result is not None
            if len(answered) == before + 1:  # typed at once (not queued behind a busy member)
                samples.append(answered[-1] - started)
            ticket = bridge.reads.ticket(sent.result["ticket"])
            assert ticket is not None
            await asyncio.wait_for(ticket.done_event.wait(), 10.0)
    finally:
        server.should_exit = True
        await serving
    return samples


async def bench_sends_sim(count: int) -> bool:
    sql: list[float] = []
    memory: list[float] = []
    rounds = 5
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "herdr.sock"
        scenario = Path(tmp) / "scenario.json"
        scenario.write_text(json.dumps(SIM_SCENARIO))
        sim = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "fleetd", "sim", "--socket", str(sock), "--scenario", str(scenario)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await _until(sock.exists, "the simulator's socket")
            for r in range(rounds):
                root = Path(tmp) / f"r{r}"
                store = SqlStateStore(
                    f"sqlite:///{root / 'state.db'}", deadline=lambda: DEADLINE, instance="bench"
                )
                sql += await _sim_sends(root / "sql", sock, store, count // rounds)
                store.close()
                memory += await _sim_sends(root / "mem", sock, MemoryStateStore(), count // rounds)
        finally:
            sim.terminate()
            with contextlib.suppress(ProcessLookupError):
                await sim.wait()
    p99_sql, p99_mem = _p99(sql), _p99(memory)
    ratio = p99_sql / p99_mem
    print(
        f"send -> prompt typed by fleetd sim ({len(sql)} and {len(memory)} sends typed at once): "
        f"in-memory p50 {sorted(memory)[len(memory) // 2] * 1000:.3f} ms "
        f"p99 {p99_mem * 1000:.3f} ms; SQLite p50 {sorted(sql)[len(sql) // 2] * 1000:.3f} ms "
        f"p99 {p99_sql * 1000:.3f} ms; ratio {ratio:.2f} (target <= {P99_RATIO})"
    )
    return ratio <= P99_RATIO


def _fill(store: SqlStateStore, fleet: TestFleet, members: int, tickets: int) -> None:
    now = datetime.now(UTC)
    member_rows: list[MemberRecord] = []
    turn_rows: list[TurnRecord] = []
    ticket_rows: list[TicketRecord] = []
    seq = 0
    for m in range(members):
        agent = fleet.control.add_agent(f"member-{m}", status=AgentStatus.WORKING)
        sid = f"s-{m:08x}"
        member_rows.append(
            MemberRecord(
                session_id=sid,
                name=f"member-{m}",
                profile="sonnet",
                kind="claude",
                role=None,
                owner="lead",
                created_at=now,
                pane_id=agent.pane_id,
                terminal_id=agent.terminal_id,
                token_hash=f"{m:064x}",
                presence=True,
                turn=10,
            )
        )
        per = tickets // members
        for k in range(per):
            seq += 1
            tid = f"t{seq}-abcdef-r00000000"
            if k < per - 2:
                ticket_rows.append(
                    TicketRecord(
                        ticket_id=tid,
                        target=sid,
                        owner="lead",
                        accepted_at=now,
                        seq=seq,
                        delivery=DeliveryState.TYPED,
                        outcome="done",
                        source="reply",
                        content="an answer of a few words",
                        turn=k + 1,
                        delivered_at=now,
                        resolved_at=now,
                    )
                )
            elif k == per - 2:
                ticket_rows.append(
                    TicketRecord(
                        ticket_id=tid,
                        target=sid,
                        owner="lead",
                        accepted_at=now,
                        seq=seq,
                        delivery=DeliveryState.TYPED,
                        turn=10,
                        delivered_at=now,
                    )
                )
                turn_rows.append(
                    TurnRecord(
                        session_id=sid,
                        token_id=f"turn-{m:012x}",
                        ticket_id=tid,
                        turn=10,
                        delivered_at=now,
                    )
                )
            else:
                ticket_rows.append(
                    TicketRecord(
                        ticket_id=tid,
                        target=sid,
                        owner="lead",
                        accepted_at=now,
                        seq=seq,
                        prompt="the next task",
                    )
                )
    store.apply(Change(members=tuple(member_rows), tickets=tuple(ticket_rows)))
    store.apply(Change(turns=tuple(turn_rows)))


async def bench_start(members: int, tickets: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'state.db'}"
        filler = SqlStateStore(url, deadline=lambda: DEADLINE, instance="bench")
        seed = build_test_fleet(root / "seed", check_views=False)
        _fill(filler, seed, members, tickets)
        filler.close()
        started = time.perf_counter()
        store = SqlStateStore(url, deadline=lambda: DEADLINE, instance="bench")
        fleet = build_test_fleet(
            root / "fleet", control=seed.control, state=store, check_views=False
        )
        await fleet.service.restore()
        await fleet.bridge.confirm_restored()
        took = time.perf_counter() - started
        live = len(fleet.bridge.reads.live_members())
        kept = fleet.bridge.reads.tickets_kept()
        stored = len(store.load().tickets)
        store.close()
    pending = 2 * members  # one typed with its open turn, one queued
    expected = min(tickets - pending, fleet.service.config.current.bridge.tickets_kept) + pending
    print(
        f"start-up with {members} members and {tickets} tickets in the store: {took * 1000:.0f} ms "
        f"({live} members live, {kept} tickets held, {stored} left in the store; "
        f"target < {START_SECONDS:.0f} s)"
    )
    return live == members and kept == expected == stored and took < START_SECONDS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--sim-sends", type=int, default=500)
    args = parser.parse_args()
    sends = asyncio.run(bench_sends(args.sends))
    sim = asyncio.run(bench_sends_sim(args.sim_sends))
    start = asyncio.run(bench_start(1000, 10_000))
    # a store fed far more than bridge.ticketsKept (10,000): the start deletes the excess
    compacted = asyncio.run(bench_start(1000, 30_000))
    if not (sends and sim and start and compacted):
        print("state_store: missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
