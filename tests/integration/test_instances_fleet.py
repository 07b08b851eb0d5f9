"""Several fleetd instances on one PostgreSQL journal (issue 24), as ``fleetd serve`` composes
them: each renews its ``instances`` row on the ``instances`` loop; one that stops renewing for two
snapshot intervals is INSTANCE_DOWN, paged once to a person however many instances notice it,
and resolved (once) when it renews again. ``GET /v1/fleet?scope=all`` on any of them shows the
others' published members, a stopped one as down. A restart resumes only its own incidents. An
SQLite journal that lists a second instance says that several instances need PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.health.states import Scope
from fleetd.herdr.fake import FakeAgentControl
from fleetd.identity import Caller, Role
from fleetd.inbox.port import ReplyInbox
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import StoredIncident
from fleetd.testing import OPERATOR_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer
from tests.integration.test_notify_sink_fleet import SECRET

pytest_plugins = ["tests.contract.journal_fixtures"]
pytestmark = pytest.mark.postgres

INTERVAL = 15  # health.snapshotIntervalSeconds


def instance_fleet(
    root: Path,
    name: str,
    journal_url: str,
    hook_url: str,
    *,
    lead: int = 0,
    inbox: ReplyInbox | None = None,
    extra_lead: str | None = None,
    control: FakeAgentControl | None = None,
    interval: int = INTERVAL,
) -> TestFleet:
    """A fleet named ``name`` whose journal is ``journal_url``, paging ``hook_url``, with the
    sample's lead number ``lead`` (instances on several hosts serve different leads), and
    ``extra_lead`` (its agent of the same name) beside it; ``inbox``: a broker shared with
    other instances; ``control``: the herdr of an earlier fleet on ``root`` (a restart);
    ``interval``: its snapshot interval."""
    root.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = sample_document(root)
    document["instance"] = name
    document["leads"] = document["leads"][lead : lead + 1]
    if extra_lead is not None:
        document["leads"].append({"name": extra_lead, "agent": extra_lead, "tokenEnv": "T_EXTRA"})
    document["journal"] = {"url": journal_url}
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": interval,
        "notifications": {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_KEY"},
    }
    env = {"HOOK_URL": hook_url, "HOOK_KEY": SECRET, "T_EXTRA": "extra-lead-token-0123456789"}
    journal = SqlJournal(journal_url)
    return build_test_fleet(
        root, document=document, environ=env, journal=journal, inbox=inbox, control=control
    )


async def renew(*fleets: TestFleet, seconds: int = 0) -> None:
    """Each fleet's clock moves ``seconds``, then its ``instances`` and ``webhook`` loops run."""
    for fleet in fleets:
        fleet.clock.advance(seconds)
        await fleet.service.scheduler.run_once("instances")
    for fleet in fleets:
        await fleet.service.scheduler.run_once("webhook")
        await fleet.service.scheduler.run_once("webhook")


def pages(server: HookServer) -> list[tuple[str, str, str]]:
    """(event type, subject, webhook-id) of every request the receiver got."""
    out = []
    for request in server.received:
        body = json.loads(request.body)
        facts = body["incident"]
        out.append((body["eventType"], facts["subject"], request.headers["webhook-id"]))
    return out


async def instance_incidents(fleet: TestFleet) -> list[StoredIncident]:
    journal = fleet.service.health.journal
    assert journal is not None
    snapshot = await journal.load_open()
    return [s for s in snapshot.open_incidents if s.incident.scope is Scope.INSTANCE]


