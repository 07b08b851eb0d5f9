"""7b: what the delivery pass, a restart and the retention ask of the SQLite journal reads the
open set through indexes, never a pass over the history kept (SQLite's own query plans).

The benchmark (``benchmarks/journal_history.py``) times the same on 100,000 resolved incidents on
SQLite and PostgreSQL; this test holds the plans that make it so, on every run.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event

from fleetd.health.incidents import ResolveReason
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from tests.contract.journal_cases import T0, make_incident

LEASE = timedelta(seconds=30)
PARTIAL = {
    "uq_delivery_attempts_outstanding",
    "ix_delivery_attempts_due",
    "ix_outbound_events_pending",
    "ix_outbound_events_failed",
    "ix_outbound_events_delivered_reminders",
    "uq_incidents_open_key",
}
"""Indexes that hold only open or outstanding rows: scanning one follows the open set."""
_SCAN = re.compile(r"^SCAN (\S+)(?: USING (?:COVERING )?INDEX (\S+))?")


def history_scans(plan: list[str]) -> list[str]:
    """Plan steps that read a table, or an index over all its rows, from end to end."""
    found = []
    for step in plan:
        match = _SCAN.match(step)
        if match is None or match.group(1) == "CONSTANT" or match.group(1).startswith("("):
            continue
        if match.group(2) not in PARTIAL:
            found.append(step)
    return found


def test_the_scan_check_sees_a_full_scan() -> None:
    """The check above can fail: a table scan and a scan of a full index are both reported."""
    plan = [
        "SCAN outbound_events",
        "SCAN incidents USING INDEX ix_incidents_resolved_at",
        "SCAN delivery_attempts USING INDEX uq_delivery_attempts_outstanding",
        "SEARCH incidents USING INDEX ix_incidents_resolved_at (resolved_at<?)",
        "SCAN CONSTANT ROW",
    ]
    assert history_scans(plan) == plan[:2]


async def test_frequent_queries_follow_the_open_set(tmp_path: Path) -> None:
    """Stats, load_open (a restart's, and the human-leg sweep's with ``told_since``), claim_due,
    purge, recent, and get and settle of the open incident on a journal with resolved history
    and one open incident: no step of any plan scans history."""
    path = tmp_path / "journal.sqlite"
    journal = SqlJournal(f"sqlite:///{path}")
    try:
        for n in range(50):
            change = IncidentChange(incident=make_incident(f"sess_{n}"))
            await journal.record(change, [NewEvent(type=EventType.OPEN, payload={})], now=T0)
            for claim in await journal.claim_due("w", now=T0, lease=LEASE):
                await journal.complete(claim, now=T0, http_status=204)
            done = dataclasses.replace(change, resolved_at=T0, resolve_reason=ResolveReason.CLEARED)
            await journal.record(done, now=T0)
        live = IncidentChange(incident=make_incident("sess_open", generation=2))
        await journal.record(live, [NewEvent(type=EventType.OPEN, payload={})], now=T0)
        statements: list[tuple[str, Any]] = []

        def capture(*args: Any) -> None:
            _conn, _cursor, statement, parameters = args[:4]
            if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
                statements.append((statement, parameters))

        event.listen(journal.engine, "before_cursor_execute", capture)
        await journal.stats()
        await journal.load_open()
        await journal.load_open(told_since=T0 - timedelta(days=1))
        await journal.claim_due("w", now=T0, lease=LEASE)
        await journal.purge(resolved_before=T0 - timedelta(days=1))
        await journal.recent(resolved_since=T0)
        await journal.get(live.incident.id)
        settled = await journal.settle(
            live.incident.id,
            now=T0,
            after_revision=1,
            events=[NewEvent(type=EventType.REMINDER, payload={})],
            cancel=(1,),
            rearm=(1,),
        )
        assert settled is not None
    finally:
        await journal.close()
    assert len(statements) > 10
    with sqlite3.connect(path) as db:
        for statement, parameters in statements:
            plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}", parameters)]
            assert history_scans(plan) == [], (statement, plan)
