"""The journal's history: what 100,000 resolved incidents cost the calls fleetd makes all day.

Two journals per database, side by side: one holds only the open set (20 open incidents, each
with its delivered ``open`` event), the other the same open set plus 100,000 incidents resolved a
day ago (within the retention), each with a delivered ``open`` and ``resolved`` event and their
attempts, every key distinct (members come and go). The history is bulk-inserted in the journal's
own tables; the open set goes through ``SqlJournal.record`` as fleetd writes it. On PostgreSQL the
filled schema is then analysed, as autovacuum does after a bulk change.

Measured through ``SqlJournal`` (one worker thread, the real queries), alternating between the two
journals so that machine noise hits both alike, median of the samples:

* **idle pass** — what the delivery worker asks on a pass with nothing due: ``claim_due`` (16),
  ``stats`` and ``load_open`` (its reminder scan);
* **stats** — ``stats()`` alone (queue depth and last delivery, every 0.5 s);
* **load_open** — ``load_open()`` on a warm client;
* **load_open at start** — a new client's first call, as ``fleetd serve`` makes it when it
  resumes: connect, schema check, ``load_open``.

Target: each within 1.5x of the same call on the open set alone. Prints the figures; exits 1 on a
miss. Run: ``.venv/bin/python benchmarks/journal_history.py [--history N] [--no-postgres]
[--postgres URL]``; SQLite files go to a temporary directory, PostgreSQL to fresh schemas.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, insert, text

from fleetd.health.incidents import Incident, IncidentKey, incident_id
from fleetd.health.states import MemberState, Scope, spec_of
from fleetd.journal.engine import journal_engine
from fleetd.journal.sql import SqlJournal
from fleetd.journal.tables import AttemptRow, EventRow, IncidentRow
from fleetd.journal.values import EventType, IncidentChange, NewEvent, idempotency_key

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
HISTORY = 100_000
OPEN = 20
SAMPLES = 40
START_SAMPLES = 12
TARGET = 1.5
CHUNK = 10_000
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=1)
DEADLINE = timedelta(seconds=60)  # the fill's bulk work is not what is measured
_SPEC = spec_of(MemberState.GONE)


def key_of(subject: str) -> IncidentKey:
    return IncidentKey(
        scope=Scope.MEMBER, subject=subject, state=MemberState.GONE, cause="agent_not_found"
    )


def journal(url: str) -> SqlJournal:
    return SqlJournal(url, deadline=lambda: DEADLINE)


async def open_set(url: str) -> None:
    """The open incidents every journal holds, written as fleetd writes them."""
    client = journal(url)
    try:
        for n in range(OPEN):
            key = key_of(f"sess_open_{n}")
            opened = NOW - timedelta(hours=2)
            incident = Incident(
                id=incident_id(key, 1, "bench"),
                key=key,
                generation=1,
                target=f"term_{n}",
                severity=_SPEC.severity,
                certainty=_SPEC.certainty,
                opened_at=opened,
                owner_lead="lead",
            )
            event = NewEvent(type=EventType.OPEN, payload={"event": "open", "n": n})
            await client.record(IncidentChange(incident=incident), [event], now=opened)
        delivered = NOW - timedelta(hours=1)
        while claims := await client.claim_due("bench", now=delivered, lease=LEASE):
            for claim in claims:
                await client.complete(claim, now=delivered, http_status=204)
    finally:
        await client.close()


def history_rows(
    first: int, count: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` resolved incidents (numbered from ``first``) with two delivered events each."""
    incidents: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    resolved = NOW - timedelta(days=1)
    for n in range(first, first + count):
        key = key_of(f"sess_h{n:06d}")
        ident = incident_id(key, 1, "bench")
        opened = resolved - timedelta(hours=1, milliseconds=n)
        incidents.append(
            {
                "id": ident,
                "scope": key.scope.value,
                "subject_stable_id": key.subject,
                "state": key.state.value,
                "cause_fingerprint": key.cause,
                "generation": 1,
                "severity": _SPEC.severity.value,
                "certainty": _SPEC.certainty.value,
                "target": f"term_h{n}",
                "committed_work_at_risk": False,
                "routing_owner": "lead",
                "routing_recipient": None,
                "routing_reason": "human_no_owner",
                "routing_generation": 1,
                "opened_at": opened,
                "resolved_at": resolved,
                "resolve_reason": "cleared",
                "updated_at": resolved,
            }
        )
        for revision, (kind, at) in enumerate(
            ((EventType.OPEN, opened), (EventType.RESOLVED, resolved)), start=1
        ):
            event_id = 2 * n + revision
            events.append(
                {
                    "id": event_id,
                    "incident_id": ident,
                    "event_type": kind.value,
                    "revision": revision,
                    "idempotency_key": idempotency_key(ident, kind, revision),
                    "payload": {"event": kind.value, "n": n},
                    "state": "delivered",
                    "created_at": at,
                    "delivered_at": at,
                }
            )
            attempts.append(
                {
                    "id": event_id,
                    "event_id": event_id,
                    "attempt": 1,
                    "due_at": at,
                    "outcome": "delivered",
                    "http_status": 204,
                    "lease_owner": "bench",
                    "lease_expires_at": at + LEASE,
                    "lease_token": 1,
                    "created_at": at,
                    "finished_at": at,
                }
            )
    return incidents, events, attempts


