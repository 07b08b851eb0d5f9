"""A failing journal degrades notification coverage and never stops its caller; errors are typed
and bounded whatever the database said."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from fleetd.clock import FakeClock
from fleetd.errors import (
    FleetdError,
    JournalError,
    JournalRefusedError,
    JournalSchemaError,
    JournalUnavailableError,
)
from fleetd.journal.engine import translate
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.port import Journal
from fleetd.journal.values import Claim, EventType, IncidentChange, InstanceRecord
from fleetd.journal.watch import OPERATIONS, JournalHealth, JournalStatus, JournalWatch
from fleetd.metrics import Metrics
from tests.contract.journal_cases import make_incident

T0 = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)


async def test_failures_degrade_and_the_next_success_clears() -> None:
    """Degraded from the first failure (its time kept while failures repeat), ok again after one
    good call; the error still reaches the caller."""
    clock = FakeClock(T0)
    fake = InMemoryJournal()
    watch = JournalWatch(clock=clock)
    fake.observe(watch)
    journal = fake
    assert watch.health == JournalHealth()
    fake.fail_with = JournalUnavailableError("record", "disk_full", code="SQLITE_FULL")
    with pytest.raises(JournalUnavailableError):
        await journal.stats()
    clock.advance(30)
    fake.fail_with = JournalUnavailableError("load", "unreachable")
    with pytest.raises(FleetdError):
        await journal.load_open()
    assert watch.health == JournalHealth(
        status=JournalStatus.DEGRADED, reason="load: unreachable", since=T0, failures=2
    )
    fake.fail_with = None
    assert (await journal.stats()).queue_depth == 0
    assert watch.health.ok


async def test_a_refusal_is_an_answer_not_an_outage(caplog: pytest.LogCaptureFixture) -> None:
    """A record the journal refuses (another instance recorded the same open key first) reaches
    the caller, but the journal answered: no degraded health, no "failing" WARNING (one was
    logged, with coverage degraded, for every such refusal); a refusal after an outage ends it."""
    clock = FakeClock(T0)
    fake = InMemoryJournal()
    watch = JournalWatch(clock=clock)
    fake.observe(watch)
    fake.fail_with = JournalRefusedError("record", "open_key_conflict")
    with pytest.raises(JournalRefusedError):
        await fake.stats()
    assert watch.health.ok
    assert not [r for r in caplog.records if "failing" in r.getMessage()]
    fake.fail_with = JournalUnavailableError("record", "unreachable")
    with pytest.raises(JournalUnavailableError):
        await fake.stats()
    assert not watch.health.ok
    fake.fail_with = JournalRefusedError("record", "open_key_conflict")
    with pytest.raises(JournalRefusedError):
        await fake.stats()
    assert watch.health.ok


async def test_every_port_call_is_observed() -> None:
    """No method bypasses the health bookkeeping."""
    fake = InMemoryJournal()
    watch = JournalWatch(clock=FakeClock(T0))
    fake.observe(watch)
    journal = fake
    fake.fail_with = JournalUnavailableError("x", "unreachable")
    calls = [
        journal.get("inc_1"),
        journal.load_open(),
        journal.claim_due("w", now=T0, lease=timedelta(seconds=1)),
        journal.settle("inc_1", now=T0, after_revision=0),
        journal.settle("inc_1", now=T0, after_revision=1, cancel=[1], rearm=[2]),
        journal.recent(resolved_since=T0),
        journal.stats(),
    ]
    for call in calls:
        with pytest.raises(JournalUnavailableError):
            await call
    assert watch.health.failures == len(calls)
    await journal.close()


async def test_every_port_method_is_timed_under_its_own_name() -> None:
    """5e: the latency series has one bounded label per port method, and each call lands in its
    own (the label set and the port cannot drift apart)."""
    port_methods = {name for name in dir(Journal) if not name.startswith("_")} - {
        "close",
        "observe",
    }
    assert set(OPERATIONS) == port_methods
    metrics = Metrics()
    fake = InMemoryJournal()
    watch = JournalWatch(clock=FakeClock(T0), metrics=metrics)
    fake.observe(watch)
    journal = fake
    fake.fail_with = JournalUnavailableError("x", "unreachable")
    claim = Claim(
        attempt_id=1,
        attempt=1,
        event_id=1,
        incident_id="inc_1",
        type=EventType.OPEN,
        revision=1,
        idempotency_key="k",
        payload={},
        due_at=T0,
        lease_owner="w",
        lease_expires_at=T0,
        lease_token=1,
    )
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "record": lambda: journal.record(IncidentChange(incident=make_incident()), now=T0),
        "settle": lambda: journal.settle("inc_1", now=T0, after_revision=0),
        "get": lambda: journal.get("inc_1"),
        "recent": lambda: journal.recent(resolved_since=T0),
        "load_open": lambda: journal.load_open(told_since=T0),
        "claim_due": lambda: journal.claim_due("w", now=T0, lease=timedelta(seconds=1)),
        "complete": lambda: journal.complete(claim, now=T0, http_status=204),
        "reschedule": lambda: journal.reschedule(claim, now=T0, due_at=T0, failure="timeout"),
        "fail": lambda: journal.fail(claim, now=T0, failure="http_4xx"),
        "release": lambda: journal.release(claim, now=T0),
        "stats": journal.stats,
        "purge": lambda: journal.purge(resolved_before=T0),
        "renew_instance": lambda: journal.renew_instance(
            InstanceRecord(instance="a", host="h", version="v", started_at=T0, last_seen=T0)
        ),
        "instances": journal.instances,
        "instance_summaries": lambda: journal.instance_summaries(["a"]),
    }
    assert set(calls) == set(OPERATIONS)
    for call in calls.values():
        with pytest.raises(JournalUnavailableError):
            await call()
    text = metrics.exposition().decode()
    for operation in OPERATIONS:
        assert f'fleetd_journal_operation_seconds_count{{operation="{operation}"}} 1.0' in text


def _sqlite_error(name: str, message: str) -> OperationalError:
    orig = sqlite3.OperationalError(message)
    orig.sqlite_errorname = name
    return OperationalError("INSERT ... (secret payload)", {}, orig)


class _PgError(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__("server said: password=hunter2")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [
        (
            _sqlite_error("SQLITE_FULL", "database or disk is full"),
            JournalUnavailableError,
            "disk_full",
        ),
        (_sqlite_error("SQLITE_BUSY", "database is locked"), JournalUnavailableError, "locked"),
        (
            _sqlite_error("SQLITE_IOERR_WRITE", "disk I/O error"),
            JournalUnavailableError,
            "io_error",
        ),
        (
            _sqlite_error("SQLITE_ERROR", "no such table: incidents"),
            JournalSchemaError,
            "schema_missing",
        ),
        (OperationalError("SELECT 1", {}, _PgError("53100")), JournalUnavailableError, "disk_full"),
        (
            OperationalError("SELECT 1", {}, _PgError("08006")),
            JournalUnavailableError,
            "unreachable",
        ),
        (
            OperationalError("SELECT 1", {}, _PgError("57P01")),
            JournalUnavailableError,
            "unreachable",
        ),
        (
            OperationalError("SELECT 1", {}, _PgError("28P01")),
            JournalUnavailableError,
            "auth_failed",
        ),
        (OperationalError("SELECT 1", {}, _PgError(None)), JournalUnavailableError, "unreachable"),
        (ProgrammingError("SELECT 1", {}, _PgError("42P01")), JournalSchemaError, "schema_missing"),
        (IntegrityError("INSERT", {}, _PgError("23505")), JournalRefusedError, "conflict"),
        (OSError(errno.ENOSPC, "No space left"), JournalUnavailableError, "disk_full"),
        (OSError(errno.EACCES, "Permission denied"), JournalUnavailableError, "permission_denied"),
    ],
)
def test_database_errors_become_bounded_journal_errors(
    error: Exception, kind: type[JournalError], reason: str
) -> None:
    """The reason is a bounded word; the database's message (SQL, parameters) is not kept."""
    translated = translate(error, "record")
    assert type(translated) is kind
    assert translated.reason == reason
    assert str(translated) == f"record: {reason}"
    assert "secret" not in repr(translated)
    assert "hunter2" not in repr(translated)
