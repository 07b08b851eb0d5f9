"""What one version of the fleet view costs, in one process, at 1,000 and 5,000 members.

A test fleet on fakes (the production composition root, ``check_views`` off) spawns the
members through ``fleet_spawn``, half of them get a task through ``fleet_send``; then, per
size, two paths are timed, each for ``ROUNDS`` versions with one member's herdr status changed
between versions:

* ``encoded``: the operator's ``GET /v1/fleet`` body of the new version (facts read, only the
  changed member's row built again, the body assembled);
* ``tool``: the operator's ``fleet_list`` answer of the new version through the registry (every
  member row built, the answer checked against its result model, then encoded as the wire does).

Prints the least, median and p90 milliseconds of each (the least is the steadiest figure on a
shared machine). No target, so it always exits 0: it is a before/after figure for changes to
how the rows are built (``benchmarks/README.md``). Run:
``.venv/bin/python benchmarks/fleet_version.py [--members 1000 5000] [--rounds 40]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from fleetd.api.tools import Caller, Role
from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet, sample_document

OPERATOR = Caller(role=Role.OPERATOR, name="operator")


async def _fleet(root: Path, members: int) -> tuple[TestFleet, list[str]]:
    document = sample_document(root)
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(root, document=document, check_views=False)
    await fleet.service.own_lead_keys()
    sids = []
    for n in range(members):
        row = await fleet.ok("fleet_spawn", profile=("codex", "opencode")[n % 2])
        sids.append(row["sessionId"])
    for sid in sids:
        await fleet.service.registry.contact(fleet.member(sid))
    await fleet.poll()
    for sid in sids[::2]:
        await fleet.ok("fleet_send", target=sid, prompt="a task")
    await fleet.poll()
    await fleet.service.observe_herdr()
    await fleet.service.health.tick()
    return fleet, sids


def _move(fleet: TestFleet, sids: list[str], n: int) -> None:
    """One member's herdr status changes and herdr's view of it is seen: a new version."""
    sid = sids[(n * 7) % len(sids)]
    status = (AgentStatus.WORKING, AgentStatus.IDLE)[n % 2]
    fleet.set_status(sid, status)


async def _time_encoded(fleet: TestFleet, sids: list[str], rounds: int) -> list[float]:
    views = fleet.service.views
    taken = []
    for n in range(rounds):
        fleet.clock.advance(0.1)
        _move(fleet, sids, n)
        await fleet.bridge.deliverer.poll_once()
        views.touched()
        started = time.perf_counter()
        await views.encoded(OPERATOR)
        taken.append((time.perf_counter() - started) * 1000)
    return taken


async def _time_tool(fleet: TestFleet, sids: list[str], rounds: int) -> list[float]:
    views = fleet.service.views
    taken = []
    for n in range(rounds):
        fleet.clock.advance(0.1)
        _move(fleet, sids, n + rounds)
        await fleet.bridge.deliverer.poll_once()
        views.touched()
        started = time.perf_counter()
        result = await fleet.call("fleet_list", OPERATOR)
        json.dumps(result.to_json(), ensure_ascii=False, separators=(",", ":"))
        taken.append((time.perf_counter() - started) * 1000)
    return taken


def _figures(name: str, members: int, taken: list[float]) -> str:
    ordered = sorted(taken)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    median = statistics.median(ordered)
    return (
        f"{members:>6} {name:<8} min {ordered[0]:8.2f} ms  median {median:8.2f} ms"
        f"  p90 {p90:8.2f} ms"
    )


async def main(sizes: list[int], rounds: int) -> None:
    for members in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            fleet, sids = await _fleet(Path(tmp), members)
            await fleet.service.views.encoded(OPERATOR)  # the first version builds every row
            encoded = await _time_encoded(fleet, sids, rounds)
            tool = await _time_tool(fleet, sids, rounds)
            print(_figures("encoded", members, encoded), flush=True)
            print(_figures("tool", members, tool), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, nargs="+", default=[1_000, 5_000])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(main(args.members, args.rounds))
