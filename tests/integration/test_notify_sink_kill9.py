"""kill -9 of ``fleetd serve`` itself in the middle of a webhook delivery, on SQLite and PostgreSQL.

Real processes throughout: ``fleetd sim`` (herdr), a receiver process that logs every request
before it answers (:mod:`tests.integration.stalling_receiver`) and holds the first one unanswered,
and ``fleetd serve`` in webhook mode with health on. The sole lead's agent dies; two snapshots
later its incident goes to a person and the ``open`` event reaches the receiver, which stalls.
While that request is in flight ``fleetd serve`` gets SIGKILL. A new ``fleetd serve`` on the same
config and journal resumes the incident, sends the ``open`` again once the dead process's lease
has run out, and — after the lead is started again — the ``resolved`` event. At the receiver,
after deduplication on ``webhook-id``, each event arrives exactly once, every event the journal
holds arrived at least once, and every request verifies.

The test waits only on observable state, each with a bounded deadline: the receiver's log,
``/livez`` and the operator's ``/v1/incidents``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import standardwebhooks

from fleetd.clock import SystemClock
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventState, EventType
from fleetd.sim.client import SimClient

pytest_plugins = ["tests.contract.journal_fixtures"]

REPO = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + base64.b64encode(b"kill-nine-webhook-secret-0123456").decode()
LEAD_TOKEN = "kill9-lead-token-0123456789"
OPERATOR_TOKEN = "kill9-operator-token-0123456789"
SNAPSHOT_SECONDS = 15
REQUEST_LIMIT_MS = 2000  # the dead process's lease: (1 receiver + 1) x 2 s + 30 s
T = TypeVar("T")

SCENARIO = """\
version: 1
defaults:
  start_seconds: 0.5
existing:
  - name: lead
    kind: claude
    cwd: /tmp
    label: lead
  - shell: true
    cwd: /tmp
    label: spare
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    url = request.getfixturevalue("journal_pg_url")
    assert isinstance(url, str)
    return url


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _until(what: str, check: Callable[[], Awaitable[T | None]], *, within: float = 30.0) -> T:
    """Poll ``check`` every 0.1 s until it returns a value, or fail after ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                value = await check()
                if value is not None:
                    return value
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {within} s") from None


class Processes:
    """Every process the test started; each is killed at the end if still running."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[asyncio.subprocess.Process] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "K9_LEAD": LEAD_TOKEN,
            "K9_OPERATOR": OPERATOR_TOKEN,
            "K9_SECRET": SECRET,
        }

    async def start(
        self, *args: str, name: str, pipe: bool = False, feed: bool = False
    ) -> asyncio.subprocess.Process:
        """``python *args``, its output in ``<name>.log``; ``pipe``: stdout is read by the test;
        ``feed``: the test writes to its stdin."""
        output = (self.tmp_path / f"{name}.log").open("ab")
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=REPO,
            env=self.env,
            stdin=asyncio.subprocess.PIPE if feed else None,
            stdout=asyncio.subprocess.PIPE if pipe else output,
            stderr=output,
        )
        output.close()
        self.started.append(process)
        return process

    async def stop_all(self) -> None:
        for process in self.started:
            if process.returncode is None:
                process.kill()
            await process.wait()


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[Processes]:
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        await running.stop_all()


