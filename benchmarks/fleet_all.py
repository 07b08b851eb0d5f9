"""``GET /v1/fleet?scope=all`` of three instances × 1,000 members against the single-instance
``GET /v1/fleet`` of 3,000 members, in the same run.

One run builds, in this process and by the production composition root
(:func:`fleetd.testing.build_test_fleet`: fake herdr, in-memory inbox, fake clock):

* three instances ``a``, ``b`` and ``c`` on one PostgreSQL journal (a fresh schema of the local
  test database), each with ten leads and 1,000 members, one ended task each, one health tick;
  each runs its ``instances`` loop once, so each row holds its published summary;
* one instance with thirty leads and 3,000 members built the same way (its journal in memory:
  ``fleet_list`` reads no journal).

Then, alternating the sides ``REPEATS`` times after ``WARMUP`` requests each, it times one
request as the operator through each instance's own ASGI app (httpx's ASGI transport: routing,
authentication, the handler, the body) with the answer decoded (``response.json()``):

* ``scope=all`` on ``a``, steady: its own view (the bytes ``GET /v1/fleet`` sends), the rows'
  renewals read from PostgreSQL (with the journal's deadline), the summaries of ``b`` and ``c``
  as kept since their last renewal;
* ``scope=all`` on ``a`` just after ``b`` and ``c`` renewed (each renews, untimed, before each
  such request): the summaries are read from PostgreSQL again, decoded and encoded;
* ``GET /v1/fleet`` of the 3,000-member instance.

Target: the median of each ``scope=all`` series within ``TARGET_RATIO`` (2×) the median of the
single view. Exits 1 when one is missed. Run: ``.venv/bin/python benchmarks/fleet_all.py
[--members N] [--postgres URL]`` (about a minute on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus
from fleetd.journal.sql import SqlJournal
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
INSTANCES = ("a", "b", "c")
MEMBERS = 1_000
LEADS_PER_THOUSAND = 10
WARMUP = 5
REPEATS = 60
TARGET_RATIO = 2.0
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def _document(root: Path, name: str, members: int, journal: str | None) -> dict[str, Any]:
    leads = max(1, members * LEADS_PER_THOUSAND // 1000)
    document: dict[str, Any] = {
        "instance": name,
        "api": {"publicUrl": "http://127.0.0.1:1"},
        "operatorTokenEnv": "T_OPERATOR",
        "leads": [
            {"name": f"lead{n}", "agent": f"lead{n}", "tokenEnv": f"T_LEAD_{n}"}
            for n in range(leads)
        ],
        "profiles": {f"p{n}": {"kind": "claude"} for n in range(8)},
        "worktrees": {"root": str(root / "worktrees")},
        "health": {"enabled": True, "snapshotIntervalSeconds": 30},
    }
    if journal is not None:
        document["journal"] = {"url": journal}
    return document


async def _fleet(root: Path, name: str, members: int, journal: str | None) -> TestFleet:
    """An instance ``name`` with ``members`` members, one ended task each, one health tick."""
    document = _document(root, name, members, journal)
    leads = [lead["name"] for lead in document["leads"]]
    environ = {f"T_LEAD_{n}": f"lead-token-{name}-{n:04d}-for-the-benchmark" for n in range(99)}
    control = FakeAgentControl(keep_calls=False)
    for lead in leads:
        control.add_agent(lead, status=AgentStatus.IDLE)
    fleet = build_test_fleet(
        root,
        document=document,
        environ=environ,
        control=control,
        check_views=False,
        journal=SqlJournal(journal) if journal is not None else None,
    )
    await fleet.service.own_lead_keys()
    for n in range(members):
        lead = Caller(role=Role.LEAD, name=leads[n % len(leads)])
        row = await fleet.ok("fleet_spawn", lead, profile=f"p{n % 8}")
        member = fleet.member(row["sessionId"])
        await fleet.service.registry.contact(member)
        await fleet.ok("fleet_send", lead, target=row["sessionId"], prompt="a task")
        await fleet.ok("fleet_reply", member, content="done")
    for lead in leads:
        await fleet.ok("fleet_poll", Caller(role=Role.LEAD, name=lead))
    await fleet.service.observe_herdr()
    await fleet.service.health.tick()
    return fleet


@contextlib.contextmanager
def _schema(base: str) -> Iterator[str]:
    schema = f"fleetd_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{base}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def _timed(client: httpx.AsyncClient, params: dict[str, str]) -> tuple[float, int]:
    """One request's seconds, answer decoded, and its body's size."""
    started = time.perf_counter()
    answer = await client.get("/v1/fleet", params=params, headers=OPERATOR)
    answer.json()
    took = time.perf_counter() - started
    assert answer.status_code == 200, answer.text[:200]
    return took, len(answer.content)


def _ms(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000


async def main(members: int, postgres: str) -> int:
    with tempfile.TemporaryDirectory() as tmp, _schema(postgres) as url:
        root = Path(tmp)
        started = time.perf_counter()
        instances = [await _fleet(root / n, n, members, url) for n in INSTANCES]
        single = await _fleet(root / "single", "single", members * len(INSTANCES), None)
        for fleet in instances:
            await fleet.service.scheduler.run_once("instances")
        print(
            f"built {len(INSTANCES)} instances × {members} members and one of "
            f"{members * len(INSTANCES)} in {time.perf_counter() - started:.1f} s"
        )
        every: list[float] = []
        renewed: list[float] = []
        one: list[float] = []
        reads = instances[0].service.across.summary_reads
        sizes: dict[str, int] = {}
        transport_all = httpx.ASGITransport(app=create_app(instances[0].service))
        transport_one = httpx.ASGITransport(app=create_app(single.service))
        try:
            async with (
                httpx.AsyncClient(transport=transport_all, base_url="http://a") as a,
                httpx.AsyncClient(transport=transport_one, base_url="http://s") as s,
            ):
                first = (await a.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)).json()
                parts = first["result"]["instances"]
                assert [p["instance"] for p in parts] == list(INSTANCES)
                assert all(p["summary"]["membersTotal"] == members for p in parts[1:])
                for _ in range(WARMUP):
                    await _timed(a, {"scope": "all"})
                    await _timed(s, {})
                for _ in range(REPEATS):
                    took, sizes["all"] = await _timed(a, {"scope": "all"})
                    every.append(took)
                    for fleet in instances[1:]:
                        fleet.clock.advance(1)
                        await fleet.service.scheduler.run_once("instances")
                    took, _ = await _timed(a, {"scope": "all"})
                    renewed.append(took)
                    took, sizes["one"] = await _timed(s, {})
                    one.append(took)
                reads = instances[0].service.across.summary_reads - reads
        finally:
            for fleet in instances:
                journal = fleet.service.health.journal
                assert journal is not None
                await journal.close()
    print(
        f"scope=all, {len(INSTANCES)} × {members} members, steady: p50 {_ms(every, 0.5):.2f} ms, "
        f"p99 {_ms(every, 0.99):.2f} ms, body {sizes['all']:,} bytes"
    )
    print(
        f"scope=all just after b and c renewed: p50 {_ms(renewed, 0.5):.2f} ms, "
        f"p99 {_ms(renewed, 0.99):.2f} ms ({reads} reads of the summaries in "
        f"{2 * REPEATS} answers)"
    )
    print(
        f"fleet_list, {members * len(INSTANCES)} members: p50 {_ms(one, 0.5):.2f} ms, "
        f"p99 {_ms(one, 0.99):.2f} ms, body {sizes['one']:,} bytes"
    )
    met = True
    for name, series in (("steady", every), ("after a renewal", renewed)):
        ratio = statistics.median(series) / statistics.median(one)
        met = met and ratio <= TARGET_RATIO
        print(
            f"p50 ratio scope=all ({name}) / fleet_list: {ratio:.2f} "
            f"(target <= {TARGET_RATIO}) {'met' if ratio <= TARGET_RATIO else 'MISSED'}"
        )
    return 0 if met else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=MEMBERS, help="members per instance")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a PostgreSQL database URL")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.members, arguments.postgres)))
