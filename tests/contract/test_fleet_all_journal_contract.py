"""Published summaries in the journal (issue 24 item 2), on the fake, SQLite and PostgreSQL: a
summary at its caps is stored and read back as published by another client; and on PostgreSQL,
``GET /v1/fleet?scope=all`` reads the rows within the journal's deadline: a frozen database
answers this instance alone, saying the read failed, and the next answer reads every row again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock, SystemClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.memory import InMemoryInbox
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import MAX_SUMMARY_BYTES, InstanceRecord
from fleetd.runtime.fleet_summary import MAX_SUMMARY_MEMBERS, summarize
from fleetd.testing import OPERATOR_TOKEN, sample_document
from tests.contract.frozen_proxy import FrozenProxy
from tests.contract.journal_cases import T0
from tests.contract.test_journal_deadline_live import PG_HOST, PG_PORT, SLACK, proxied_url

if TYPE_CHECKING:
    from tests.contract.journal_fixtures import JournalKit

pytest_plugins = ["tests.contract.journal_fixtures"]

CLOCK = SystemClock()


def big_view(members: int) -> dict[str, Any]:
    """An operator view of ``members`` members over two leads, one incident each."""
    return {
        "generatedAt": T0.isoformat(),
        "controlLink": {"state": "up"},
        "healthCoverage": {"status": "full", "reason": "a person is notified"},
        "leads": [
            {"name": name, "agent": name, "liveStatus": "idle", "health": None}
            for name in ("lead-a", "lead-b")
        ],
        "members": [
            {
                "sessionId": f"sess_{i:08x}-0000-4000-8000-000000000000",
                "name": f"member-{i:05d}",
                "owner": "lead-a" if i % 2 else "lead-b",
                "profile": "sonnet",
                "state": "busy",
                "liveStatus": "working",
                "turn": i % 40,
                "queued": 0,
                "stateAgeSeconds": 12.345,
                "health": {"state": "WORKING", "ageSeconds": 3.0},
            }
            for i in range(members)
        ],
        "incidents": [],
        "capacity": [{"profile": "sonnet", "maxLoad": None, "live": members, "free": None}],
    }


def published(members: int, instance: str = "beta") -> dict[str, Any]:
    summary = summarize(big_view(members), instance=instance)
    return summary.model_dump(mode="json", by_alias=True)


async def test_a_summary_at_its_caps_is_stored_and_read_back_as_published(
    journal_kit: JournalKit,
) -> None:
    """A summary of more members than it may list keeps :data:`MAX_SUMMARY_MEMBERS` of them,
    fits the journal's bound on a summary, and another client reads it back unchanged."""
    summary = published(MAX_SUMMARY_MEMBERS + 200)
    assert summary["membersLeftOut"] == 200
    assert len(json.dumps(summary).encode()) < MAX_SUMMARY_BYTES
    journal = journal_kit.build()
    record = InstanceRecord(
        instance="beta", host="h", version="1", started_at=T0, last_seen=T0, summary=summary
    )
    await journal.renew_instance(record)
    [read] = await journal_kit.build().instances()
    assert read.summary == summary


@pytest.fixture
async def proxy() -> AsyncIterator[FrozenProxy]:
    running = FrozenProxy(PG_HOST, PG_PORT)
    await running.start()
    try:
        yield running
    finally:
        await running.close()