def fill_history(engine: Engine, count: int) -> None:
    """Bulk-insert ``count`` resolved incidents; ids start above the open set's."""
    offset = 1_000
    for first in range(offset, offset + count, CHUNK):
        incidents, events, attempts = history_rows(first, min(CHUNK, offset + count - first))
        with engine.begin() as connection:
            connection.execute(insert(IncidentRow.__table__), incidents)  # type: ignore[attr-defined]
            connection.execute(insert(EventRow.__table__), events)  # type: ignore[attr-defined]
            connection.execute(insert(AttemptRow.__table__), attempts)  # type: ignore[attr-defined]
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            for table in ("outbound_events", "delivery_attempts"):
                connection.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))


async def prepare(url: str, history: int) -> None:
    await open_set(url)
    if history:
        engine = journal_engine(url)
        try:
            fill_history(engine, history)
        finally:
            engine.dispose()


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def idle_pass(client: SqlJournal) -> None:
    """What the delivery worker asks of the journal on a pass with nothing due."""
    await client.claim_due("bench", now=NOW, lease=LEASE, limit=16)
    await client.stats()
    await client.load_open()


async def at_start(url: str) -> None:
    client = journal(url)
    try:
        await client.load_open()
    finally:
        await client.close()


async def measure(empty: str, full: str) -> dict[str, tuple[float, float]]:
    """Median seconds per figure: (open set alone, open set plus history)."""
    clients = (journal(empty), journal(full))
    samples: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("idle pass", "stats", "load_open", "load_open at start")
    }
    try:
        for client in clients:  # warm up: schema check, connections, statement caches
            for _ in range(3):
                await idle_pass(client)
        for _ in range(SAMPLES):
            for side, client in enumerate(clients):
                samples["idle pass"][side].append(await timed(partial(idle_pass, client)))
                samples["stats"][side].append(await timed(client.stats))
                samples["load_open"][side].append(await timed(client.load_open))
        for _ in range(START_SAMPLES):
            for side, url in enumerate((empty, full)):
                samples["load_open at start"][side].append(await timed(partial(at_start, url)))
    finally:
        for client in clients:
            await client.close()
    return {
        name: (statistics.median(alone), statistics.median(kept))
        for name, (alone, kept) in samples.items()
    }


@contextlib.contextmanager
def sqlite_pair() -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory)
        yield f"sqlite:///{base / 'empty.sqlite'}", f"sqlite:///{base / 'full.sqlite'}"


@contextlib.contextmanager
def postgres_pair(base: str) -> Iterator[tuple[str, str]]:
    schemas = [f"fleetd_bench_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    with psycopg.connect(base, autocommit=True) as db:
        for schema in schemas:
            db.execute(f'CREATE SCHEMA "{schema}"')
    try:
        empty, full = (f"{base}?options=-csearch_path%3D{schema}" for schema in schemas)
        yield empty, full
    finally:
        with psycopg.connect(base, autocommit=True) as db:
            for schema in schemas:
                db.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def run(
    kind: str, pair: contextlib.AbstractContextManager[tuple[str, str]], history: int
) -> bool:
    with pair as (empty, full):
        started = time.perf_counter()
        await prepare(empty, 0)
        await prepare(full, history)
        filled = time.perf_counter() - started
        figures = await measure(empty, full)
    print(f"{kind}: {history:,} resolved incidents filled in {filled:.1f} s; median of samples")
    ok = True
    for name, (alone, kept) in figures.items():
        ratio = kept / alone
        met = ratio <= TARGET
        ok = ok and met
        print(
            f"  {name:<20} open set {alone * 1000:8.2f} ms   with history {kept * 1000:8.2f} ms"
            f"   x{ratio:.2f} {'met' if met else 'MISSED'}"
        )
    return ok


async def main(history: int, postgres: str | None) -> int:
    ok = await run("SQLite", sqlite_pair(), history)
    if postgres is not None:
        ok = await run("PostgreSQL", postgres_pair(postgres), history) and ok
    print(
        f"target: each figure within {TARGET}x of the open set alone: {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=HISTORY, help="resolved incidents kept")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a PostgreSQL database URL")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    arguments = parser.parse_args()
    postgres = None if arguments.no_postgres else arguments.postgres
    sys.exit(asyncio.run(main(arguments.history, postgres)))
