"""A journal that fails is reported once, not once per call: an outage logs one WARNING at its
start and one INFO at recovery, with a metric; a journal this build cannot use (a newer schema, a
corrupt file) is decided at the first call and never migrated again."""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path

import psycopg
import pytest

from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import Fleetd, build_service
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config
from fleetd.errors import JournalSchemaError, JournalUnavailableError
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.memory import InMemoryInbox
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.sql import SqlJournal
from fleetd.journal.watch import OPERATIONS
from fleetd.testing import build_test_fleet, sample_document

pytest_plugins = ["tests.contract.journal_fixtures"]

PASSES = 12  # six seconds of delivery passes at 0.5 s
ENVIRON = {"T_LEAD": "lead-token", "T_LEAD_B": "lead-b-token", "T_OPERATOR": "op-token"}


def warnings_from_fleetd(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("fleetd") and r.levelno >= logging.WARNING
    ]


def served(journal_url: str, root: Path) -> Fleetd:
    """The service as ``fleetd serve`` builds it, its journal from ``journal.url``."""
    clock = FakeClock()
    document = {**sample_document(root), "journal": {"url": journal_url}}
    loaded = parse_config(document, ENVIRON, base_dir=root)
    return build_service(
        ConfigRef(loaded, environ=ENVIRON, now=clock.now()),
        environ=ENVIRON,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
    )


async def test_an_outage_logs_one_warning_and_one_recovery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """5e: twelve delivery passes a minute apart and a retention pass against a failing journal
    log one WARNING naming the failure (time passing does not repeat it); the first pass that
    reaches it again logs one INFO with the outage's length (and the escalation shell one
    INFO that nothing is owed any more)."""
    caplog.set_level(logging.DEBUG)
    fake = InMemoryJournal()
    fleet = build_test_fleet(tmp_path, journal=fake)
    service = fleet.service
    await service.scheduler.run_once("webhook")
    fake.fail_with = JournalUnavailableError("stats", "unreachable")
    for _ in range(PASSES):
        await service.scheduler.run_once("webhook")
        fleet.clock.advance(60)
    await service.scheduler.run_once("journal-retention")
    assert warnings_from_fleetd(caplog) == [
        "incident journal failing (stats: unreachable): detection goes on, notification "
        "coverage is degraded until it answers"
    ]
    fake.fail_with = None
    caplog.clear()
    for _ in range(3):
        await service.scheduler.run_once("webhook")
    recovered = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert recovered == [
        "incident journal answers again after 24 failed calls in 720 s (last: stats: unreachable)",
        "incident journal records again; every owed incident is recorded",
    ]


async def test_the_journal_series_are_there_from_the_start_and_follow_an_outage(
    tmp_path: Path,
) -> None:
    """5e: ``fleetd_journal_up`` and a latency series for every operation exist before the first
    call; the gauge is 0 during an outage and 1 after."""
    fake = InMemoryJournal()
    service = build_test_fleet(tmp_path, journal=fake).service
    text = service.metrics.exposition().decode()
    assert "fleetd_journal_up 1.0" in text
    for operation in OPERATIONS:
        assert f'fleetd_journal_operation_seconds_count{{operation="{operation}"}} 0.0' in text
    fake.fail_with = JournalUnavailableError("stats", "unreachable")
    await service.scheduler.run_once("webhook")
    text = service.metrics.exposition().decode()
    assert "fleetd_journal_up 0.0" in text
    assert 'fleetd_journal_operation_seconds_count{operation="stats"} 1.0' in text
    fake.fail_with = None
    await service.scheduler.run_once("webhook")
    assert "fleetd_journal_up 1.0" in service.metrics.exposition().decode()


def operation_counts(service: Fleetd) -> dict[str, int]:
    """How many calls of each port operation the service made (its latency series)."""
    text = service.metrics.exposition().decode()
    counts = {
        operation: float(match.group(1))
        for operation in OPERATIONS
        if (
            match := re.search(
                rf'^fleetd_journal_operation_seconds_count\{{operation="{operation}"\}} (\S+)$',
                text,
                re.MULTILINE,
            )
        )
    }
    return {operation: int(count) for operation, count in counts.items() if count}


def newer_revision(url: str) -> None:
    """Stamp a migrated journal with a revision this build does not know (a newer fleetd)."""
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = 'f0e1d2c3'")


@pytest.mark.parametrize("damage", ["newer_revision", "corrupt_file"])
async def test_a_journal_this_build_cannot_use_is_decided_once(
    damage: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """5l: every call fails with the same error, but only the first runs the migration check
    (alembic logs once) and the outage is reported once, however many passes follow."""
    url = f"sqlite:///{tmp_path / 'fleetd-journal.sqlite'}"
    if damage == "newer_revision":
        first = SqlJournal(url)
        await first.load_open()
        await first.close()
        newer_revision(url)
        expected = "migrate: unknown_revision"
    else:
        (tmp_path / "fleetd-journal.sqlite").write_bytes(b"not a database, " * 512)
        expected = "migrate: corrupt"
    caplog.set_level(logging.INFO)
    service = served(url, tmp_path)
    journal = service.health.journal
    watch = service.health.journal_watch
    assert journal is not None
    assert watch is not None
    try:
        await service.scheduler.run_once("webhook")
        after_first = [r.getMessage() for r in caplog.records if r.name.startswith("alembic")]
        for _ in range(PASSES):
            await service.scheduler.run_once("webhook")
        await service.scheduler.run_once("journal-retention")
        alembic = [r.getMessage() for r in caplog.records if r.name.startswith("alembic")]
        assert alembic == after_first
        assert watch.health.reason == expected
        # each delivery pass asks twice (the human leg's sweep, retried while it fails, and the
        # sink worker's stats), the retention pass once: every call failed with the decision
        calls = operation_counts(service)
        assert calls == {"load_open": PASSES + 1, "stats": PASSES + 1, "purge": 1}
        assert watch.health.failures == sum(calls.values())
        assert len(warnings_from_fleetd(caplog)) == 1
    finally:
        await journal.close()


@pytest.mark.postgres
async def test_a_newer_postgres_schema_is_decided_once(
    journal_pg_base: str,
    journal_pg_schema: str,
    journal_pg_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """5l on PostgreSQL: a journal stamped by a newer fleetd is checked once, then refused."""
    first = SqlJournal(journal_pg_url)
    await first.load_open()
    await first.close()
    with psycopg.connect(journal_pg_base, autocommit=True) as db:
        db.execute(f"UPDATE \"{journal_pg_schema}\".alembic_version SET version_num = 'f0e1d2c3'")
    caplog.set_level(logging.INFO)
    journal = SqlJournal(journal_pg_url)
    try:
        for _ in range(5):
            with pytest.raises(JournalSchemaError, match="migrate: unknown_revision"):
                await journal.stats()
        contexts = [r for r in caplog.records if r.getMessage().startswith("Context impl")]
        assert len(contexts) == 1
    finally:
        await journal.close()
