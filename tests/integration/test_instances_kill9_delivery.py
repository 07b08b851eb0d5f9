"""One page per incident revision across instances when the instance delivering it is killed
mid-delivery (issue 24 item 4), with real processes: two ``fleetd serve`` instances, ``a`` and
``b``, each beside its own ``fleetd sim``, on one PostgreSQL journal, and a receiver process
(:mod:`tests.integration.stalling_receiver`) that logs every request before it answers.

``a``'s two leads are gone, so two LEAD_UNREACHABLE incidents go to a person. ``b`` starts with
notifications disabled (only ``a`` is configured to send), so ``a`` leases both ``open`` events,
deterministically, and sends them at once. The receiver holds both. One is answered 200 while
the test holds the row lock of its attempt, so ``a`` cannot record the delivery; the other stays
unanswered. Then ``a`` gets SIGKILL: one request dies held, the other after a 2xx the journal
never recorded. ``b`` is turned on (a config reload) and ``a`` restarts with notifications
disabled, to resolve its own incidents later. Once ``a``'s leases run out ``b`` sends both
``open`` events again under the same ``webhook-id``; when the leads are back ``a`` resolves both
and ``b`` delivers each ``resolved`` once. At the receiver, deduplicating on ``webhook-id``, a
person hears each revision once; every request verifies.

Each wait polls an observable fact with a bounded deadline: the receiver's log, ``/livez``, the
journal's rows and PostgreSQL's lock waits.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import standardwebhooks

from fleetd.clock import SystemClock
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventState, EventType, StoredIncident
from fleetd.sim.client import SimClient
from tests.integration.test_notify_sink_kill9 import (
    SECRET,
    Processes,
    _free_port,
    _requests,
    _until,
)
from tests.integration.test_notify_sink_kill9 import (
    processes as processes,  # noqa: PLC0414 — fixture
)

pytest_plugins = ["tests.contract.journal_fixtures"]
pytestmark = pytest.mark.postgres

SNAPSHOT_SECONDS = 15  # health.snapshotIntervalSeconds, its floor
REQUEST_LIMIT_MS = 5000  # the window to act while a request is held; lease (1 + 1) x 5 s + 30 s
LEADS = ("lead-1", "lead-2")

SCENARIO_A = """\
version: 1
defaults: {start_seconds: 0.5}
existing:
  - {name: lead-1, kind: claude, cwd: /tmp, label: lead-1}
  - {name: lead-2, kind: claude, cwd: /tmp, label: lead-2}
  - {shell: true, cwd: /tmp, label: spare-1}
  - {shell: true, cwd: /tmp, label: spare-2}
"""
SCENARIO_B = """\
version: 1
defaults: {start_seconds: 0.5}
existing:
  - {name: lead-b, kind: claude, cwd: /tmp, label: lead-b}
"""

LEASES = """\
SELECT e.idempotency_key, a.lease_owner, a.lease_expires_at, a.lease_token, a.outcome
FROM delivery_attempts a JOIN outbound_events e ON e.id = a.event_id
ORDER BY a.id
"""
LOCK_ATTEMPT = """\
SELECT a.id FROM delivery_attempts a JOIN outbound_events e ON e.id = a.event_id
WHERE e.idempotency_key = %s AND a.outcome IS NULL
FOR UPDATE OF a
"""
BLOCKED_BY = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"


def _config(
    *, instance: str, port: int, sock: Path, leads: tuple[str, ...], journal: str, sends: bool
) -> str:
    """One instance's config: its leads (token ``MK_<LEAD>``), the shared journal, health at
    the snapshot floor, and webhook notifications when ``sends``, else disabled."""
    lines = [
        f"instance: {instance}",
        f"api:\n  host: 127.0.0.1\n  port: {port}",
        f"herdr:\n  socketPath: {sock}",
        "operatorTokenEnv: K9_OPERATOR",
        "leads:",
        *(f"  - name: {lead}\n    tokenEnv: {_token_env(lead)}" for lead in leads),
        f"journal:\n  url: {json.dumps(journal)}",
        f"health:\n  enabled: true\n  snapshotIntervalSeconds: {SNAPSHOT_SECONDS}",
    ]
    if sends:
        lines.append(
            "  notifications:\n    mode: webhook\n    webhookUrlEnv: MK_HOOK\n"
            f"    secretEnv: K9_SECRET\n    requestTimeoutMs: {REQUEST_LIMIT_MS}"
        )
    else:
        lines.append("  notifications:\n    mode: disabled")
    return "\n".join(lines) + "\n"


def _token_env(lead: str) -> str:
    return "MK_" + lead.upper().replace("-", "_")


def _posts(log: Path) -> list[dict[str, Any]]:
    """The requests the receiver logged, in arrival order (not its answered/abandoned notes)."""
    return [r for r in _requests(log) if "headers" in r]


def _note(log: Path, kind: str, webhook_id: str) -> dict[str, Any] | None:
    """The receiver's ``answered`` or ``abandoned`` note of ``webhook_id``, once logged."""
    return next((r for r in _requests(log) if r.get(kind) == webhook_id), None)