@pytest.mark.postgres
async def test_scope_all_reads_the_rows_within_the_deadline_and_says_when_it_could_not(
    journal_pg_base: str, journal_pg_schema: str, proxy: FrozenProxy, tmp_path: Path
) -> None:
    """On the path ``fleetd serve`` runs (the journal built from ``journal.url`` through a proxy,
    ``journal.operationTimeoutMs`` 1000): ``alpha`` renews with its summary and a second
    instance ``beta`` publishes its own; scope=all shows both. While PostgreSQL is frozen the
    answer comes within the deadline: ``alpha`` alone, ``journal.read`` failed, the note that
    the others are unknown. Thawed, the next answer shows ``beta`` again."""
    assert journal_pg_base
    url = proxied_url(proxy.port, journal_pg_schema)
    document = {
        **sample_document(tmp_path),
        "instance": "alpha",
        "journal": {"url": url, "operationTimeoutMs": 1000},
        "health": {"enabled": True, "snapshotIntervalSeconds": 15},
    }
    environ = {"T_LEAD": "lead-token", "T_LEAD_B": "lead-b-token", "T_OPERATOR": OPERATOR_TOKEN}
    clock = FakeClock()
    loaded = parse_config(document, environ, base_dir=tmp_path)
    config = ConfigRef(loaded, environ=environ, now=clock.now())
    service = build_service(
        config,
        environ=environ,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
    )
    other = SqlJournal(url)
    journal = service.health.journal
    assert journal is not None
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    transport = httpx.ASGITransport(app=create_app(service))
    try:
        await service.scheduler.run_once("instances")
        beta = InstanceRecord(
            instance="beta",
            host="beta-host",
            version="1",
            started_at=clock.now() - timedelta(minutes=5),
            last_seen=clock.now() - timedelta(seconds=5),
            summary=published(1000),
        )
        await other.renew_instance(beta)
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:

            async def scope_all() -> tuple[dict[str, Any], float]:
                started = CLOCK.monotonic()
                answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=operator)
                assert answer.status_code == 200
                return answer.json()["result"], CLOCK.monotonic() - started

            both, _ = await scope_all()
            assert [(p["instance"], p["down"]) for p in both["instances"]] == [
                ("alpha", False),
                ("beta", False),
            ]
            rows = {row.instance: row for row in await other.instances()}
            alpha_summary = rows["alpha"].summary  # published by the instances loop
            assert alpha_summary is not None
            assert alpha_summary["instance"] == "alpha"
            assert both["instances"][1]["summary"]["membersTotal"] == 1000
            # not yet seen to renew: shown by the time beta's row says (paging never reads it)
            assert both["instances"][1]["ageSeconds"] == 5.0
            assert both["instances"][1]["lastSeen"] == beta.last_seen.isoformat()

            proxy.freeze()
            frozen, took = await scope_all()
            assert took < 1 + SLACK
            assert [p["instance"] for p in frozen["instances"]] == ["alpha"]
            assert frozen["journal"]["read"] == "failed"
            assert frozen["journal"]["reason"] == "journal unavailable (timeout)"
            assert "unknown, not absent" in frozen["note"]

            proxy.thaw()
            clock.advance(4)
            again, _ = await scope_all()
            assert [p["instance"] for p in again["instances"]] == ["alpha", "beta"]
            assert again["journal"] == {"shared": True, "read": "ok"}
            assert (again["instances"][1]["ageSeconds"], again["instances"][1]["down"]) == (
                9.0,
                False,
            )
    finally:
        proxy.thaw()
        await other.close()
        await journal.close()


async def test_renewals_read_without_summaries_and_summaries_read_as_stored_text(
    journal_kit: JournalKit,
) -> None:
    """``instances(summaries=False)`` gives every row but no summary; ``instance_summaries``
    gives the named rows' summaries as JSON text that decodes to what was published, and
    leaves out a row without a summary and a name with no row."""
    journal = journal_kit.build()
    summary = published(10)
    for name, published_summary in (("alpha", summary), ("gamma", None)):
        await journal.renew_instance(
            InstanceRecord(
                instance=name,
                host="h",
                version="1",
                started_at=T0,
                last_seen=T0,
                summary=published_summary,
            )
        )
    reader = journal_kit.build()
    bare = await reader.instances(summaries=False)
    assert sorted(r.instance for r in bare) == ["alpha", "gamma"]
    assert all(r.summary is None for r in bare)
    assert [r.host for r in bare] == ["h", "h"]
    texts = await reader.instance_summaries(["alpha", "gamma", "nobody"])
    assert set(texts) == {"alpha"}
    assert json.loads(texts["alpha"]) == summary
    assert await reader.instance_summaries([]) == {}
