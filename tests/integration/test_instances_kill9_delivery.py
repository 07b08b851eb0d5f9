"""One page per incident revision across instances when the instance delivering it is killed
mid-delivery (issue 24 item 4), with real processes: two ``fleetd serve`` instances, ``a`` and
``b``, each beside its own ``fleetd sim``, on one PostgreSQL journal, and a receiver process
(:mod:`tests.integration.stalling_receiver`) that logs every request before it answers.

``a``'s two leads are gone and ``b`` serves none, so two LEAD_UNREACHABLE incidents go to a
person (no healthy lead on either host takes them). ``b`` starts with
notifications disabled (only ``a`` is configured to send), so ``a`` leases both ``open`` events,
deterministically, and sends them at once. The receiver holds both. One is answered 200 while
the test holds the row lock of its attempt, so ``a`` cannot record the delivery; the other stays
unanswered. Then ``a`` gets SIGKILL: one request dies held, the other after a 2xx the journal
never recorded. ``b`` is turned on (a config reload) and ``a`` restarts with notifications
disabled, only to resolve its own incidents. Then either

* the leads come back after ``b`` has sent both ``open`` events again — only once ``a``'s leases
  ran out, under the same ``webhook-id`` and body — and ``b`` delivers each ``resolved`` once; or
* the leads come back at once, so ``a`` resolves both while its dead leases still hold the
  ``open`` events: those are cancelled, never sent again, and since their requests reached the
  receiver each incident's ``resolved`` is recorded and ``b`` delivers it once.

Either way a receiver deduplicating on ``webhook-id`` tells the person each revision once, and
every request verifies. Each wait polls an observable fact with a bounded deadline: the
receiver's log, ``/livez``, the journal's rows and PostgreSQL's lock waits. The lease is the
service's own, (1 receiver + 1) x ``requestTimeoutMs`` + 30 s, which with the 15 s snapshot
floor bounds how short the first test can be.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
        "leads:" if leads else "leads: []",
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


@dataclass
class Stage:
    """The processes of one test and what it reads: ``a``'s simulator, the receiver's log and
    stdin, both configs, the journal and a PostgreSQL connection to watch it."""

    processes: Processes
    tmp_path: Path
    journal_url: str
    herdr: SimClient
    spares: list[Any]
    hook_log: Path
    receiver: asyncio.subprocess.Process
    socks: dict[str, Path]
    ports: dict[str, int]
    configs: dict[str, Path]
    journal: SqlJournal
    watch: psycopg.AsyncConnection[Any]
    started: float = 0.0
    ids: dict[str, str] = field(default_factory=dict)  # a's incident ids by lead

    def configure(self, name: str, *, sends: bool) -> None:
        self.configs[name].parent.mkdir(exist_ok=True)  # the state store lives beside it
        text = _config(
            instance=name,
            port=self.ports[name],
            sock=self.socks[name],
            # b serves no lead: a healthy lead of b would be a peer of last resort for a's
            # incidents (routing across hosts), taking them from the person this test pages
            leads=LEADS if name == "a" else (),
            journal=self.journal_url,
            sends=sends,
        )
        self.configs[name].write_text(text, encoding="utf-8")

    async def serve(self, name: str, run: str) -> asyncio.subprocess.Process:
        """``fleetd serve`` of instance ``name`` (its output in ``<run>.log``), once it serves."""
        process = await self.processes.start(
            "-m", "fleetd", "serve", "--config", str(self.configs[name]), name=run
        )

        async def serving() -> bool | None:
            try:
                async with httpx.AsyncClient(timeout=5) as http:
                    answer = await http.get(f"http://127.0.0.1:{self.ports[name]}/livez")
                return True if answer.status_code == 200 else None
            except httpx.TransportError:
                return None

        await _until(f"{run} serves", serving)
        return process

    async def leases(self) -> dict[str, tuple[Any, ...]]:
        """Each attempt's row by its event's key (the last attempt of each event)."""
        rows = await (await self.watch.execute(LEASES)).fetchall()
        return {row[0]: tuple(row) for row in rows}

    async def incidents(self) -> dict[str, StoredIncident]:
        """a's two incidents as the journal holds them, by lead (found open the first time)."""
        if not self.ids:
            opened = (await self.journal.load_open()).open_incidents
            self.ids = {s.incident.subject: s.incident.id for s in opened}
        found = {lead: await self.journal.get(incident) for lead, incident in self.ids.items()}
        return {lead: stored for lead, stored in sorted(found.items()) if stored is not None}

    async def kill_mid_delivery(self, first_a: asyncio.subprocess.Process) -> tuple[str, str]:
        """Both ``open`` events held at the receiver; lead-2's answered 200 while its attempt's
        row is locked, so ``a`` cannot record it; ``a`` killed -9 then. The keys (held,
        answered), after checking that the held request's sender went away only at the kill and
        that ``a`` still holds both leases with nothing recorded."""

        async def held_both() -> list[dict[str, Any]] | None:
            posts = _posts(self.hook_log)
            return posts if len(posts) >= 2 else None

        posts = await _until("a's two open events reach the receiver", held_both, within=60)
        self.started = time.monotonic()
        subject = {
            json.loads(p["body"])["incident"]["subject"]: p["headers"]["webhook-id"] for p in posts
        }
        assert sorted(subject) == list(LEADS)
        held, answered = subject["lead-1"], subject["lead-2"]
        assert self.receiver.stdin is not None
        locker = await psycopg.AsyncConnection.connect(self.journal_url)
        try:
            locked = await (await locker.execute(LOCK_ATTEMPT, (answered,))).fetchall()
            assert len(locked) == 1
            self.receiver.stdin.write(f"{answered}\n".encode())
            await self.receiver.stdin.drain()
            await _until(
                "the receiver answers 200", _lazy(_note, self.hook_log, "answered", answered)
            )

            async def recording_waits() -> bool | None:
                cursor = await self.watch.execute(BLOCKED_BY, (locker.info.backend_pid,))
                row = await cursor.fetchone()
                return True if row is not None and row[0] > 0 else None

            await _until("a's record of the 2xx waits on the lock", recording_waits, within=10)
            killed_at = time.time()
            first_a.send_signal(signal.SIGKILL)
            assert await first_a.wait() == -signal.SIGKILL
        finally:
            await locker.rollback()
            await locker.close()

        gone = await _until(
            "the held request's sender is gone", _lazy(_note, self.hook_log, "abandoned", held)
        )
        assert gone["at"] >= killed_at, "the held request ended before the kill"
        assert _note(self.hook_log, "answered", held) is None
        leases = await self.leases()
        assert set(leases) == {held, answered}
        for key in (held, answered):
            _, owner, expires, token, outcome = leases[key]
            assert (owner.split("-")[0], token, outcome) == ("a", 1, None)  # a's, unrecorded
            assert expires.timestamp() > killed_at  # the lease outlives the kill
        incidents = await self.incidents()
        assert sorted(incidents) == list(LEADS)
        for stored in incidents.values():
            [opened] = stored.events
            assert (opened.type, opened.state, opened.attempts) == (
                EventType.OPEN,
                EventState.PENDING,
                1,
            )
            assert opened.last_failure is None  # killed in flight: nothing recorded
            assert opened.in_doubt
        return held, answered

    async def hand_over(self) -> None:
        """``b`` is configured to send (it reloads on its own); ``a`` comes back to resolve its
        incidents, sending nothing."""
        self.configure("b", sends=True)
        self.configure("a", sends=False)
        await self.serve("a", "a-2")

    async def leads_back(self) -> None:
        for spare, lead in zip(self.spares, LEADS, strict=True):
            await self.herdr.agent_start(lead, "claude", spare.pane_id)

    async def settled(self, opened: EventState) -> dict[str, StoredIncident]:
        """Once both incidents are resolved with their ``open`` in state ``opened`` and their
        ``resolved`` delivered."""

        async def done() -> dict[str, StoredIncident] | None:
            incidents = await self.incidents()
            closed = sorted(incidents) == list(LEADS) and all(
                s.resolved_at is not None
                and [(e.type, e.state) for e in s.events]
                == [(EventType.OPEN, opened), (EventType.RESOLVED, EventState.DELIVERED)]
                for s in incidents.values()
            )
            return incidents if closed else None

        return await _until("a resolves both, b delivers each resolved", done, within=60)


