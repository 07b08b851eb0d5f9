"""``GET /v1/fleet`` of a real fleetd against a bare FastAPI app serving the same bytes.

One run builds a fleet the way production runs one, then measures both servers:

* ``fleetd sim`` (a herdr-protocol simulator, its own process) whose members call fleetd back
  (MCP ``initialize`` when ready, ``fleet_reply`` at the end of each turn), and ``fleetd serve``
  (its own process, health monitor on) pointed at it;
* a lead spawns 1,000 members through ``fleet_spawn`` and runs ten rounds of 1,000 tasks through
  ``fleet_send`` / the members' ``fleet_reply`` / ``fleet_poll``: 10,000 ended tickets, all held
  (``bridge.ticketsKept`` is 10,000);
* the operator's ``GET /v1/fleet`` answer is saved, and a bare FastAPI app
  (``support/bare_fleet.py``, a third process, same uvicorn settings as ``fleetd serve``: h11,
  ``log_level=warning``, lifespan on) serves exactly those bytes from memory on ``GET /v1/fleet``.

Load: 1, 10 and 50 concurrent keep-alive clients (``support/http_load.py``, a minimal HTTP/1.1
client in this process, so the client costs the same on both sides), each asking
``GET /v1/fleet`` with the operator's token and no ``If-None-Match``: every answer is the full
body (status 200, checked). Each point is measured for ``MEASURE_SECONDS`` after
``WARMUP_SECONDS``, ``REPEATS`` times with the two sides alternating, and the median of the
repeats is reported (other work on the machine hits both sides alike). While the bare app is
measured, fleetd and the simulator are stopped (SIGSTOP) so they take no CPU from it; while
fleetd is measured its loops run as in production (the status poller, the push loop, the health
tick, the herdr-agents loop) and the idle bare app is stopped.

Targets at 50 clients: bare/fleetd throughput at most 3, fleetd p99 at most 3 x bare p99. Also
printed (no target): the ``304 Not Modified`` answer to a matching ``If-None-Match`` at 50
clients. Exits 1 when a target is missed. Run: ``.venv/bin/python benchmarks/fleet_list.py``
(``--members`` and ``--rounds`` change the fleet; about seven minutes on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from support.http_load import OK, Point, load, median

BARE = Path(__file__).resolve().parent / "support" / "bare_fleet.py"

CLIENTS = (1, 10, 50)
WARMUP_SECONDS = 1.0
MEASURE_SECONDS = 4.0
REPEATS = 3
TARGET_THROUGHPUT_RATIO = 3.0
TARGET_P99_RATIO = 3.0
LEAD_TOKEN = "lead-token-for-the-fleet-list-benchmark"
OPERATOR_TOKEN = "operator-token-for-the-fleet-list-benchmark"
SCENARIO = {
    "version": 1,
    "server": {"version": "0.8.2"},
    "defaults": {
        "start_seconds": 0.2,
        "react_seconds": 0.05,
        "turn_seconds": 0.3,
        "frame_seconds": 5.0,
        "answer": "Done: {prompt}. The tests pass on the member branch.",
    },
    "existing": [{"name": "lead", "kind": "claude", "cwd": "/tmp", "label": "lead"}],
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# ------------------------------------------------------------------------ processes
@dataclass(slots=True)
class Process:
    """A child process that can be paused while the other side is measured."""

    name: str
    proc: asyncio.subprocess.Process
    paused: bool = False

    def pause(self) -> None:
        if not self.paused and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    async def stop(self) -> None:
        self.resume()
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def _spawn(name: str, argv: list[str], log: Path, env: dict[str, str]) -> Process:
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env
        )
    return Process(name=name, proc=proc)


async def _until(check: Callable[[], Awaitable[bool]], what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        await asyncio.sleep(0.5)


# ------------------------------------------------------------------------ the fleet
@dataclass(slots=True)
class Fleet:
    """fleetd and its simulated herdr, and the lead that drives them."""

    root: Path
    port: int
    processes: list[Process] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        socket_path = self.root / "herdr.sock"
        scenario = self.root / "scenario.yaml"
        scenario.write_text(json.dumps(SCENARIO))
        config = self.root / "fleetd.yaml"
        config.write_text(
            json.dumps(
                {
                    "api": {"host": "127.0.0.1", "port": self.port},
                    "herdr": {"socketPath": str(socket_path)},
                    "operatorTokenEnv": "BENCH_OPERATOR_TOKEN",
                    "leads": [{"name": "lead", "agent": "lead", "tokenEnv": "BENCH_LEAD_TOKEN"}],
                    "profiles": {"sonnet": {"kind": "claude"}},
                    "worktrees": {"root": str(self.root / "worktrees")},
                    "health": {"enabled": True},
                }
            )
        )
        env = {
            **os.environ,
            "BENCH_LEAD_TOKEN": LEAD_TOKEN,
            "BENCH_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
        python = sys.executable
        sim = ["-m", "fleetd", "sim", "--socket", str(socket_path), "--scenario", str(scenario)]
        self.processes.append(await _spawn("sim", [python, *sim], self.root / "sim.log", env))
        await _until(_exists(socket_path), "the simulator's socket", 30)
        serve = ["-m", "fleetd", "serve", "--config", str(config), "--log-level", "WARNING"]
        fleetd = await _spawn("fleetd", [python, *serve], self.root / "fleetd.log", env)
        self.processes.append(fleetd)
        await _until(_answers(f"{self.base}/readyz"), "fleetd", 60)

    async def stop(self) -> None:
        for process in reversed(self.processes):
            await process.stop()

    def pause(self) -> None:
        for process in self.processes:
            process.pause()

    def resume(self) -> None:
        for process in self.processes:
            process.resume()


def _exists(path: Path) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await asyncio.to_thread(path.exists)

    return check


def _answers(url: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            async with httpx.AsyncClient(timeout=2) as client:
                return (await client.get(url)).status_code == 200
        except httpx.HTTPError:
            return False

    return check


@contextlib.asynccontextmanager
async def _lead(base: str) -> AsyncIterator[Callable[..., Awaitable[dict[str, Any]]]]:
    headers = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=60, limits=limits
    ) as client:

        async def call(tool: str, **args: Any) -> dict[str, Any]:
            body = (await client.post(f"/v1/tools/{tool}", json=args)).json()
            if not body.get("ok"):
                raise RuntimeError(f"{tool} failed: {body.get('error')}")
            result: dict[str, Any] = body["result"]
            return result

        yield call


async def _gather_bounded(work: list[Awaitable[Any]], limit: int = 32) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def bounded(item: Awaitable[Any]) -> Any:
        async with gate:
            return await item

    return await asyncio.gather(*(bounded(item) for item in work))


async def _spawned(call: Callable[..., Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """One ``fleet_spawn``, tried again (up to three times) when the simulator, slowed by other
    work on the machine, did not answer in time (``unavailable``: no member was started)."""
    for attempt in range(3):
        try:
            return await call("fleet_spawn", profile="sonnet")
        except RuntimeError as error:
            if "'unavailable'" not in str(error) or attempt == 2:
                raise
    raise AssertionError("unreachable")


async def build_fleet(fleet: Fleet, members: int, rounds: int) -> None:
    """Spawn ``members``, wait for every one to call back, then run ``rounds`` of one task each."""
    async with _lead(fleet.base) as call:
        started = time.perf_counter()
        spawns: list[Awaitable[Any]] = [_spawned(call) for _ in range(members)]
        rows = await _gather_bounded(spawns)
        sessions = [row["sessionId"] for row in rows]

        async def all_ready() -> bool:
            listed = await call("fleet_list")
            ready = sum(m["state"] in ("ready", "done") for m in listed["members"])
            return ready == members

        await _until(all_ready, "every member's first contact", 300)
        print(f"  {members} members ready in {time.perf_counter() - started:.1f} s", flush=True)
        for round_ in range(rounds):
            started = time.perf_counter()
            await _gather_bounded(
                [call("fleet_send", target=sid, prompt=f"task {round_}") for sid in sessions]
            )
            replies = 0

            async def collected(expected: int = members) -> bool:
                nonlocal replies
                inbox = await call("fleet_poll")
                replies += sum(m["kind"] == "reply" for m in inbox["messages"])
                return bool(replies >= expected)

            await _until(collected, f"the replies of round {round_ + 1}", 300)
            print(
                f"  round {round_ + 1}: {members} tasks sent and answered in "
                f"{time.perf_counter() - started:.1f} s",
                flush=True,
            )


# ------------------------------------------------------------------------ the run
async def main(members: int, rounds: int) -> int:
    with tempfile.TemporaryDirectory(prefix="fleetd-bench-") as tmp:
        root = Path(tmp)
        fleet = Fleet(root=root, port=_free_port())
        bare: Process | None = None
        try:
            print(f"building: {members} members, {rounds} rounds of tasks (fleetd sim)", flush=True)
            await fleet.start()
            await build_fleet(fleet, members, rounds)
            auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
            async with httpx.AsyncClient(timeout=60) as client:
                answer = await client.get(f"{fleet.base}/v1/fleet", headers=auth)
            view = answer.json()["result"]
            body_file = root / "fleet.json"
            body_file.write_bytes(answer.content)
            bare_port = _free_port()
            argv = [sys.executable, str(BARE), str(bare_port), str(body_file)]
            bare = await _spawn("bare", argv, root / "bare.log", dict(os.environ))
            await _until(_answers_any(bare_port), "the bare app", 30)
            print(
                f"fleet_list: {len(answer.content)} bytes, {len(view['members'])} members, "
                f"viewVersion {view['viewVersion']}, {_held_tickets(view)} pending tickets",
                flush=True,
            )
            samples: dict[int, tuple[list[Point], list[Point]]] = {c: ([], []) for c in CLIENTS}
            for _ in range(REPEATS):
                for clients in CLIENTS:
                    bare.pause()
                    samples[clients][0].append(await _load(fleet.port, clients, auth))
                    bare.resume()
                    fleet.pause()
                    samples[clients][1].append(await _load(bare_port, clients, auth))
                    fleet.resume()
            results = {c: (median(ours), median(theirs)) for c, (ours, theirs) in samples.items()}
            bare.pause()
            async with httpx.AsyncClient(timeout=60) as client:
                etag = (await client.get(f"{fleet.base}/v1/fleet", headers=auth)).headers["etag"]
            revalidate = {**auth, "If-None-Match": etag}
            # a new version during the run (a health tick) answers 200 until the tag is new again
            cached = await _load(
                fleet.port, max(CLIENTS), revalidate, statuses_allowed=frozenset({200, 304})
            )
            bare.resume()
        finally:
            fleet.resume()
            if bare is not None:
                await bare.stop()
            await fleet.stop()
    return report(results, cached)


async def _load(
    port: int, clients: int, headers: dict[str, str], statuses_allowed: frozenset[int] = OK
) -> Point:
    return await load(
        port,
        clients,
        headers,
        warmup=WARMUP_SECONDS,
        seconds=MEASURE_SECONDS,
        statuses_allowed=statuses_allowed,
    )


def _answers_any(port: int) -> Callable[[], Awaitable[bool]]:
    return _answers(f"http://127.0.0.1:{port}/v1/fleet")


def _held_tickets(view: dict[str, Any]) -> int:
    return sum(len(m.get("pendingTickets", ())) for m in view["members"])


def report(results: dict[int, tuple[Point, Point]], cached: Point) -> int:
    print(f"{'clients':>8} {'side':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for clients, (ours, theirs) in results.items():
        for side, point in (("fleetd", ours), ("bare", theirs)):
            print(f"{clients:>8} {side:>7} {point.rate:9.1f} {point.p50:8.2f} {point.p99:8.2f}")
    ours, theirs = results[max(CLIENTS)]
    throughput = theirs.rate / ours.rate
    p99 = ours.p99 / theirs.p99
    share = cached.statuses.get(304, 0) / sum(cached.statuses.values())
    print(
        f"If-None-Match at 50 clients: {cached.rate:.1f} req/s, p99 {cached.p99:.2f} ms "
        f"({share:.0%} answered 304 Not Modified)"
    )
    print(f"at 50 clients: bare/fleetd throughput {throughput:.2f}, fleetd/bare p99 {p99:.2f}")
    ok_rate = throughput <= TARGET_THROUGHPUT_RATIO
    ok_p99 = p99 <= TARGET_P99_RATIO
    print(f"target throughput ratio <= {TARGET_THROUGHPUT_RATIO:g}: {_verdict(ok_rate)}")
    print(f"target p99 ratio <= {TARGET_P99_RATIO:g}: {_verdict(ok_p99)}")
    return 0 if ok_rate and ok_p99 else 1


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.members, arguments.rounds)))
