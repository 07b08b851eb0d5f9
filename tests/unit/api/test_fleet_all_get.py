"""GET /v1/fleet?scope=all through the app: who may ask, which queries are refused, and what it
answers with one instance (SQLite) and with several sharing a journal."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from fleetd.api.app import create_app
from fleetd.errors import JournalUnavailableError
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import InstanceRecord
from fleetd.runtime.fleet_all import SINGLE_INSTANCE_NOTE
from fleetd.runtime.fleet_summary import summarize
from fleetd.testing import LEAD_TOKEN, OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts" / "api"
LEAD = {"Authorization": f"Bearer {LEAD_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
INTERVAL = 15


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((CONTRACTS / name).read_text(encoding="utf-8")))


async def _client(fleet: TestFleet) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    return httpx.AsyncClient(transport=transport, base_url="http://fleetd")


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    await built.service.observe_herdr()
    return built


@pytest.fixture
async def client(fleet: TestFleet) -> AsyncIterator[httpx.AsyncClient]:
    async with await _client(fleet) as opened:
        yield opened


async def test_a_lead_or_a_member_token_is_refused_with_the_reason(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """scope=all is the operator's: a lead's and a member's token get 403 ``forbidden`` whose
    message says whose scope it is; the lead's own view still answers without it."""
    answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=LEAD)
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert error["code"] == "forbidden"
    assert "operator" in error["message"]
    assert "hint" not in error
    session_id = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(session_id)
    assert session is not None
    assert session.pane_id is not None
    token = fleet.control.env_of(session.pane_id)["FLEETD_TOKEN"]
    member = {"Authorization": f"Bearer {token}"}
    refused = await client.get("/v1/fleet", params={"scope": "all"}, headers=member)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
    own = await client.get("/v1/fleet", params={"scope": "instance"}, headers=LEAD)
    assert own.status_code == 200
    unauthenticated = await client.get("/v1/fleet", params={"scope": "all"})
    assert unauthenticated.status_code == 401


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ({"scope": "everything"}, "scope"),
        ({"scope": ""}, "scope"),
        ({"scope": "all", "wait": "5"}, "wait"),
        ({"scope": "all", "wait": "soon"}, "wait"),
    ],
)
async def test_an_unknown_scope_or_a_wait_with_scope_all_is_refused(
    client: httpx.AsyncClient, query: dict[str, str], path: str
) -> None:
    """A scope other than ``instance`` or ``all`` is 422 ``invalid_arguments`` naming ``scope``
    and the two it accepts; scope=all answers at once, so a wait is refused too."""
    answer = await client.get("/v1/fleet", params=query, headers=OPERATOR)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_arguments"
    assert [e["path"] for e in error["hint"]["errors"]] == [path]
    assert error["hint"]["schema"]["properties"]["scope"]["enum"] == ["instance", "all"]


async def test_with_sqlite_scope_all_answers_this_instance_alone_and_says_so(
    fleet: TestFleet, client: httpx.AsyncClient
) -> None:
    """One instance on an SQLite journal: one part, this instance, answering, never down, its
    ``view`` the very document GET /v1/fleet answers; the note says SQLite serves one fleetd,
    the journal is not read; the answer matches its contract. Its row publishes no summary
    (no other instance reads an SQLite journal)."""
    await fleet.spawn_ready()
    await fleet.service.scheduler.run_once("instances")
    journal = fleet.service.health.journal
    assert journal is not None
    [row] = await journal.instances()
    assert row.summary is None
    answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "no-store"
    no_wait = await client.get(
        "/v1/fleet", params={"scope": "all", "wait": "0.00"}, headers=OPERATOR
    )
    assert no_wait.status_code == 200
    assert "etag" not in answer.headers
    result = answer.json()["result"]
    assert result["note"] == SINGLE_INSTANCE_NOTE
    assert result["journal"] == {"shared": False, "read": "not_shared"}
    assert (result["live"], result["down"]) == (1, 0)
    [part] = result["instances"]
    assert (part["instance"], part["answering"], part["down"]) == (
        fleet.service.instances.instance,
        True,
        False,
    )
    single = (await client.get("/v1/fleet", headers=OPERATOR)).json()["result"]
    assert part["view"] == single
    assert [
        e.message for e in _schema("fleet_list.scope-all.result.schema.json").iter_errors(result)
    ] == []


def shared_fleet(root: Path, journal: InMemoryJournal, name: str) -> TestFleet:
    document: dict[str, Any] = sample_document(root)
    document["instance"] = name
    document["journal"] = {"url": "postgresql+psycopg://fleetd@db.example/fleet"}
    document["health"] = {"enabled": True, "snapshotIntervalSeconds": INTERVAL}
    return build_test_fleet(root, document=document, journal=journal)


