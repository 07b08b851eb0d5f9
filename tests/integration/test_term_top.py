"""``fleetd top`` driven headless with textual's pilot against a real HTTP server that long-polls
like fleetd: a new view version is drawn as soon as it is published, the keys filter by lead,
switch to the incident screen and quit, and a token refused mid-run ends the app with code 4;
``--all`` shows every instance sharing a journal, read again every refresh."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fleetd.api.app import create_app
from fleetd.journal.memory import InMemoryJournal
from fleetd.term.client import FleetdClient, Target
from fleetd.term.top import TopApp
from fleetd.term.view import identity
from fleetd.testing import OPERATOR_TOKEN
from tests.integration.term_server import FakeFleetd, serve
from tests.unit.api.test_fleet_all_get import shared_fleet

PAYLOADS = Path(__file__).resolve().parents[1] / "unit" / "term" / "payloads"
TOKEN = "top-test-operator-token"
STEP = 10.0  # bound on each wait for the app (real server, real loop)


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PAYLOADS / name).read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeFleetd, str]]:
    server = FakeFleetd(_load("fleet_demo.json"), _load("incidents_demo.json"), TOKEN)
    async with serve(server.app) as base:
        yield server, base


async def _drawn(app: TopApp) -> None:
    await asyncio.wait_for(app.drawn.wait(), STEP)
    app.drawn.clear()


async def test_top_follows_the_long_poll_and_its_keys_filter_show_incidents_and_quit(
    fake: tuple[FakeFleetd, str],
) -> None:
    """The first screen is the view fetched before the app; a published version appears without
    a key; l cycles lead, lead-b, all; i shows the incidents (read from /v1/incidents) and
    back; q ends the app with code 0. Every screen fits 80×24."""
    server, base = fake
    async with FleetdClient(Target(url=base, token=TOKEN)) as client:
        first = await client.fleet()
        now = datetime.fromisoformat("2026-12-05T05:08:11+00:00")
        app = TopApp(client, first, who=identity(await client.whoami()), now=lambda: now)
        async with app.run_test(size=(80, 24)) as pilot:
            await _drawn(app)
            assert app.lines[0].startswith(f"fleetd {base} as operator · view 114")
            await asyncio.wait_for(server.waiting.wait(), STEP)  # the long-poll is open

            changed = copy.deepcopy(server.fleet)
            changed["leads"][1]["health"]["state"] = "LEAD_WORKING"
            changed["members"].append(
                {**changed["members"][0], "sessionId": "s-00000001", "name": "fresh-1"}
            )
            await server.publish(changed)
            await _drawn(app)
            assert app.lines[0].startswith(f"fleetd {base} as operator · view 115")
            assert any("LEAD_WORKING" in line for line in app.lines)
            assert any(line.startswith("MEMBERS 5 by lead") for line in app.lines)

            await pilot.press("l")
            await _drawn(app)
            assert any(line.startswith("MEMBERS 5 of lead") for line in app.lines)
            await pilot.press("l")
            await _drawn(app)
            assert any(line.startswith("MEMBERS 0 of lead-b") for line in app.lines)
            await pilot.press("l")
            await _drawn(app)
            assert any(line.startswith("MEMBERS 5 by lead") for line in app.lines)

            await pilot.press("i")
            await _drawn(app)
            assert server.incident_reads == 1
            assert app.lines[1].startswith("OPEN 3")
            assert any(line.startswith("RESOLVED 1") for line in app.lines)
            assert any(line.rstrip().endswith("delivered") for line in app.lines)
            await pilot.press("i")
            await _drawn(app)
            assert any(line.startswith("LEADS 2") for line in app.lines)
            assert len(app.lines) <= 23  # the footer has the last line
            assert max(len(line) for line in app.lines) <= 80

            await pilot.press("q")
        assert app.return_code == 0


async def test_top_ends_with_code_4_when_its_token_is_refused_mid_run(
    fake: tuple[FakeFleetd, str],
) -> None:
    """A token fleetd stops accepting (a reload rotated it) ends top: exit code 4, and the
    reason names the 401 without the token."""
    server, base = fake
    async with FleetdClient(Target(url=base, token=TOKEN)) as client:
        app = TopApp(client, await client.fleet(), who="operator")
        async with app.run_test(size=(80, 24)):
            await asyncio.wait_for(server.waiting.wait(), STEP)
            server.token = "rotated-token"
            await server.publish(server.fleet)
            await asyncio.wait_for(app.ended.wait(), STEP)
        assert app.return_code == 4
        assert app.failure.startswith("the token was refused (401 unauthenticated)")
        assert TOKEN not in app.failure


async def _until(app: TopApp, shown: str, *, line: int) -> None:
    """Wait (bounded) until the app draws ``shown`` in its ``line``-th line."""

    async def drawn_with() -> None:
        while len(app.lines) <= line or shown not in app.lines[line]:
            await app.drawn.wait()
            app.drawn.clear()

    await asyncio.wait_for(drawn_with(), STEP)


async def test_top_says_plainly_when_fleetd_goes_away_and_keeps_the_last_screen() -> None:
    """fleetd stops while top long-polls: the header says fleetd is unreachable and that top
    retries, the last screen's sections stay, and the app still quits on q."""
    server = FakeFleetd(_load("fleet_demo.json"), _load("incidents_demo.json"), TOKEN)
    async with contextlib.AsyncExitStack() as running:
        base = await running.enter_async_context(serve(server.app))
        async with FleetdClient(Target(url=base, token=TOKEN)) as client:
            app = TopApp(client, await client.fleet(), who="operator")
            async with app.run_test(size=(80, 24)) as pilot:
                await asyncio.wait_for(server.waiting.wait(), STEP)
                await running.aclose()  # fleetd stops under the open long-poll ...
                await server.release()  # ... and answers it, as a stopping fleetd does
                await _until(app, "unreachable", line=1)
                notice = " ".join(app.lines[1:3])
                assert notice == (
                    f"fleetd is unreachable at {base} (connection refused or host not found); "
                    "retrying"
                )
                assert app.lines[0].startswith(f"fleetd {base} as operator · view 114")
                assert any(line.startswith("OPEN INCIDENTS 3") for line in app.lines)
                await pilot.press("q")
            assert app.return_code == 0


