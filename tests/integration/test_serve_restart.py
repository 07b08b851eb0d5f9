"""``fleetd serve`` restarted for real, beside ``fleetd sim`` whose members call back: a clean
stop keeps the fleet, a ``kill -9`` at each write-ahead step loses nothing and types nothing
twice (SQLite and PostgreSQL), a second fleetd on the same store is refused, a store that cannot
be read stops the start with exit 2, and ``--discard-state`` starts afresh."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from fleetd.runtime import instance_name
from fleetd.state.facts import DeliveryState, Snapshot
from fleetd.state.sql import SqlStateStore
from tests.contract.journal_fixtures import postgres_reachable, require_postgres, schema_url
from tests.integration.test_serve_process import (
    LEAD_TOKEN,
    _drain,
    _fleetd,
    _free_port,
    _git_repo,
    _poll_until,
    _wait_for_line,
)

SCENARIO = """\
version: 1
defaults: {start_seconds: 0.3, react_seconds: 0.1, turn_seconds: 1.0, frame_seconds: 0.2}
existing:
  - {name: lead, kind: claude, cwd: /tmp/fleetd-restart-test/lead, label: lead}
"""


@dataclass
class Fleet:
    """One simulator and the fleetd processes started against it, one after another."""

    tmp: Path
    config: Path
    base: str
    state_url: str
    prompt_log: Path
    env: dict[str, str]
    sim: subprocess.Popen[bytes]
    serves: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def serve(self, *args: str, crash_at: str | None = None) -> subprocess.Popen[bytes]:
        env = dict(self.env)
        if crash_at is not None:
            env["FLEETD_CRASH_AT"] = crash_at
        proc = _fleetd("serve", "--config", str(self.config), *args, env=env)
        self.serves.append(proc)
        return proc

    def start(self, *args: str, crash_at: str | None = None) -> subprocess.Popen[bytes]:
        proc = self.serve(*args, crash_at=crash_at)
        _wait_for_line(proc, b"listening on")
        threading.Thread(target=_drain, args=(proc,), daemon=True).start()
        return proc

    def call(self, tool: str, token: str = LEAD_TOKEN, **args: Any) -> dict[str, Any]:
        with httpx.Client(base_url=self.base, timeout=15) as client:
            response = client.post(
                f"/v1/tools/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}
            )
        body: dict[str, Any] = response.json()
        return body

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        body = self.call(tool, **args)
        assert body["ok"], body
        result: dict[str, Any] = body["result"]
        return result

    def ready_member(self, name: str) -> str:
        sid: str = self.ok("fleet_spawn", profile="sonnet", name=name)["sessionId"]
        state = _poll_until(
            lambda: self.ok("fleet_status", sessionId=sid)["state"], lambda s: s == "ready"
        )
        assert state == "ready"
        return sid

    def prompts(self) -> Counter[str]:
        """How many times each task text was typed into a member."""
        if not self.prompt_log.exists():
            return Counter()
        lines = self.prompt_log.read_text(encoding="utf-8").splitlines()
        rows = [line.split("\t", 1) for line in lines if "\t" in line]
        # what fleetd typed into members (the lead's pane gets inbox nudges too)
        return Counter(text for target, text in rows if target != "lead")

    def stored(self) -> Snapshot:
        store = SqlStateStore(
            self.state_url, deadline=lambda: timedelta(seconds=5), instance=instance_name()
        )
        try:
            return store.load()
        finally:
            store.close()


def _sigterm(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def fleet(tmp_path: Path, backend: str) -> Iterator[Fleet]:
    sock = Path(tempfile.mkdtemp(prefix="frst")) / "herdr.sock"
    port = _free_port()
    repo = _git_repo(tmp_path / "repo")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    schema = None
    if backend == "postgresql":
        base = require_postgres(postgres_reachable())
        schema = f"fleetd_state_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(f'CREATE SCHEMA "{schema}"')
        state_url = schema_url(base, schema)
    else:
        state_url = f"sqlite:///{tmp_path / 'fleetd-state.db'}"
    config = tmp_path / "fleetd.yaml"
    config.write_text(
        f"api:\n  host: 127.0.0.1\n  port: {port}\n"
        f"herdr:\n  socketPath: {sock}\n"
        "leads:\n  - name: lead\n    agent: lead\n    tokenEnv: SERVE_TEST_LEAD\n"
        "profiles:\n  sonnet:\n    kind: claude\n"
        f"worktrees:\n  root: {tmp_path / 'worktrees'}\n  defaultRepo: {repo}\n"
        f"state:\n  url: '{state_url}'\n",
        encoding="utf-8",
    )
    env = {**os.environ, "SERVE_TEST_LEAD": LEAD_TOKEN}
    env.pop("FLEETD_CRASH_AT", None)
    prompt_log = tmp_path / "prompts.log"
    sim = _fleetd(
        "sim",
        "--socket",
        str(sock),
        "--scenario",
        str(scenario),
        "--prompt-log",
        str(prompt_log),
        env=env,
    )
    _wait_for_line(sim, b"listening on")
    threading.Thread(target=_drain, args=(sim,), daemon=True).start()
    built = Fleet(
        tmp=tmp_path,
        config=config,
        base=f"http://127.0.0.1:{port}",
        state_url=state_url,
        prompt_log=prompt_log,
        env=env,
        sim=sim,
    )
    try:
        yield built
    finally:
        for proc in (*built.serves, sim):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        if schema is not None:
            with psycopg.connect(require_postgres(True), autocommit=True) as db:
                db.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _settled(fleet: Fleet, tickets: list[str]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for ticket in tickets:
        results[ticket] = _poll_until(
            partial(fleet.ok, "fleet_poll", ticket=ticket), lambda r: r["status"] != "pending"
        )
    return results


def test_a_clean_restart_in_the_middle_of_traffic_keeps_every_member_working(
    fleet: Fleet,
) -> None:
    """SIGTERM while members work and sends wait: the next start lists the same members, every
    ticket ends done with the member's reply, and each prompt was typed exactly once."""
    fleet.start()
    members = [fleet.ready_member(f"worker-{n}") for n in (1, 2)]
    tickets = [
        fleet.ok("fleet_send", target=sid, prompt=f"task {sid} {n}")["ticket"]
        for n in range(3)
        for sid in members
    ]
    before = sorted((m["sessionId"], m["name"]) for m in fleet.ok("fleet_list")["members"])
    assert _sigterm(fleet.serves[-1]) == 0
    fleet.start()
    after = sorted((m["sessionId"], m["name"]) for m in fleet.ok("fleet_list")["members"])
    assert after == before
    results = _settled(fleet, tickets)
    assert {(r["status"], r["source"]) for r in results.values()} == {("done", "reply")}
    assert set(fleet.prompts().values()) == {1}
    assert len(fleet.prompts()) == len(tickets)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize(
    "point", ["creating", "accepted", "typing", "typed", "ended", "releasing", "released"]
)
def test_kill_at_each_write_ahead_step_loses_nothing_and_types_nothing_twice(
    fleet: Fleet, point: str
) -> None:
    """fleetd dies (exit 137, as kill -9) right after one write-ahead step; the restarted one
    finishes the work: no prompt typed twice, every ticket ends with one outcome (a turn the
    crash left uncertain is never typed again, stays pending, and ends when the lead stops the
    member)."""
    first = fleet.start(crash_at=point)
    if point == "creating":  # dies ahead of herdr's workspace.create: rolled back at start
        with contextlib.suppress(httpx.HTTPError):
            fleet.call("fleet_spawn", profile="sonnet", name="worker-1")
        assert first.wait(timeout=30) == 137
        fleet.start()
        rows = _poll_until(
            lambda: [(m["name"], m["state"]) for m in fleet.ok("fleet_list")["members"]],
            lambda r: r == [("worker-1", "released")],
        )
        assert rows == [("worker-1", "released")]
        assert fleet.stored().members == ()
        fleet.ready_member("worker-1")  # its name is free again
        return
    sid = fleet.ready_member("worker-1")
    with contextlib.suppress(httpx.HTTPError):  # the call may die with the process
        if point in ("releasing", "released"):
            fleet.call("fleet_stop", sessionId=sid)
        elif point == "accepted":  # a send is stored queued only while its member works
            fleet.ok("fleet_send", target=sid, prompt="the first task")
            fleet.call("fleet_send", target=sid, prompt="the task")
        else:
            fleet.call("fleet_send", target=sid, prompt="the task")
    assert first.wait(timeout=30) == 137
    fleet.start()
    if point == "released":
        assert _poll_until(lambda: fleet.ok("fleet_list")["members"], lambda m: m == []) == []
        return
    if point == "releasing":  # the stop is finished, never undone: no member back live
        states = _poll_until(
            lambda: [m["state"] for m in fleet.ok("fleet_list")["members"]],
            lambda s: s == ["released"],
        )
        assert states == ["released"]
        assert fleet.stored().members == ()
        return
    tickets = [t.ticket_id for t in fleet.stored().tickets]
    assert len(tickets) == (2 if point == "accepted" else 1)
    if point == "typing":
        polled = fleet.ok("fleet_poll", ticket=tickets[0])
        assert (polled["status"], polled["delivery"]) == ("pending", "uncertain")
        assert fleet.prompts() == Counter()
        fleet.ok("fleet_stop", sessionId=sid)
    results = _settled(fleet, tickets)
    expected = "failed" if point == "typing" else "done"
    assert {r["status"] for r in results.values()} == {expected}
    assert set(fleet.prompts().values()) <= {1}
    assert all(t.outcome != "pending" for t in fleet.stored().tickets)