async def test_an_instance_that_stops_renewing_is_paged_once_and_resolved_once(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """Three instances renew; ``b`` stops. Past two intervals ``a`` and ``c`` both notice it:
    one INSTANCE_DOWN incident (scope ``instance``, opened by one of them), one ``open`` page.
    More passes page nothing more. ``b`` renews again: the opener resolves it, one ``resolved``
    page; every page has its own webhook id."""
    async with HookServer() as server:
        a, b, c = (
            instance_fleet(tmp_path / name, name, journal_pg_url, server.url)
            for name in ("a", "b", "c")
        )
        try:
            await renew(a, b, c)
            rows = await a.service.health.journal.instances()  # type: ignore[union-attr]
            assert sorted(r.instance for r in rows) == ["a", "b", "c"]
            assert {r.leads for r in rows} == {("lead",)}
            for _ in range(2):  # 30 s: exactly two intervals, still live
                await renew(a, c, seconds=INTERVAL)
            assert await instance_incidents(a) == []
            await renew(a, c, seconds=INTERVAL)
            [down] = await instance_incidents(a)
            assert (down.incident.subject, down.incident.routing_reason) == (
                "b",
                "human_instance_down",
            )
            assert down.instance in ("a", "c")
            for _ in range(3):
                await renew(a, c, seconds=INTERVAL)
            assert [(kind, subject) for kind, subject, _ in pages(server)] == [("open", "b")]

            b.clock.advance(6 * INTERVAL)  # every clock reads the same time again
            assert b.clock.now() == a.clock.now() == c.clock.now()
            await renew(b)  # b is back; the opener resolves it on its next pass
            await renew(a, b, c, seconds=INTERVAL)
            await renew(a, b, c, seconds=INTERVAL)
            assert await instance_incidents(a) == []
            sent = pages(server)
            assert [(kind, subject) for kind, subject, _ in sent] == [
                ("open", "b"),
                ("resolved", "b"),
            ]
            assert len({webhook_id for _, _, webhook_id in sent}) == 2
        finally:
            for fleet in (a, b, c):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_instances_at_other_intervals_and_clocks_page_only_the_one_that_stops(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """``slow`` renews every 60 s, ``fast`` every 15 s, and ``ahead`` every 15 s with its clock
    two hours ahead of the others. For eight minutes every one renews on time: no incident, no
    page (each was judged by the judge's interval and the renewal time another host's clock
    wrote, so ``fast`` paged ``slow`` every minute and ``ahead`` paged both at once). Then
    ``slow`` stops: within two of its intervals and one pass, one page for it alone."""
    async with HookServer() as server:
        slow = instance_fleet(tmp_path / "slow", "slow", journal_pg_url, server.url, interval=60)
        fast = instance_fleet(tmp_path / "fast", "fast", journal_pg_url, server.url)
        ahead = instance_fleet(tmp_path / "ahead", "ahead", journal_pg_url, server.url)
        ahead.clock.advance(2 * 3600)
        try:
            for step in range(32):  # 8 minutes in steps of 15 s
                await renew(*((slow, fast, ahead) if step % 4 == 0 else (fast, ahead)))
                for fleet in (slow, fast, ahead):
                    fleet.clock.advance(INTERVAL)
                assert await instance_incidents(fast) == [], step
            assert pages(server) == []
            stopped = fast.clock.now()
            while not pages(server):
                await renew(fast, ahead, seconds=INTERVAL)
                assert fast.clock.now() - stopped <= timedelta(seconds=2 * 60 + 2 * INTERVAL)
            [down] = await instance_incidents(fast)
            assert down.incident.subject == "slow"
            for _ in range(4):  # an hour later by ahead's clock: its reminders are fast's
                await renew(fast, ahead, seconds=INTERVAL)
            assert [(kind, subject) for kind, subject, _ in pages(server)] == [("open", "slow")]
        finally:
            for fleet in (slow, fast, ahead):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def race(*fleets: TestFleet, seconds: int = 0) -> None:
    """Like :func:`renew`, but the fleets' passes run at once: each ``instances`` pass, then each
    pair of ``webhook`` passes, started together on the shared journal."""
    for fleet in fleets:
        fleet.clock.advance(seconds)
    await asyncio.gather(*(f.service.scheduler.run_once("instances") for f in fleets))
    for _ in range(2):
        await asyncio.gather(*(f.service.scheduler.run_once("webhook") for f in fleets))


@pytest.mark.parametrize("watchers", [2, 3])
async def test_instances_racing_on_one_incident_page_a_person_once_per_revision(
    tmp_path: Path, journal_pg_url: str, watchers: int
) -> None:
    """Two, then three live instances notice the same silent instance in the same moment: their
    passes run concurrently on one PostgreSQL journal. One incident, one ``open`` page; when it
    returns, one ``resolved`` page — one webhook per incident revision, each with its own id."""
    names = ["w1", "w2", "w3"][:watchers]
    async with HookServer() as server:
        fleets = [instance_fleet(tmp_path / n, n, journal_pg_url, server.url) for n in names]
        silent = instance_fleet(tmp_path / "gone", "gone", journal_pg_url, server.url)
        try:
            await renew(*fleets, silent)  # each journal client connects (and migrates) in turn
            for _ in range(6):
                await race(*fleets, seconds=INTERVAL)
            [down] = await instance_incidents(fleets[0])
            assert down.incident.subject == "gone"
            assert [(kind, subject) for kind, subject, _ in pages(server)] == [("open", "gone")]

            silent.clock.advance(6 * INTERVAL)
            await race(silent)
            for _ in range(3):
                await race(*fleets, silent, seconds=INTERVAL)
            assert await instance_incidents(fleets[0]) == []
            sent = pages(server)
            assert [(kind, subject) for kind, subject, _ in sent] == [
                ("open", "gone"),
                ("resolved", "gone"),
            ]
            assert len({webhook_id for _, _, webhook_id in sent}) == 2
        finally:
            for fleet in (*fleets, silent):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_a_restart_resumes_only_its_own_incidents(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """Two instances on one journal, each with a lead whose agent is gone (LEAD_UNREACHABLE):
    a restart of ``a`` resumes its own open incident, not ``b``'s."""
    async with HookServer() as server:
        a = instance_fleet(tmp_path / "a", "a", journal_pg_url, server.url)
        b = instance_fleet(tmp_path / "b", "b", journal_pg_url, server.url, lead=1)
        try:
            for fleet, lead in ((a, "lead"), (b, "lead-b")):
                await fleet.service.own_lead_keys()
                fleet.control.remove(lead)
                for _ in range(4):
                    fleet.clock.advance(INTERVAL)
                    await fleet.service.health.tick()
                    await fleet.service.scheduler.run_once("webhook")
            journal = a.service.health.journal
            assert journal is not None
            stored = (await journal.load_open()).open_incidents
            assert sorted(s.instance or "" for s in stored) == ["a", "b"]
            again = instance_fleet(tmp_path / "a", "a", journal_pg_url, server.url)
            try:
                assert await again.service.health.resume() == 1
                [mine] = [s for s in stored if s.instance == "a"]
                assert [i.id for i in again.service.health.state.incidents.values()] == [
                    mine.incident.id
                ]
            finally:
                await again.service.health.journal.close()  # type: ignore[union-attr]
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_an_sqlite_journal_with_a_second_instance_says_it_needs_postgresql(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two instances on one SQLite journal: the second to renew says once that several instances
    need a PostgreSQL journal; no INSTANCE_DOWN is ever opened on SQLite."""
    url = f"sqlite:///{tmp_path / 'journal.db'}"
    async with HookServer() as server:
        a = instance_fleet(tmp_path / "a", "a", url, server.url)
        b = instance_fleet(tmp_path / "b", "b", url, server.url)
        try:
            with caplog.at_level(logging.WARNING, logger="fleetd.instances"):
                await renew(a, b)
                await renew(b, seconds=10 * INTERVAL)
            said = [r.getMessage() for r in caplog.records if "PostgreSQL" in r.getMessage()]
            assert len(said) == 1
            assert "lists other fleetd instances (a)" in said[0]
            assert await instance_incidents(b) == []
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def fleet_all(fleet: TestFleet) -> dict[str, Any]:
    """The operator's ``GET /v1/fleet?scope=all`` of ``fleet``, through its app."""
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        answer = await client.get(
            "/v1/fleet",
            params={"scope": "all"},
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()["result"]
    return result


async def test_each_instance_sees_the_others_members_and_a_stopped_one_as_down(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """Two hosts' instances on one PostgreSQL journal, each serving its own lead with its own
    members: after a renewal, ``scope=all`` on either answers its own view and the other's
    published summary — its members by lead, named — aged by its last renewal. ``b`` stops:
    past two intervals ``a`` still shows it, marked down, with its last members."""
    async with HookServer() as server:
        a = instance_fleet(tmp_path / "a", "a", journal_pg_url, server.url, lead=0)
        b = instance_fleet(tmp_path / "b", "b", journal_pg_url, server.url, lead=1)
        lead_b = Caller(role=Role.LEAD, name="lead-b")
        try:
            mine = {await a.spawn_ready() for _ in range(2)}
            theirs = set()
            for _ in range(3):
                row = await b.ok("fleet_spawn", lead_b, profile="codex")
                await b.service.registry.contact(b.member(row["sessionId"]))
                theirs.add(row["sessionId"])
            await renew(a, b)
            from_a, from_b = await fleet_all(a), await fleet_all(b)
            assert [p["instance"] for p in from_a["instances"]] == ["a", "b"]
            assert [p["instance"] for p in from_b["instances"]] == ["b", "a"]
            own, other = from_a["instances"]
            assert {m["sessionId"] for m in own["view"]["members"]} == mine
            assert {m["sessionId"] for m in other["summary"]["members"]} == theirs
            assert other["summary"]["membersByLead"] == {"lead-b": 3}
            assert [lead["name"] for lead in other["summary"]["leads"]] == ["lead-b"]
            assert {m["sessionId"] for m in from_b["instances"][1]["summary"]["members"]} == mine
            assert (other["down"], other["ageSeconds"]) == (False, 0.0)

            for _ in range(3):  # b is stopped: it renews no more
                await renew(a, seconds=INTERVAL)
            later = await fleet_all(a)
            gone = later["instances"][1]
            assert (gone["instance"], gone["down"], gone["ageSeconds"]) == ("b", True, 45.0)
            assert {m["sessionId"] for m in gone["summary"]["members"]} == theirs
            assert (later["live"], later["down"]) == (1, 1)
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]


async def test_two_instances_whose_herdr_links_fail_each_page_their_own(
    tmp_path: Path, journal_pg_url: str
) -> None:
    """Every instance's herdr link is ``herdr``: ``a``'s link fails, then ``b``'s while ``a``'s
    incident is open. Each is recorded and paged (the second was refused as a conflict of the
    journal's open key, logged as a journal failure, and its person was never told); the
    journal stays healthy."""
    async with HookServer() as server:
        a, b = (
            instance_fleet(tmp_path / name, name, journal_pg_url, server.url, lead=n)
            for n, name in enumerate(("a", "b"))
        )
        try:
            await renew(a, b)
            for fleet in (a, b):
                fleet.control.link_down()
                for _ in range(3):
                    await fleet.service.health.tick()
                    fleet.clock.advance(2)
                await renew(fleet)
            journal = a.service.health.journal
            assert journal is not None
            snapshot = await journal.load_open()
            links = sorted(
                (kept.instance, kept.incident.subject)
                for kept in snapshot.open_incidents
                if kept.incident.scope is Scope.CONTROL_LINK
            )
            assert links == [("a", "herdr"), ("b", "herdr")]
            opened = [(kind, subject) for kind, subject, _ in pages(server) if kind == "open"]
            assert opened == [("open", "herdr"), ("open", "herdr")]
            for fleet in (a, b):
                watch = fleet.service.health.journal_watch
                assert watch is not None
                assert watch.health.ok
        finally:
            for fleet in (a, b):
                await fleet.service.health.journal.close()  # type: ignore[union-attr]
