"""The Alembic migrations build exactly the journal's metadata, on SQLite and PostgreSQL, and
``fleetd migrate`` applies them to the configured journal."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import setuptools  # type: ignore[import-untyped]  # no types-setuptools in the test extras
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Engine, Integer, MetaData, inspect, text

from fleetd.cli import migrate_main
from fleetd.journal.engine import journal_engine
from fleetd.journal.migrate import (
    MIGRATIONS,
    alembic_config,
    current_revision,
    head_revision,
    upgrade_engine,
)
from fleetd.journal.tables import METADATA

pytest_plugins = ["tests.contract.journal_fixtures"]

REPO = Path(__file__).resolve().parents[2]
TABLES = {"incidents", "outbound_events", "delivery_attempts"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on an empty database of each kind."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("journal_pg_url")
    engine = journal_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def differences(engine: Engine, metadata: MetaData) -> list[object]:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))


def test_upgrading_an_empty_database_gives_exactly_the_metadata(empty_engine: Engine) -> None:
    """Autogenerate finds nothing to add, drop or change after ``upgrade head``."""
    assert current_revision(empty_engine) is None
    assert upgrade_engine(empty_engine) == head_revision()
    assert differences(empty_engine, METADATA) == []


def test_the_comparison_sees_a_difference(empty_engine: Engine) -> None:
    """The check above can fail: a column the migrations lack is reported."""
    upgrade_engine(empty_engine)
    changed = MetaData()
    for table in METADATA.sorted_tables:
        table.to_metadata(changed)
    changed.tables["incidents"].append_column(Column("extra", Integer, nullable=True))
    assert [d[0] for d in differences(empty_engine, changed) if isinstance(d, tuple)] == [
        "add_column"
    ]


def test_downgrade_to_base_and_back(empty_engine: Engine) -> None:
    """Every revision can be undone; upgrading again restores the tables."""
    upgrade_engine(empty_engine)
    with empty_engine.connect() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
        connection.commit()
    assert TABLES.isdisjoint(inspect(empty_engine).get_table_names())
    upgrade_engine(empty_engine)
    assert set(inspect(empty_engine).get_table_names()) >= TABLES


HISTORY_INDEXES = {
    "incidents": {"ix_incidents_resolved_at", "ix_incidents_generation"},
    "outbound_events": {
        "ix_outbound_events_pending",
        "ix_outbound_events_failed",
        "ix_outbound_events_delivered_at",
    },
}


def _index_names(engine: Engine, table: str) -> set[str]:
    return {str(index["name"]) for index in inspect(engine).get_indexes(table)}


def test_0003_adds_the_history_indexes_to_a_journal_in_use(empty_engine: Engine) -> None:
    """7b: a journal at 0002 holding rows upgrades to the head: the rows stay, the indexes that
    keep frequent queries off the history exist, and a downgrade to 0002 drops only them."""
    upgrade_engine(empty_engine, "0002")
    with empty_engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO incidents (id, scope, subject_stable_id, state, cause_fingerprint, "
                "generation, severity, certainty, committed_work_at_risk, routing_generation, "
                "opened_at, resolved_at, updated_at) VALUES ('inc_1', 'member', 'sess_1', "
                "'GONE', 'gone', 1, 'critical', 'confirmed', false, 0, :at, :at, :at)"
            ),
            {"at": "2026-08-01 12:00:00"},
        )
    assert upgrade_engine(empty_engine) == head_revision()
    for table, names in HISTORY_INDEXES.items():
        assert names <= _index_names(empty_engine, table), table
    with empty_engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM incidents")).scalar() == 1
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0002")
        connection.commit()
    for table, names in HISTORY_INDEXES.items():
        assert names.isdisjoint(_index_names(empty_engine, table)), table


def test_env_reads_fleetd_config_when_given_no_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a URL, ``env.py`` migrates the journal the config file names (here: the default
    SQLite file beside it), as plain ``alembic`` tooling would."""
    config_file = tmp_path / "fleetd.yaml"
    config_file.write_text("api:\n  port: 8765\n")
    monkeypatch.setenv("FLEETD_CONFIG", str(config_file))
    command.upgrade(alembic_config(), "head")
    engine = journal_engine(f"sqlite:///{tmp_path / 'fleetd-journal.sqlite'}")
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_migrate_command_upgrades_then_checks(tmp_path: Path) -> None:
    """``fleetd migrate --check`` exits 1 before and 0 after ``fleetd migrate``; the journal file
    is created beside the config, owner-only."""
    config_file = tmp_path / "fleetd.yaml"
    config_file.write_text("journal:\n  url: null\n")
    argv = ["--config", str(config_file)]
    assert migrate_main([*argv, "--check"], environ={}) == 1
    result = subprocess.run(
        [sys.executable, "-m", "fleetd", "migrate", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"revision: {head_revision()} (head {head_revision()})" in result.stdout
    journal_file = tmp_path / "fleetd-journal.sqlite"
    assert journal_file.stat().st_mode & 0o777 == 0o600
    assert migrate_main([*argv, "--check"], environ={}) == 0


def test_migrate_command_masks_the_url_and_reports_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A database that is down exits 1 with a bounded reason; a bad config exits 2."""
    environ = {"JOURNAL_URL": "postgresql://fleetd:hunter2@127.0.0.1:9/fleetd"}
    config = Path(__file__).parent / "no-such-config.yaml"
    assert migrate_main(["--config", str(config)], environ=environ) == 2
    assert migrate_main([], environ={**environ, "FLEETD_JOURNAL__URL_ENV": "JOURNAL_URL"}) == 1
    err = capsys.readouterr().err
    assert "journal error: migrate: unreachable" in err
    assert "hunter2" not in err


def test_the_migrations_ship_with_the_package() -> None:
    """The scripts live in ``migrations/`` at the top of the repository and are package modules of
    ``fleetd`` through the ``fleetd/migrations`` link (so a wheel, an editable install and a clone
    all have them)."""
    assert (MIGRATIONS / "env.py").is_file()
    assert list((MIGRATIONS / "versions").glob("v0001_*.py"))
    assert (REPO / "migrations").resolve() == MIGRATIONS
    assert not (REPO / "migrations").is_symlink()
    assert (REPO / "fleetd" / "migrations").resolve() == MIGRATIONS
    found = setuptools.find_packages(str(REPO), include=["fleetd*"])
    assert {"fleetd.migrations", "fleetd.migrations.versions"} <= set(found)
    assert "migrations/script.py.mako" in (REPO / "pyproject.toml").read_text()


_OPEN_AT_ONCE = """\
import asyncio, sys, time
from datetime import timedelta
from fleetd.journal.sql import SqlJournal
from fleetd.state.sql import SqlStateStore

url, start_at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, start_at - time.time()))
SqlStateStore(url, deadline=lambda: timedelta(seconds=20), instance="a").close()
journal = SqlJournal(url)
asyncio.run(journal.load_open())
asyncio.run(journal.close())
print("opened")
"""


@pytest.mark.postgres
def test_fleetd_processes_opening_a_fresh_postgresql_schema_at_once_all_migrate_it(
    journal_pg_url: str,
) -> None:
    """Several fleetd starting together on one fresh PostgreSQL schema (hosts of one fleet, a
    standby beside its active one) each open the state store and the journal, which migrates
    them: every one succeeds — the migrations run one after another, the later ones finding the
    head — where concurrent ``CREATE TABLE`` used to fail all but one with ``open: conflict``."""
    start_at = time.time() + 4  # every process has imported fleetd by then
    opening = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_AT_ONCE, journal_pg_url, str(start_at)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(6)
    ]
    outputs = [process.communicate(timeout=60)[0].decode() for process in opening]
    assert [process.returncode for process in opening] == [0] * 6, outputs
    assert all(output.strip().endswith("opened") for output in outputs), outputs