async def test_a_shared_journal_shows_every_instance_with_its_age_and_a_silent_one_down(
    tmp_path: Path,
) -> None:
    """Three instances share one journal (the in-memory port standing in for PostgreSQL, whose
    contract test reads the same rows back). ``a`` answers: its own view, then ``b`` (renewed
    20 s ago: live, its summary as published, aged 20 s) and ``c`` (renewed 31 s ago, past two
    intervals: down, its last summary still shown); live 2, down 1. Ages are counted from when
    ``a`` saw each row renew, on its own clock. A row whose summary is of an unknown version
    shows no summary and says why."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    b = shared_fleet(tmp_path / "b", journal, "b")
    c = shared_fleet(tmp_path / "c", journal, "c")
    await b.spawn_ready()
    await c.spawn_ready()
    await c.spawn_ready()
    await c.service.scheduler.run_once("instances")  # c renews at t0 and falls silent
    c_summary = (await journal.instances())[0].summary
    assert c_summary is not None
    assert c_summary["membersTotal"] == 2
    await a.service.scheduler.run_once("instances")  # a sees c renew at t0
    for fleet in (a, b):
        fleet.clock.advance(11)
    await b.service.scheduler.run_once("instances")  # b renews at t0 + 11
    await a.service.scheduler.run_once("instances")  # and a sees it
    for fleet in (a, b):
        fleet.clock.advance(20)
    await a.service.scheduler.run_once("instances")  # a at t0 + 31
    async with await _client(a) as client:
        answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert "note" not in result
    assert result["journal"] == {"shared": True, "read": "ok"}
    assert [(p["instance"], p["answering"], p["down"]) for p in result["instances"]] == [
        ("a", True, False),
        ("b", False, False),
        ("c", False, True),
    ]
    own, peer, silent = result["instances"]
    assert own["ageSeconds"] == 0.0
    assert own["view"]["members"] == []
    assert (peer["ageSeconds"], silent["ageSeconds"]) == (20.0, 31.0)
    assert peer["summary"]["membersByLead"] == {"lead": 1}
    assert silent["summary"] == c_summary
    assert (result["live"], result["down"]) == (2, 1)
    schema = _schema("fleet_list.scope-all.result.schema.json")
    assert [e.message for e in schema.iter_errors(result)] == []

    future = summarize(own["view"], instance="b").model_dump(mode="json", by_alias=True)
    future["version"] = 2
    row = InstanceRecord(
        instance="b",
        host="host-b",
        version="9.9",
        started_at=b.clock.now() - timedelta(hours=1),
        last_seen=b.clock.now(),
        summary=future,
    )
    await journal.renew_instance(row)
    async with await _client(a) as client:
        again = (await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)).json()
    peer = again["result"]["instances"][1]
    assert (peer["summary"], peer["summaryProblem"]) == (None, "unknown_version: 2")


async def test_a_summary_is_read_again_only_after_its_instance_renewed(tmp_path: Path) -> None:
    """Answers read the rows' renewals each time but a summary only when its row was renewed
    since it was last read; a row no longer listed is no longer kept; a stored summary that is
    no JSON object is shown as unreadable."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    b = shared_fleet(tmp_path / "b", journal, "b")
    await b.spawn_ready()
    await a.service.scheduler.run_once("instances")
    await b.service.scheduler.run_once("instances")
    across = a.service.across
    async with await _client(a) as client:

        async def members_of_b() -> object:
            answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
            return answer.json()["result"]["instances"][1]["summary"]["membersTotal"]

        assert await members_of_b() == 1
        assert await members_of_b() == 1
        assert across.summary_reads == 1
        await b.spawn_ready()
        assert await members_of_b() == 1  # not renewed yet: its last summary
        assert across.summary_reads == 1
        b.clock.advance(1)
        await b.service.scheduler.run_once("instances")
        assert await members_of_b() == 2
        assert across.summary_reads == 2
    assert set(across.kept) == {"b"}
    journal._instances.clear()  # every row retired
    async with await _client(a) as client:
        alone = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
    assert [p["instance"] for p in alone.json()["result"]["instances"]] == ["a"]
    assert across.kept == {}
    await b.service.scheduler.run_once("instances")
    original = journal.instance_summaries

    async def broken(names: object) -> dict[str, str]:
        return {"b": "[1, 2]"}

    journal.instance_summaries = broken  # type: ignore[method-assign]
    async with await _client(a) as client:
        odd = (await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)).json()
    journal.instance_summaries = original  # type: ignore[method-assign]
    peer = odd["result"]["instances"][1]
    assert (peer["summary"], peer["summaryProblem"]) == (None, "unreadable")


async def test_a_journal_that_cannot_be_read_is_said_once_per_outage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every ``scope=all`` answer during a journal outage says ``journal.read: failed``, but the
    log says it once (a dashboard polling every 5 s logged a line per poll), and once that the
    rows are read again."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    caplog.set_level(logging.INFO, logger="fleetd.instances")
    journal.fail_with = JournalUnavailableError("instances", "timeout")
    async with await _client(a) as client:
        for _ in range(3):
            answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
            assert answer.json()["result"]["journal"]["read"] == "failed"
        journal.fail_with = None
        answer = await client.get("/v1/fleet", params={"scope": "all"}, headers=OPERATOR)
        assert answer.json()["result"]["journal"]["read"] == "ok"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scope=all")]
    assert len(said) == 2
    assert "cannot be read" in said[0]
    assert "read again" in said[1]
