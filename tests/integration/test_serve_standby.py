"""A standby for real: two ``fleetd serve`` processes of one instance on one PostgreSQL state
store beside ``fleetd sim``. The second, started with ``--standby``, waits on the instance's
advisory lock (``/readyz`` 503 ``standby`` naming the holder, ``/livez`` 200); without
``--standby`` a third is refused naming the holder. ``kill -9`` of the active one: the standby
takes the lock, loads the store and adopts the members within two snapshot intervals, every
ticket ends done by its member's reply and no prompt is typed twice."""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
import uuid
from functools import partial
from typing import Any

import httpx
import psycopg
import pytest

from tests.contract.journal_fixtures import postgres_reachable, require_postgres, schema_url
from tests.integration.test_serve_process import (
    _drain,
    _fleetd,
    _free_port,
    _poll_until,
    _wait_for_line,
)
from tests.integration.test_serve_restart import Fleet, _settled
from tests.integration.test_serve_restart import backend as backend  # noqa: PLC0414 — fixture
from tests.integration.test_serve_restart import fleet as fleet  # noqa: PLC0414 — fixture
from tests.pg_locks import end_lock_session

pytestmark = pytest.mark.postgres

SNAPSHOT_SECONDS = 15  # health.snapshotIntervalSeconds (its floor): take-over within two


@pytest.fixture
def standby_fleet(fleet: Fleet) -> tuple[Fleet, int]:
    """The restart tests' fleet on PostgreSQL, with its own instance name, the snapshot interval
    at its floor and a standby port."""
    standby_port = _free_port()
    fleet.config.write_text(
        fleet.config.read_text(encoding="utf-8").replace(
            "api:\n", f"api:\n  standbyPort: {standby_port}\n"
        )
        + f"instance: standby-{uuid.uuid4().hex[:8]}\n"
        + f"health:\n  snapshotIntervalSeconds: {SNAPSHOT_SECONDS}\n",
        encoding="utf-8",
    )
    return fleet, standby_port


def _get(url: str) -> httpx.Response:
    with httpx.Client(timeout=5) as client:
        return client.get(url)


def _ready(base: str) -> bool:
    try:
        return _get(f"{base}/readyz").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_standby_takes_over_a_killed_fleetd_within_two_intervals_losing_nothing(
    standby_fleet: tuple[Fleet, int],
) -> None:
    """The standby answers 503 ``standby`` naming the active's pid while it lives, a plain second
    start is refused naming it; after ``kill -9`` of the active one the standby serves on the
    API port within two snapshot intervals with the same members, every ticket sent before the
    kill ends done by its member's reply, and each prompt was typed exactly once."""
    fleet, standby_port = standby_fleet
    active = fleet.start()
    standby = fleet.serve("--standby")
    _wait_for_line(standby, b"standby on")
    threading.Thread(target=_drain, args=(standby,), daemon=True).start()
    waiting = f"http://127.0.0.1:{standby_port}"
    ready = _get(f"{waiting}/readyz")
    assert ready.status_code == 503
    assert ready.json()["standby"] is True
    assert ready.json()["holder"]["pid"] == active.pid
    assert f"pid {active.pid}" in ready.json()["output"]
    assert _get(f"{waiting}/livez").status_code == 200
    assert _get(f"{waiting}/v1/fleet").status_code == 503

    refused = _fleetd("serve", "--config", str(fleet.config), env=fleet.env)
    assert refused.wait(timeout=30) == 2
    assert refused.stdout is not None
    output = refused.stdout.read().decode()
    refused.stdout.close()
    assert f"pid {active.pid}" in output

    members = [fleet.ready_member(f"worker-{n}") for n in (1, 2)]
    tickets = [
        fleet.ok("fleet_send", target=sid, prompt=f"task {sid} {n}")["ticket"]
        for n in range(3)
        for sid in members
    ]
    before = sorted((m["sessionId"], m["name"]) for m in fleet.ok("fleet_list")["members"])

    os.kill(active.pid, signal.SIGKILL)
    killed = time.monotonic()
    assert active.wait(timeout=10) == -signal.SIGKILL
    assert _poll_until(partial(_ready, fleet.base), bool, limit=2 * SNAPSHOT_SECONDS + 5)
    took_over = time.monotonic() - killed
    print(f"take-over after kill -9: {took_over:.2f} s")
    assert took_over < 2 * SNAPSHOT_SECONDS
    assert standby.poll() is None

    after = sorted((m["sessionId"], m["name"]) for m in fleet.ok("fleet_list")["members"])
    assert after == before
    results: dict[str, dict[str, Any]] = _settled(fleet, tickets)
    assert {(r["status"], r["source"]) for r in results.values()} == {("done", "reply")}
    assert set(fleet.prompts().values()) == {1}
    assert len(fleet.prompts()) == len(tickets)
    late = fleet.ok("fleet_send", target=members[0], prompt="after the take-over")["ticket"]
    assert _settled(fleet, [late])[late]["status"] == "done"


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_standby_stopped_while_it_waits_exits_0_and_leaves_the_active_one_alone(
    standby_fleet: tuple[Fleet, int],
) -> None:
    """SIGTERM to a waiting standby ends it (exit 0) without taking the lock: the active fleetd
    keeps answering ready."""
    fleet, _ = standby_fleet
    active = fleet.start()
    standby = fleet.serve("--standby")
    _wait_for_line(standby, b"standby on")
    threading.Thread(target=_drain, args=(standby,), daemon=True).start()
    standby.send_signal(signal.SIGTERM)
    assert standby.wait(timeout=20) == 0
    assert active.poll() is None
    assert _ready(fleet.base)


