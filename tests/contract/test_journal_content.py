"""The journal stores no pane text, prompt, reply, path or secret (M4 §10.3, §10.5).

A whole incident life runs with marker strings wherever such content exists around the journal:
in the incident's evidence (which is not stored), in payloads the bound must refuse, in the
database's location and password. Then every column of every table is read back, and on SQLite
every byte of the file: no marker may appear anywhere, nor in any error text.

What the bound cannot judge is a short single-line string the notifier chooses to put in a
payload; the notifier's allow-list owns that (``notify`` payload tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, MetaData, select

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import ResolveReason
from fleetd.journal.engine import journal_engine
from fleetd.journal.sql import SqlJournal
from fleetd.journal.values import EventType, IncidentChange, NewEvent, Routing
from tests.contract.journal_cases import T0, make_incident

pytest_plugins = ["tests.contract.journal_fixtures"]

PANE = "PANE-MARKER-7f3a"
PROMPT = "PROMPT-MARKER-91bc"
REPLY = "REPLY-MARKER-2d44"
PATH = "PATH-MARKER-c0de"
SECRET = "SECRET-MARKER-5eed"
MARKERS = (PANE, PROMPT, REPLY, PATH, SECRET)
LEASE = timedelta(seconds=30)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def marked_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A journal URL whose path (SQLite) or password (PostgreSQL, trust auth) holds a marker."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / PATH / 'journal.sqlite'}"
        return
    url = request.getfixturevalue("journal_pg_url")
    yield url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")


@pytest.fixture
async def journal(marked_url: str) -> AsyncIterator[SqlJournal]:
    journal = SqlJournal(marked_url)
    try:
        yield journal
    finally:
        await journal.close()


def safe_payload(kind: EventType, incident_id: str) -> dict[str, object]:
    """What a notifier may send: ids, codes, counts, times, safe tool calls."""
    return {
        "incidentId": incident_id,
        "eventType": kind.value,
        "severity": "critical",
        "state": "GONE",
        "scope": "member",
        "subject": "sess_1",
        "evidence": {"type": "agent_not_found", "snapshots": 2},
        "openedAt": T0.isoformat(),
        "safeToolCalls": ['fleet_status(sessionId="sess_1")', "fleet_list()"],
    }


FORBIDDEN_PAYLOADS = [
    {"excerpt": f"❯ {PANE}\n⏺ working on it"},
    {"brief": f"Implement the parser.\n{PROMPT}"},
    {"reply": f"{REPLY} " + "done " * 80},
    {"worktree": f"/home/dev/.fleetd/worktrees/{PATH}"},
    {"webhook": f"https://hooks.example.test/{SECRET}"},
    {"error": f"Traceback (most recent call last):\n  File x, line 1\n{SECRET}"},
]


async def live_an_incident(journal: SqlJournal) -> None:
    """Open, refuse content (recorded or settled), retry, fail, re-arm, deliver, re-route,
    resolve."""
    incident = dataclasses.replace(
        make_incident(),
        evidence=(
            ("pane", PANE),
            ("prompt", PROMPT),
            ("reply", REPLY),
            ("worktree", f"/srv/{PATH}"),
            ("token", SECRET),
        ),
    )
    change = IncidentChange(incident=incident)
    opening = NewEvent(type=EventType.OPEN, payload=safe_payload(EventType.OPEN, incident.id))
    await journal.record(change, [opening], now=T0)
    for payload in FORBIDDEN_PAYLOADS:
        bad = [NewEvent(type=EventType.REMINDER, payload=payload)]
        with pytest.raises(JournalRefusedError) as caught:
            await journal.record(change, bad, now=T0)
        with pytest.raises(JournalRefusedError) as settled:
            await journal.settle(incident.id, now=T0, after_revision=1, events=bad)
        for refused in (caught.value, settled.value):
            text = f"{refused!s} {refused!r} {refused.code}"
            assert not [m for m in MARKERS if m in text]
    (claim,) = await journal.claim_due("fleetd-host-1", now=T0, lease=LEASE)
    await journal.reschedule(claim, now=T0, due_at=T0, failure="timeout")
    (claim,) = await journal.claim_due("fleetd-host-1", now=T0, lease=LEASE)
    await journal.fail(claim, now=T0, failure="http_4xx", http_status=400)
    assert await journal.settle(incident.id, now=T0, after_revision=1, rearm=[1]) == ()
    (claim,) = await journal.claim_due("fleetd-host-2", now=T0, lease=LEASE)
    await journal.complete(claim, now=T0, http_status=204)
    routed = Routing(owner="lead", recipient="peer", reason="owner_unhealthy", generation=1)
    await journal.record(dataclasses.replace(change, routing=routed), now=T0)
    resolved = dataclasses.replace(
        change, routing=routed, resolved_at=T0, resolve_reason=ResolveReason.CLEARED
    )
    closing = NewEvent(
        type=EventType.RESOLVED, payload=safe_payload(EventType.RESOLVED, incident.id)
    )
    await journal.record(resolved, [closing], now=T0)


def every_value(engine: Engine) -> list[str]:
    """Every value of every column of every table (the migration table too), as text."""
    metadata = MetaData()
    metadata.reflect(engine)
    values: list[str] = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                values.extend(str(value) for value in row)
    return values


async def test_no_content_reaches_any_column(journal: SqlJournal, marked_url: str) -> None:
    """No prompt, reply or screen text (the markers) reaches any journal column, and on SQLite
    not the database files either, though the scan sees stored values."""
    await live_an_incident(journal)
    await journal.close()
    engine = journal_engine(marked_url)
    try:
        values = every_value(engine)
    finally:
        engine.dispose()
    assert "sess_1" in values  # the scan does see stored values
    assert "fleetd-host-2" in values
    assert [v for v in values if any(m in v for m in MARKERS)] == []
    if marked_url.startswith("sqlite:///"):
        database = Path(marked_url.removeprefix("sqlite:///"))
        raw = b"".join(p.read_bytes() for p in database.parent.iterdir())
        assert b"sess_1" in raw
        assert [m for m in MARKERS if m.encode() in raw] == []