async def test_top_all_shows_every_instance_and_reads_them_again(tmp_path: Path) -> None:
    """``fleetd top --all`` against fleetd's own app (two instances sharing a journal): one
    block per instance; without a key, a peer's renewal with a new member appears on the next
    read, and the peer silent past two intervals turns DOWN; q ends it with 0."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    b = shared_fleet(tmp_path / "b", journal, "b")
    await b.spawn_ready()
    for fleet in (a, b):
        await fleet.service.scheduler.run_once("instances")
    async with (
        serve(create_app(a.service)) as base,
        FleetdClient(Target(url=base, token=OPERATOR_TOKEN)) as client,
    ):
        first = await client.fleet(every=True)
        app = TopApp(client, first, who="operator", every=True, refresh=0.05)
        async with app.run_test(size=(100, 30)) as pilot:
            await _drawn(app)
            assert "2 instances · 2 up · 0 down" in app.lines[0]
            assert any("members 1: lead 1" in line for line in app.lines)
            assert app.leads == ["lead", "lead-b"]

            await b.spawn_ready()
            b.clock.advance(1)
            await b.service.scheduler.run_once("instances")
            for _ in range(50):
                await _drawn(app)
                if any("members 2: lead 2" in line for line in app.lines):
                    break
            assert any("members 2: lead 2" in line for line in app.lines)

            a.clock.advance(40)  # b renewed 39 s before a's now: past two intervals
            for _ in range(50):
                await _drawn(app)
                if "1 up · 1 down" in app.lines[0]:
                    break
            assert any(line.startswith("INSTANCE b") and "DOWN" in line for line in app.lines)
            await pilot.press("q")
        assert app.return_code == 0
