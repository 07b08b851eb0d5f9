"""The state store's cost: what writing ahead adds to a send, and how fast a start takes back a
large fleet.

* **send → prompt at herdr** — ``fleet_send`` to a ready member, through the production
  composition root on fakes (the fake herdr answers at once), timed from the call until herdr has
  been asked to type the prompt (on the way the send is stored, then stored
  ``uncertain``). The member replies between sends, so each send finds it ready. The same run on the
  in-memory store is the baseline; the two alternate in rounds so machine noise hits both alike.
  Target: p99 with the SQLite store ≤ 1.2× p99 with the in-memory store.
* **start-up** — a store holding 1,000 members (each with an open turn) and 10,000 tickets
  (9,000 ended, 1,000 queued): open it (schema check), load it, rebuild the bridge (sessions,
  tokens, tickets, queues, turns) and match the members against herdr's list. Target: < 2 s.

Prints the figures; exits 1 on a miss. Run: ``.venv/bin/python benchmarks/state_store.py
[--sends N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.state.memory import MemoryStateStore
from fleetd.state.port import Change, StateStore
from fleetd.state.records import DeliveryState, MemberRecord, TicketRecord, TurnRecord
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
            store = SqlStateStore(f"sqlite:///{root / 'state.db'}", deadline=lambda: DEADLINE)
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
        filler = SqlStateStore(url, deadline=lambda: DEADLINE)
        seed = build_test_fleet(root / "seed", check_views=False)
        _fill(filler, seed, members, tickets)
        filler.close()
        started = time.perf_counter()
        store = SqlStateStore(url, deadline=lambda: DEADLINE)
        fleet = build_test_fleet(
            root / "fleet", control=seed.control, state=store, check_views=False
        )
        await fleet.service.restore()
        await fleet.bridge.confirm_restored()
        took = time.perf_counter() - started
        live = len(fleet.bridge.live_members())
        kept = fleet.bridge.tasks.kept
        store.close()
    print(
        f"start-up with {members} members and {tickets} tickets: {took * 1000:.0f} ms "
        f"({live} members live, {kept} tickets held; target < {START_SECONDS:.0f} s)"
    )
    return live == members and kept == tickets and took < START_SECONDS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sends", type=int, default=1000)
    args = parser.parse_args()
    sends = asyncio.run(bench_sends(args.sends))
    start = asyncio.run(bench_start(1000, 10_000))
    if not (sends and start):
        print("state_store: missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
