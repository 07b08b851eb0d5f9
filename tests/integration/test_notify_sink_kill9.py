"""kill -9 with real processes: a delivery worker dies while an event waits for its retry; a new
worker process on the same journal delivers that event with the same webhook-id, the resolution
follows once, and the journal holds one incident. On SQLite and on PostgreSQL.

The worker runs in its process as the webhook loop runs it, after the escalation shell's step
(:mod:`tests.integration.sink_process`), on the real clock;
this test plays the dispatcher (it records the incident and its resolution in the journal) and
the receiver (a real HTTP server that answers 503 first). It waits on the receiver's requests and
on the worker's per-pass report lines, never on a sleep.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks

from fleetd.health.incidents import ResolveReason
from fleetd.journal.records import EventState, EventType, NewEvent
from fleetd.journal.sql import SqlJournal
from tests.integration.hook_server import HookServer, Reply
from tests.integration.sink_process import SECRET_ENV
from tests.unit.notify.sink_kit import SECRET_TEXT, human_incident, open_incident, payload

pytest_plugins = ["tests.contract.journal_fixtures"]

REPO = Path(__file__).resolve().parents[2]
WAIT = 30.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    url = request.getfixturevalue("journal_pg_url")
    assert isinstance(url, str)
    return url


class Worker:
    """One worker process and its report lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def report(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
        assert line, "the worker process ended"
        document = json.loads(line)
        assert isinstance(document, dict)
        return document

    async def until(self, field: str) -> None:
        """Read reports until a pass did ``field`` (delivered, retried...) at least once."""
        while not (await self.report())[field]:
            pass

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


async def start(journal_url: str, webhook: str, owner: str) -> Worker:
    env = {
        **os.environ,
        SECRET_ENV: SECRET_TEXT,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.sink_process",
        "--journal",
        journal_url,
        "--webhook",
        webhook,
        "--owner",
        owner,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    return Worker(process)


async def requests(server: HookServer, count: int) -> None:
    """Wait until the receiver has had ``count`` requests."""
    async with asyncio.timeout(WAIT):
        while len(server.received) < count:
            server.arrived.clear()
            if len(server.received) >= count:
                break
            await server.arrived.wait()


@pytest.fixture
async def server() -> AsyncIterator[HookServer]:
    async with HookServer() as running:
        yield running


async def test_a_worker_killed_mid_retry_is_succeeded_without_a_duplicate(
    journal_url: str, server: HookServer
) -> None:
    journal = SqlJournal(journal_url)
    workers: list[Worker] = []
    try:
        now = datetime.now(UTC)
        incident = human_incident()
        change = await open_incident(journal, incident, at=now)
        server.answer(Reply(status=503, headers={"Retry-After": "1"}))

        first = await start(journal_url, server.url, "fleetd-a")
        workers.append(first)
        await requests(server, 1)
        await first.until("retried")
        await first.kill()
        assert first.process.returncode == -signal.SIGKILL
        stored = await journal.get(incident.id)
        assert stored is not None
        (pending,) = stored.events
        assert (pending.state, pending.attempts, pending.last_http_status) == (
            EventState.PENDING,
            2,
            503,
        )

        second = await start(journal_url, server.url, "fleetd-b")
        workers.append(second)
        await requests(server, 2)
        await second.until("delivered")
        closed = dataclasses.replace(
            change, resolved_at=datetime.now(UTC), resolve_reason=ResolveReason.CLEARED
        )
        resolved = payload(incident, EventType.RESOLVED, 2, at=datetime.now(UTC))
        await journal.record(
            closed, [NewEvent(type=EventType.RESOLVED, payload=resolved)], now=datetime.now(UTC)
        )
        await requests(server, 3)
        await second.until("delivered")
        for _ in range(5):  # five more passes: nothing more is sent
            await second.report()
        assert len(server.received) == 3
    finally:
        for worker in workers:
            await worker.kill()

    open_twice, resolved_once = server.received[:2], server.received[2]
    ids = [r.headers["webhook-id"] for r in server.received]
    assert ids[0] == ids[1] != ids[2]
    assert [r.headers["idempotency-key"] for r in server.received] == ids
    verifier = standardwebhooks.Webhook(SECRET_TEXT)
    documents = [verifier.verify(r.body, r.headers) for r in server.received]
    assert [d["eventType"] for d in documents] == ["open", "open", "resolved"]
    assert {d["incident"]["id"] for d in documents} == {incident.id}
    assert open_twice[0].body == open_twice[1].body
    assert resolved_once.headers["webhook-id"] == documents[2]["eventId"]
    try:
        stored = await journal.get(incident.id)
        assert stored is not None
        assert [(e.type, e.state) for e in stored.events] == [
            (EventType.OPEN, EventState.DELIVERED),
            (EventType.RESOLVED, EventState.DELIVERED),
        ]
        snapshot = await journal.load_open()
        assert (snapshot.open_incidents, snapshot.pending_resolutions) == ((), ())
        listed = await journal.recent(resolved_since=datetime.now(UTC) - timedelta(hours=1))
        assert [s.incident.id for s in listed] == [incident.id]
    finally:
        await journal.close()