@pytest.fixture
async def stage(journal_pg_url: str, processes: Processes, tmp_path: Path) -> AsyncIterator[Stage]:
    """Both simulators (a's leads gone), the receiver holding the first two requests, ``a``
    sending and ``b`` not, both serving on one PostgreSQL journal."""
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
    url = await asyncio.wait_for(receiver.stdout.readline(), 30)
    processes.env["MK_HOOK"] = url.decode().strip()
    for lead in (*LEADS, "lead-b"):
        processes.env[_token_env(lead)] = f"midkill-{lead}-token-0123456789"
    journal = SqlJournal(journal_pg_url)
    watch = await psycopg.AsyncConnection.connect(journal_pg_url, autocommit=True)
    built = Stage(
        processes=processes,
        tmp_path=tmp_path,
        journal_url=journal_pg_url,
        herdr=herdr,
        spares=spares,
        hook_log=hook_log,
        receiver=receiver,
        socks=socks,
        ports={name: _free_port() for name in ("a", "b")},
        configs={name: tmp_path / name / "fleetd.yaml" for name in ("a", "b")},
        journal=journal,
        watch=watch,
    )
    built.configure("a", sends=True)
    built.configure("b", sends=False)  # only a sends at first: a holds the leases
    try:
        yield built
    finally:
        await watch.close()
        await journal.close()