def test_a_second_fleetd_on_the_same_store_is_refused_naming_the_holder(fleet: Fleet) -> None:
    """While one fleetd runs, a second on the same store and instance exits 2 naming the pid of
    the one holding it."""
    first = fleet.start()
    second = fleet.serve()
    assert second.wait(timeout=30) == 2
    assert second.stdout is not None
    output = second.stdout.read().decode()
    assert "state store error" in output
    assert f"pid {first.pid}" in output


def test_a_corrupt_store_stops_the_start_and_discard_state_starts_afresh(fleet: Fleet) -> None:
    """A readable store with --discard-state starts empty and the discarded run's ticket is
    refused with the restart message; a store file that is not a database is exit 2 naming it,
    and --discard-state then sets that file aside (kept, renamed) and starts afresh."""
    fleet.start()
    sid = fleet.ready_member("worker-1")
    ticket = fleet.ok("fleet_send", target=sid, prompt="before")["ticket"]
    _settled(fleet, [ticket])
    assert _sigterm(fleet.serves[-1]) == 0
    fleet.start("--discard-state")
    body = fleet.call("fleet_poll", ticket=ticket)
    assert not body["ok"]
    assert "fleetd restarted" in body["error"]["message"]
    assert _sigterm(fleet.serves[-1]) == 0

    path = Path(fleet.state_url.removeprefix("sqlite:///"))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"not a database" * 500)
    broken = fleet.serve()
    assert broken.wait(timeout=30) == 2
    assert broken.stdout is not None
    output = broken.stdout.read().decode()
    assert f"state store error: {fleet.state_url}" in output
    assert "corrupt" in output
    assert "--discard-state sets the file aside" in output
    fleet.start("--discard-state")  # the unreadable file is set aside, kept, and a new one made
    [aside] = [p for p in path.parent.iterdir() if re.search(r"\.discarded-\d{8}T\d{6}Z$", p.name)]
    assert aside.read_bytes() == b"not a database" * 500
    members = fleet.ok("fleet_list")["members"]
    assert [m["state"] for m in members] == ["orphaned"]  # its member: not taken back, shown
    assert _sigterm(fleet.serves[-1]) == 0


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param("UPDATE state_tickets SET delivery = 'bogus'", "corrupt", id="a bad value"),
        pytest.param("DROP TABLE state_turns", "schema_missing", id="a table gone"),
    ],
)
def test_a_store_whose_records_cannot_be_read_stops_the_start_with_exit_2(
    fleet: Fleet, damage: str, reason: str
) -> None:
    """A database that opens but holds what no revision wrote (a value outside its kind, a table
    gone) stops the start before the port is bound: exit 2, the store and the reason named, and
    how to start afresh; no traceback."""
    fleet.start()
    sid = fleet.ready_member("worker-1")
    _settled(fleet, [fleet.ok("fleet_send", target=sid, prompt="before")["ticket"]])
    assert _sigterm(fleet.serves[-1]) == 0
    path = Path(fleet.state_url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as connection:
        connection.execute(damage)
    broken = fleet.serve()
    assert broken.wait(timeout=30) == 2
    assert broken.stdout is not None
    output = broken.stdout.read().decode()
    assert f"state store error: {fleet.state_url}: load: {reason}" in output
    assert "--discard-state" in output
    assert "Traceback" not in output


def _kills() -> int:
    """Kills in the random-kill test: a few in the suite; ``FLEETD_SOAK_KILLS`` for a soak."""
    return int(os.environ.get("FLEETD_SOAK_KILLS", "5"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_kill_9_at_random_moments_loses_nothing_and_types_nothing_twice(fleet: Fleet) -> None:
    """Sends keep coming while fleetd is killed with SIGKILL at random moments and restarted:
    no prompt is typed twice, and in the end every ticket has one outcome (done by the member's
    reply, or, for a turn a kill left uncertain and so never typed again, failed when the lead
    stops that member)."""
    rng = random.Random(int(os.environ.get("FLEETD_SOAK_SEED", "7")))
    fleet.start()
    members = [fleet.ready_member(f"worker-{n}") for n in (1, 2)]
    sent = 0
    for _ in range(_kills()):
        proc = fleet.serves[-1]
        stop_at = time.monotonic() + rng.uniform(0.2, 1.5)
        while time.monotonic() < stop_at:
            with contextlib.suppress(httpx.HTTPError):
                fleet.call("fleet_send", target=members[sent % 2], prompt=f"task {sent}")
            sent += 1
            time.sleep(rng.uniform(0.0, 0.2))
        proc.kill()
        assert proc.wait(timeout=10) == -signal.SIGKILL
        fleet.start()
    tickets = [t.ticket_id for t in fleet.stored().tickets]

    def settled() -> list[Any]:
        return [t for t in fleet.stored().tickets if t.outcome == "pending"]

    def blocked(pending: list[Any]) -> bool:
        """Only turns a kill left uncertain, and the sends queued behind them, are pending."""
        held = {t.target for t in pending if t.delivery is DeliveryState.UNCERTAIN}
        return all(t.target in held for t in pending)  # a typed turn ends with its reply

    # sends come faster than two members take them: the backlog drains one turn (1 s) at a time
    backlog = len(settled())
    stuck = _poll_until(settled, blocked, limit=60 + 1.5 * backlog)
    assert blocked(stuck), stuck
    typed = fleet.prompts()
    assert set(typed.values()) <= {1}, typed
    for target in sorted({t.target for t in stuck}):  # never typed again: the lead stops it
        fleet.ok("fleet_stop", sessionId=target)
    final = {t.ticket_id: t.outcome for t in fleet.stored().tickets}
    assert set(final) == set(tickets)
    assert "pending" not in final.values()
    assert set(fleet.prompts().values()) <= {1}
