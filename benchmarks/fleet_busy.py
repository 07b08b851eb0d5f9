"""``GET /v1/fleet`` of a busy fleetd (members changing while it is read) against a bare app.

The fleet is built as in ``benchmarks/fleet_list.py`` (``fleetd sim`` and ``fleetd serve``, each
its own process; a lead spawns 1,000 members through ``fleet_spawn`` and waits for each to call
back). Then, while fleetd is measured, the lead keeps it busy: 2 ``fleet_send`` a second, each to
the next member in turn, and one ``fleet_poll`` a second collecting the replies. Each task moves the
view about six times (the send accepted, the prompt delivered, herdr's working and idle, the
member's ``fleet_reply``, the reply collected), so the view moves a little more than the 10 times a
second of the criterion; the run prints how many versions a second it moved through. Most requests
find a version nobody has built yet.

Load: 10 concurrent keep-alive clients (``support/http_load.py``) asking ``GET /v1/fleet`` with
the operator's token and no ``If-None-Match``, ``MEASURE_SECONDS`` after ``WARMUP_SECONDS``,
``REPEATS`` times alternating with the bare side: a bare FastAPI app (``support/bare_fleet.py``,
same uvicorn settings as ``fleetd serve``) serving the operator's answer saved once the fleet was
built. While the bare app is measured, fleetd, the simulator and the lead's sends are stopped;
while fleetd is measured the idle bare app is stopped. The median of the repeats is reported,
with how many versions a second fleetd's view moved through.

Targets: bare/fleetd throughput at most 2, fleetd p99 at most 2 x bare p99. Exits 1 when a
target is missed. Run: ``.venv/bin/python benchmarks/fleet_busy.py`` (``--members`` and
``--tasks`` change the fleet and the tasks sent a second; about three minutes on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import httpx
from fleet_list import (
    BARE,
    OPERATOR_TOKEN,
    Fleet,
    Process,
    _answers,
    _free_port,
    _lead,
    _spawn,
    _until,
    build_fleet,
)
from support.http_load import Point, load, median

CLIENTS = 10
WARMUP_SECONDS = 1.0
MEASURE_SECONDS = 5.0
REPEATS = 3
TARGET_THROUGHPUT_RATIO = 2.0
TARGET_P99_RATIO = 2.0


async def _version(base: str, auth: dict[str, str]) -> int:
    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.get(f"{base}/v1/fleet", headers=auth)
    version: int = answer.json()["result"]["viewVersion"]
    return version


@contextlib.asynccontextmanager
async def busy(base: str, sessions: list[str], per_second: int) -> AsyncIterator[list[int]]:
    """While open, the lead sends ``per_second`` tasks a second (the next members in turn) and
    collects the replies once a second. Yields ``[tasks sent]``."""
    sent = [0]
    calls: set[asyncio.Task[Any]] = set()

    async def quietly(call: Awaitable[dict[str, Any]]) -> None:
        with contextlib.suppress(RuntimeError, httpx.HTTPError):  # a refusal is no load lost
            await call

    async def drive() -> None:
        async with _lead(base) as call:
            started = time.monotonic()
            while True:
                due = started + sent[0] / per_second
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                target = sessions[sent[0] % len(sessions)]
                work = [call("fleet_send", target=target, prompt=f"busy {sent[0]}")]
                sent[0] += 1
                if sent[0] % per_second == 0:
                    work.append(call("fleet_poll"))
                for item in work:
                    future = asyncio.ensure_future(quietly(item))
                    calls.add(future)
                    future.add_done_callback(calls.discard)

    if per_second <= 0:  # a quiet fleet: what the loops alone cost (``--tasks 0``)
        yield sent
        return
    task = asyncio.ensure_future(drive())
    try:
        yield sent
    finally:
        for future in (task, *calls):
            future.cancel()
        await asyncio.gather(task, *calls, return_exceptions=True)


async def main(members: int, per_second: int) -> int:
    with tempfile.TemporaryDirectory(prefix="fleetd-bench-") as tmp:
        root = Path(tmp)
        fleet = Fleet(root=root, port=_free_port())
        bare: Process | None = None
        auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        try:
            print(f"building: {members} members (fleetd sim)", flush=True)
            await fleet.start()
            await build_fleet(fleet, members, 0)
            async with _lead(fleet.base) as call:
                listed = await call("fleet_list")
            live = ("ready", "busy", "done")
            sessions = [m["sessionId"] for m in listed["members"] if m["state"] in live]
            async with httpx.AsyncClient(timeout=60) as client:
                answer = await client.get(f"{fleet.base}/v1/fleet", headers=auth)
            body_file = root / "fleet.json"
            body_file.write_bytes(answer.content)
            bare_port = _free_port()
            argv = [sys.executable, str(BARE), str(bare_port), str(body_file)]
            bare = await _spawn("bare", argv, root / "bare.log", dict(os.environ))
            await _until(_answers(f"http://127.0.0.1:{bare_port}/v1/fleet"), "the bare app", 30)
            print(f"fleet_list: {len(answer.content)} bytes, {len(sessions)} members", flush=True)
            ours: list[Point] = []
            theirs: list[Point] = []
            versions: list[float] = []
            for _ in range(REPEATS):
                bare.pause()
                async with busy(fleet.base, sessions, per_second):
                    await asyncio.sleep(WARMUP_SECONDS)
                    before, started = await _version(fleet.base, auth), time.monotonic()
                    ours.append(await _load(fleet.port, auth))
                    after, took = await _version(fleet.base, auth), time.monotonic() - started
                versions.append((after - before) / took)
                bare.resume()
                fleet.pause()
                theirs.append(await _load(bare_port, auth))
                fleet.resume()
        finally:
            fleet.resume()
            if bare is not None:
                await bare.stop()
            await fleet.stop()
    return report(median(ours), median(theirs), sorted(versions)[len(versions) // 2], per_second)


async def _load(port: int, headers: dict[str, str]) -> Point:
    return await load(port, CLIENTS, headers, warmup=WARMUP_SECONDS, seconds=MEASURE_SECONDS)


def report(ours: Point, theirs: Point, versions: float, per_second: int) -> int:
    print(f"{per_second} tasks sent a second; the view moved {versions:.1f} versions a second")
    print(f"{'clients':>8} {'side':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for side, point in (("fleetd", ours), ("bare", theirs)):
        print(f"{CLIENTS:>8} {side:>7} {point.rate:9.1f} {point.p50:8.2f} {point.p99:8.2f}")
    throughput = theirs.rate / ours.rate
    p99 = ours.p99 / theirs.p99
    print(f"bare/fleetd throughput {throughput:.2f}, fleetd/bare p99 {p99:.2f}")
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
    parser.add_argument("--tasks", type=int, default=2, help="tasks sent a second")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.members, arguments.tasks)))