async def test_an_instance_killed_mid_delivery_leaves_each_page_to_another_instance_once(
    journal_pg_url: str, processes: Processes, tmp_path: Path
) -> None:
    """``a`` is killed -9 with one ``open`` held unanswered at the receiver and another answered
    200 but not yet recorded; ``b`` sends both again only after ``a``'s leases expire, each
    under its first ``webhook-id`` and body, and later delivers each ``resolved`` once: after
    dedupe on ``webhook-id`` the person hears open then resolved for each incident, once."""
    herdr_dir = Path(tempfile.mkdtemp(prefix="fmk"))  # a short path: unix sockets are limited
    socks = {name: herdr_dir / f"{name}.sock" for name in ("a", "b")}
    for name, scenario in (("a", SCENARIO_A), ("b", SCENARIO_B)):
        path = tmp_path / f"scenario-{name}.yaml"
        path.write_text(scenario, encoding="utf-8")
        await processes.start(
            "-m",
            "fleetd",
            "sim",
            "--socket",
            str(socks[name]),
            "--scenario",
            str(path),
            name=f"sim-{name}",
        )
    herdr = SimClient(socks["a"], clock=SystemClock(), request_timeout=5)

    async def listed() -> Any:
        try:
            return await herdr.agent_list() if socks["a"].exists() else None
        except Exception:  # noqa: BLE001 - not listening yet
            return None

    agents = {a.name: a for a in await _until("the simulator answers", listed)}
    lead_panes = {agents[lead].pane_id for lead in LEADS}
    spares = [p for p in await herdr.pane_list() if p.pane_id not in lead_panes]
    for pane in sorted(lead_panes):
        await herdr.pane_close(pane)  # both of a's leads are gone

    hook_log = tmp_path / "hooks.jsonl"
    receiver = await processes.start(
        "-m",
        "tests.integration.stalling_receiver",
        "--log",
        str(hook_log),
        "--hold",
        "2",
        name="receiver",
        pipe=True,
        feed=True,
    )
    assert receiver.stdout is not None
    assert receiver.stdin is not None
    processes.env["MK_HOOK"] = (await asyncio.wait_for(receiver.stdout.readline(), 30)).decode()
    processes.env["MK_HOOK"] = processes.env["MK_HOOK"].strip()
    for lead in (*LEADS, "lead-b"):
        processes.env[_token_env(lead)] = f"midkill-{lead}-token-0123456789"

    ports = {name: _free_port() for name in ("a", "b")}
    configs = {name: tmp_path / name / "fleetd.yaml" for name in ("a", "b")}  # state beside

    def configure(name: str, *, sends: bool) -> None:
        configs[name].parent.mkdir(exist_ok=True)
        leads = LEADS if name == "a" else ("lead-b",)
        text = _config(
            instance=name,
            port=ports[name],
            sock=socks[name],
            leads=leads,
            journal=journal_pg_url,
            sends=sends,
        )
        configs[name].write_text(text, encoding="utf-8")

    configure("a", sends=True)
    configure("b", sends=False)  # only a sends at first: a holds the leases

    async def serve(name: str, run: str) -> asyncio.subprocess.Process:
        process = await processes.start(
            "-m", "fleetd", "serve", "--config", str(configs[name]), name=run
        )

        async def serving() -> bool | None:
            try:
                async with httpx.AsyncClient(timeout=5) as http:
                    answer = await http.get(f"http://127.0.0.1:{ports[name]}/livez")
                return True if answer.status_code == 200 else None
            except httpx.TransportError:
                return None

        await _until(f"{run} serves", serving)
        return process

    journal = SqlJournal(journal_pg_url)
    watch = await psycopg.AsyncConnection.connect(journal_pg_url, autocommit=True)
    try:
        first_a, _ = await asyncio.gather(serve("a", "a-1"), serve("b", "b"))
        started = time.monotonic()

        async def held_both() -> list[dict[str, Any]] | None:
            posts = _posts(hook_log)
            return posts if len(posts) >= 2 else None

        posts = await _until("a's two open events reach the receiver", held_both, within=60)
        held_at = time.monotonic()
        subject = {
            json.loads(p["body"])["incident"]["subject"]: p["headers"]["webhook-id"] for p in posts
        }
        assert sorted(subject) == list(LEADS)
        held, answered = subject["lead-1"], subject["lead-2"]

        # a's delivery of lead-2's open is answered 200, but its record waits on this lock
        locker = await psycopg.AsyncConnection.connect(journal_pg_url)
        try:
            locked = await (await locker.execute(LOCK_ATTEMPT, (answered,))).fetchall()
            assert len(locked) == 1
            receiver.stdin.write(f"{answered}\n".encode())
            await receiver.stdin.drain()
            await _until("the receiver answers 200", _lazy(_note, hook_log, "answered", answered))

            async def recording_waits() -> bool | None:
                cursor = await watch.execute(BLOCKED_BY, (locker.info.backend_pid,))
                row = await cursor.fetchone()
                return True if row is not None and row[0] > 0 else None

            await _until("a's record of the 2xx waits on the lock", recording_waits, within=10)
            killed_at = time.time()
            first_a.send_signal(signal.SIGKILL)
            assert await first_a.wait() == -signal.SIGKILL
        finally:
            await locker.rollback()
            await locker.close()
        killed = time.monotonic()

        gone = await _until(
            "the held request's sender is gone", _lazy(_note, hook_log, "abandoned", held)
        )
        assert gone["at"] >= killed_at, "the held request ended before the kill"
        assert _note(hook_log, "answered", held) is None

        leases = {row[0]: row for row in await (await watch.execute(LEASES)).fetchall()}
        assert set(leases) == {held, answered}
        for key in (held, answered):
            _, owner, expires, token, outcome = leases[key]
            assert (owner.split("-")[0], token, outcome) == ("a", 1, None)  # a's, unrecorded
            assert expires.timestamp() > killed_at  # the lease outlives the kill
        expiry: dict[str, datetime] = {key: leases[key][2] for key in leases}
        incidents = {s.incident.subject: s for s in (await journal.load_open()).open_incidents}
        assert sorted(incidents) == list(LEADS)
        for stored in incidents.values():
            [opened] = (await _stored(journal, stored)).events
            assert (opened.type, opened.state, opened.attempts) == (
                EventType.OPEN,
                EventState.PENDING,
                1,
            )
            assert opened.last_failure is None  # killed in flight: nothing recorded

        configure("b", sends=True)  # b is configured to send; it reloads on its own
        configure("a", sends=False)  # a comes back to resolve its incidents, sending nothing
        await serve("a", "a-2")

        async def both_sent_again() -> list[dict[str, Any]] | None:
            again = _posts(hook_log)[2:]
            return again if len(again) >= 2 else None

        again = await _until(
            "b sends both open events again", both_sent_again, within=2 * SNAPSHOT_SECONDS + 30
        )
        resent = time.monotonic()
        assert sorted(p["headers"]["webhook-id"] for p in again) == sorted((held, answered))
        for post in again:
            key = post["headers"]["webhook-id"]
            assert post["at"] >= expiry[key].timestamp(), "re-sent before a's lease expired"

        async def opens_delivered() -> bool | None:
            for stored in incidents.values():
                [opened] = (await _stored(journal, stored)).events
                if opened.state is not EventState.DELIVERED:
                    return None
            return True

        await _until("both open events are recorded delivered", opens_delivered)
        for spare, lead in zip(spares, LEADS, strict=True):
            await herdr.agent_start(lead, "claude", spare.pane_id)  # a's leads are back

        async def settled() -> list[StoredIncident] | None:
            done = [await _stored(journal, s) for s in incidents.values()]
            closed = all(
                s.resolved_at is not None
                and [(e.type, e.state) for e in s.events]
                == [
                    (EventType.OPEN, EventState.DELIVERED),
                    (EventType.RESOLVED, EventState.DELIVERED),
                ]
                for s in done
            )
            return done if closed else None

        final = await _until("a resolves both, b delivers each resolved", settled, within=60)
        finished = time.monotonic()
        owners = {row[0]: row[1] for row in await (await watch.execute(LEASES)).fetchall()}
    finally:
        await watch.close()
        await journal.close()
    print(
        f"both open events held {held_at - started:.1f} s after a and b serve; kill "
        f"+{killed - held_at:.1f} s; re-sent by b {resent - killed:.1f} s after the kill; "
        f"both resolved delivered {finished - resent:.1f} s later"
    )

    assert {owners[key].split("-")[0] for key in owners} == {"b"}  # b recorded every delivery
    received = _posts(hook_log)
    verifier = standardwebhooks.Webhook(SECRET)
    documents = [verifier.verify(r["body"], r["headers"]) for r in received]
    ids = [r["headers"]["webhook-id"] for r in received]
    assert [r["headers"]["idempotency-key"] for r in received] == ids
    assert [d["eventId"] for d in documents] == ids
    journal_ids = {s.incident.subject: [e.idempotency_key for e in s.events] for s in final}
    assert Counter(ids) == {
        held: 2,
        answered: 2,
        journal_ids["lead-1"][1]: 1,
        journal_ids["lead-2"][1]: 1,
    }
    for key in (held, answered):  # the same event both times, not a new one
        [one, two] = [r["body"] for r in received if r["headers"]["webhook-id"] == key]
        assert one == two
    once: dict[str, dict[str, Any]] = {}
    for key, document in zip(ids, documents, strict=True):
        once.setdefault(key, document)  # a receiver deduping by webhook-id
    for lead in LEADS:
        told = [d for d in once.values() if d["incident"]["subject"] == lead]
        assert [(d["eventType"], d["eventId"]) for d in told] == [
            ("open", journal_ids[lead][0]),
            ("resolved", journal_ids[lead][1]),
        ]


def _lazy(note: Any, *args: Any) -> Any:
    """``note(*args)`` as the coroutine function :func:`_until` polls."""

    async def check() -> Any:
        return note(*args)

    return check


async def _stored(journal: SqlJournal, stored: StoredIncident) -> StoredIncident:
    again = await journal.get(stored.incident.id)
    assert again is not None
    return again