def _verified(hook_log: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Every request the receiver logged in ``hook_log``: its ``webhook-id`` and verified
    document — the signature checks, and ``webhook-id`` = ``Idempotency-Key`` = ``eventId``."""
    received = _posts(hook_log)
    verifier = standardwebhooks.Webhook(SECRET)
    documents = [verifier.verify(r["body"], r["headers"]) for r in received]
    ids = [r["headers"]["webhook-id"] for r in received]
    assert [r["headers"]["idempotency-key"] for r in received] == ids
    assert [d["eventId"] for d in documents] == ids
    return ids, documents


def _deduped(ids: list[str], documents: list[dict[str, Any]], lead: str) -> list[tuple[str, str]]:
    """(event type, event id) of what a receiver deduplicating by webhook-id tells the person
    about ``lead``'s incident, in order."""
    once: dict[str, dict[str, Any]] = {}
    for key, document in zip(ids, documents, strict=True):
        once.setdefault(key, document)
    return [
        (d["eventType"], d["eventId"]) for d in once.values() if d["incident"]["subject"] == lead
    ]


async def test_an_instance_killed_mid_delivery_leaves_each_page_to_another_instance_once(
    stage: Stage,
) -> None:
    """``a`` is killed -9 with one ``open`` held unanswered at the receiver and another answered
    200 but not yet recorded; ``b`` sends both again only after ``a``'s leases expire, each
    under its first ``webhook-id`` and body, and later delivers each ``resolved`` once: after
    dedupe on ``webhook-id`` the person hears open then resolved for each incident, once."""
    first_a, _ = await asyncio.gather(stage.serve("a", "a-1"), stage.serve("b", "b"))
    held, answered = await stage.kill_mid_delivery(first_a)
    killed = time.monotonic()
    expiry = {key: row[2] for key, row in (await stage.leases()).items()}
    await stage.hand_over()

    async def both_sent_again() -> list[dict[str, Any]] | None:
        again = _posts(stage.hook_log)[2:]
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
        incidents = await stage.incidents()
        states = {s.events[0].state for s in incidents.values()}
        return True if states == {EventState.DELIVERED} else None

    await _until("both open events are recorded delivered", opens_delivered)
    await stage.leads_back()
    final = await stage.settled(EventState.DELIVERED)
    finished = time.monotonic()
    print(
        f"kill {killed - stage.started:.1f} s after both open events were held; re-sent by b "
        f"{resent - killed:.1f} s after the kill; both resolved delivered {finished - resent:.1f}"
        " s later"
    )

    leases = await stage.leases()
    assert {row[1].split("-")[0] for row in leases.values()} == {"b"}  # b recorded each delivery
    ids, documents = _verified(stage.hook_log)
    keys = {lead: [e.idempotency_key for e in s.events] for lead, s in final.items()}
    assert Counter(ids) == {held: 2, answered: 2, keys["lead-1"][1]: 1, keys["lead-2"][1]: 1}
    received = _posts(stage.hook_log)
    for key in (held, answered):  # the same event both times, not a new one
        [one, two] = [r["body"] for r in received if r["headers"]["webhook-id"] == key]
        assert one == two
    for lead in LEADS:
        assert _deduped(ids, documents, lead) == [
            ("open", keys[lead][0]),
            ("resolved", keys[lead][1]),
        ]


async def test_an_incident_resolved_within_the_killed_instances_lease_still_tells_its_end(
    stage: Stage,
) -> None:
    """The same kill, but ``a``'s leads come back at once, so ``a`` resolves both incidents
    while its dead leases still hold the ``open`` events. Those requests reached the receiver
    (one was even answered 200), so each incident's ``resolved`` is recorded with the resolution
    and ``b`` delivers it once; the ``open`` events are cancelled and never sent again."""
    first_a, _ = await asyncio.gather(stage.serve("a", "a-1"), stage.serve("b", "b"))
    held, answered = await stage.kill_mid_delivery(first_a)
    killed = time.monotonic()
    expiry = min(row[2] for row in (await stage.leases()).values())
    await stage.leads_back()
    await stage.hand_over()
    final = await stage.settled(EventState.CANCELLED)
    finished = time.monotonic()
    print(f"both resolved delivered {finished - killed:.1f} s after the kill")
    assert datetime.now(UTC) < expiry  # all of it within a's dead leases

    leases = await stage.leases()
    for key in (held, answered):  # cancelled in flight: never claimed again
        assert (leases[key][1].split("-")[0], leases[key][4]) == ("a", "cancelled")
    ids, documents = _verified(stage.hook_log)
    keys = {lead: [e.idempotency_key for e in s.events] for lead, s in final.items()}
    assert Counter(ids) == {held: 1, answered: 1, keys["lead-1"][1]: 1, keys["lead-2"][1]: 1}
    for lead in LEADS:
        assert _deduped(ids, documents, lead) == [
            ("open", keys[lead][0]),
            ("resolved", keys[lead][1]),
        ]
        assert final[lead].events[1].idempotency_key in ids
    assert {leases[keys[lead][1]][1].split("-")[0] for lead in LEADS} == {"b"}


def _lazy(note: Any, *args: Any) -> Any:
    """``note(*args)`` as the coroutine function :func:`_until` polls."""

    async def check() -> Any:
        return note(*args)

    return check