def _requests(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def test_serve_killed_mid_delivery_delivers_each_event_once_after_restart(
    journal_url: str, processes: Processes, tmp_path: Path
) -> None:
    """SIGKILL while the receiver holds the ``open`` request; the restarted service sends it again
    under the same webhook-id, then ``resolved``: after dedupe each event arrives once."""
    herdr_dir = Path(tempfile.mkdtemp(prefix="fk9"))  # a short path: unix sockets are limited
    sock = herdr_dir / "herdr.sock"
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    await processes.start(
        "-m", "fleetd", "sim", "--socket", str(sock), "--scenario", str(scenario), name="sim"
    )
    herdr = SimClient(sock, clock=SystemClock(), request_timeout=5)

    async def listed() -> Any:
        try:
            return await herdr.agent_list() if sock.exists() else None
        except Exception:  # noqa: BLE001 - not listening yet
            return None

    [lead] = [a for a in await _until("the simulator answers", listed) if a.name == "lead"]
    spare = next(p for p in await herdr.pane_list() if p.pane_id != lead.pane_id)
    await herdr.pane_close(lead.pane_id)  # the sole lead's agent dies

    hook_log = tmp_path / "hooks.jsonl"
    receiver = await processes.start(
        "-m",
        "tests.integration.stalling_receiver",
        "--log",
        str(hook_log),
        "--stall",
        "1",
        name="receiver",
        pipe=True,
    )
    assert receiver.stdout is not None
    hook_url = (await asyncio.wait_for(receiver.stdout.readline(), 30)).decode().strip()
    processes.env["K9_HOOK"] = hook_url

    port = _free_port()
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {sock}\n"
        "operatorTokenEnv: K9_OPERATOR\n"
        "leads:\n  - name: lead\n    tokenEnv: K9_LEAD\n"
        f"journal:\n  url: {json.dumps(journal_url)}\n"
        "health:\n  enabled: true\n"
        f"  snapshotIntervalSeconds: {SNAPSHOT_SECONDS}\n"
        "  notifications:\n    mode: webhook\n    webhookUrlEnv: K9_HOOK\n"
        f"    secretEnv: K9_SECRET\n    requestTimeoutMs: {REQUEST_LIMIT_MS}\n",
        encoding="utf-8",
    )
    base = f"http://127.0.0.1:{port}"
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

    async with httpx.AsyncClient(base_url=base, timeout=5) as http:

        async def serving() -> bool | None:
            try:
                return True if (await http.get("/livez")).status_code == 200 else None
            except httpx.TransportError:
                return None

        async def incidents() -> list[dict[str, Any]]:
            answer = await http.get("/v1/incidents", headers=operator)
            assert answer.status_code == 200, answer.text
            rows: list[dict[str, Any]] = answer.json()["result"]["incidents"]
            return rows

        async def arrived(count: int) -> list[dict[str, Any]] | None:
            got = _requests(hook_log)
            return got if len(got) >= count else None

        first = await processes.start("-m", "fleetd", "serve", "--config", str(config), name="a")
        await _until("the first service serves", serving)
        await _until("a person's open reaches the receiver", lambda: arrived(1), within=60)
        first.send_signal(signal.SIGKILL)  # mid-request: the receiver holds it unanswered
        assert await first.wait() == -signal.SIGKILL

        journal = SqlJournal(journal_url)
        try:
            [stored] = (await journal.load_open()).open_incidents
            again = await journal.get(stored.incident.id)
            assert again is not None
            [opened] = again.events
        finally:
            await journal.close()
        assert (opened.type, opened.state, opened.attempts) == (
            EventType.OPEN,
            EventState.PENDING,
            1,
        )
        assert opened.last_failure is None  # killed while the attempt was in flight

        await processes.start("-m", "fleetd", "serve", "--config", str(config), name="b")
        await _until("the restarted service serves", serving)

        async def open_delivered() -> bool | None:
            rows = [r for r in await incidents() if r["id"] == stored.incident.id]
            return True if rows and rows[0]["delivery"] == "delivered" else None

        await _until("the open is delivered again", open_delivered, within=60)
        assert len(_requests(hook_log)) == 2
        await herdr.agent_start("lead", "claude", spare.pane_id)  # the lead is back

        async def settled() -> dict[str, Any] | None:
            rows = [r for r in await incidents() if r["id"] == stored.incident.id]
            done = rows and rows[0]["status"] == "resolved" and len(rows[0]["events"]) == 2
            return rows[0] if done and rows[0]["delivery"] == "delivered" else None

        row = await _until("the resolution is delivered", settled, within=45)
    assert [(e["type"], e["state"]) for e in row["events"]] == [
        ("open", "delivered"),
        ("resolved", "delivered"),
    ]

    received = _requests(hook_log)
    ids = [r["headers"]["webhook-id"] for r in received]
    assert [r["headers"]["idempotency-key"] for r in received] == ids
    verifier = standardwebhooks.Webhook(SECRET)
    documents = [verifier.verify(r["body"], r["headers"]) for r in received]
    assert [d["eventType"] for d in documents] == ["open", "open", "resolved"]
    assert {d["incident"]["id"] for d in documents} == {stored.incident.id}
    assert [d["eventId"] for d in documents] == ids
    once = {event_id: documents[ids.index(event_id)] for event_id in dict.fromkeys(ids)}
    journal_ids = [e["eventId"] for e in row["events"]]
    assert list(once) == journal_ids  # after dedupe: each event once, in order, none missing
    assert Counter(ids) == {journal_ids[0]: 2, journal_ids[1]: 1}
    assert received[0]["body"] == received[1]["body"]  # the same event, not a new one