def _lock_of(fleet: Fleet) -> tuple[str, str]:
    """The state store's schema and the instance name of ``fleet``'s config."""
    schema = re.search(r"search_path%3D([A-Za-z0-9_]+)", fleet.state_url)
    instance = re.search(r"^instance: (\S+)$", fleet.config.read_text(encoding="utf-8"), re.M)
    assert schema is not None
    assert instance is not None
    return schema.group(1), instance.group(1)


def _holder(fleet: Fleet) -> tuple[int, Any] | None:
    """The recorded holder of ``fleet``'s instance: its pid and since when."""
    schema, instance = _lock_of(fleet)
    with psycopg.connect(require_postgres(True), autocommit=True) as db:
        row = db.execute(
            f'SELECT pid, started_at FROM "{schema}".state_instances WHERE instance = %s',
            (instance,),
        ).fetchone()
    return (int(row[0]), row[1]) if row is not None else None


def _cut_lock_session(fleet: Fleet) -> None:
    """End the PostgreSQL session that holds the instance's writer lock (as a database restart
    or an idle-session kill would): the lock goes with it, and nobody tells its holder."""
    schema, instance = _lock_of(fleet)
    end_lock_session(require_postgres(True), instance, schema)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("first", ["active", "standby"])
def test_a_holder_whose_lock_went_with_its_connection_never_serves_beside_its_standby(
    standby_fleet: tuple[Fleet, int], first: str
) -> None:
    """The active fleetd's lock session is ended under it while a standby waits; the other one
    is paused (SIGSTOP) until ``first`` has taken the lock (each records itself as holder). The
    active first: it holds its lock again and the standby goes on waiting. The standby first:
    the active finds its lock taken, stops (exit 3) and frees its port, and the standby serves.
    Either way one fleetd serves the instance, the member's work goes on, and no prompt is
    typed twice."""
    fleet, standby_port = standby_fleet
    active = fleet.start()
    standby = fleet.serve("--standby")
    _wait_for_line(standby, b"standby on")
    threading.Thread(target=_drain, args=(standby,), daemon=True).start()
    sid = fleet.ready_member("worker-1")
    before = _holder(fleet)
    assert before is not None
    assert before[0] == active.pid
    winner, paused = (active, standby) if first == "active" else (standby, active)
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        _cut_lock_session(fleet)
        taken = _poll_until(lambda: _holder(fleet), lambda h: h is not None and h != before)
        assert taken is not None
        assert taken[0] == winner.pid
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    if first == "active":
        assert _get(f"http://127.0.0.1:{standby_port}/readyz").status_code == 503
    else:
        assert active.wait(timeout=2 * SNAPSHOT_SECONDS) == 3
        assert _poll_until(partial(_ready, fleet.base), bool, limit=2 * SNAPSHOT_SECONDS)
    assert standby.poll() is None
    ticket = fleet.ok("fleet_send", target=sid, prompt="after the cut")["ticket"]
    assert _settled(fleet, [ticket])[ticket]["status"] == "done"
    assert set(fleet.prompts().values()) == {1}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_two_fleetd_naming_one_instance_with_their_own_stores_the_later_stops(
    fleet: Fleet,
) -> None:
    """Two ``fleetd serve`` whose configs name the same instance, each with its own SQLite
    state store (so no store lock sees the other), on one PostgreSQL journal: both would serve,
    each overwriting the other's row and resolving the other's incidents. Within a renewal
    or two the later one logs an ERROR naming the first's host and exits 3; the first goes on
    serving."""
    base = require_postgres(postgres_reachable())
    schema = f"fleetd_journal_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
    try:
        shared = (
            f"instance: twin-{uuid.uuid4().hex[:8]}\n"
            f"journal:\n  url: '{schema_url(base, schema)}'\n"
            f"health:\n  enabled: true\n  snapshotIntervalSeconds: {SNAPSHOT_SECONDS}\n"
        )
        text = fleet.config.read_text(encoding="utf-8") + shared
        fleet.config.write_text(text, encoding="utf-8")
        first = fleet.start()
        port = _free_port()
        twin_config = fleet.tmp / "twin.yaml"
        twin_config.write_text(
            re.sub(r"port: \d+", f"port: {port}", text).replace("fleetd-state.db", "twin-state.db"),
            encoding="utf-8",
        )
        twin = _fleetd("serve", "--config", str(twin_config), env=fleet.env)
        fleet.serves.append(twin)
        assert twin.wait(timeout=4 * SNAPSHOT_SECONDS) == 3
        assert twin.stdout is not None
        output = twin.stdout.read().decode()
        assert "so this one stops" in output
        assert repr(socket.gethostname()) in output
        assert first.poll() is None
        assert _ready(fleet.base)
    finally:
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{schema}" CASCADE')
