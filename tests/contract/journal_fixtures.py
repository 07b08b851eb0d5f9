"""Shared fixtures for the journal suites: the PostgreSQL check, a private schema per test, and
``journal_kit``, which runs a test on the fake, on SQLite and on PostgreSQL.

Test modules load this with ``pytest_plugins = ["tests.contract.journal_fixtures"]``.
PostgreSQL tests need the server on 127.0.0.1:5432 (database ``test``, user ``postgres``, trust
auth); when it is unreachable they fail under ``CI=true`` and skip otherwise, saying so. Each
PostgreSQL test gets its own schema (``search_path`` set in the URL), dropped afterwards, so
concurrent runs never meet.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.port import Journal
from fleetd.journal.sql import SqlJournal

PG_HOST, PG_PORT = "127.0.0.1", 5432
PG_BASE = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test"


def postgres_reachable(host: str = PG_HOST, port: int = PG_PORT) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def require_postgres(reachable: bool) -> str:
    """The local server's URL; fails under ``CI=true`` and skips elsewhere when it is down."""
    if not reachable:
        message = f"PostgreSQL is not reachable on {PG_HOST}:{PG_PORT}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI needs it for the journal tests")
        pytest.skip(f"{message}; start it to run the PostgreSQL journal tests")
    return PG_BASE


@pytest.fixture(scope="session")
def journal_pg_base() -> str:
    """The local server's URL, or a skip (a failure in CI) when it is down."""
    return require_postgres(postgres_reachable())


def schema_url(base: str, schema: str, *options: str) -> str:
    """``base`` with ``search_path`` (and any other ``-c`` settings) set for every connection."""
    settings = " ".join(f"-c{option}" for option in (f"search_path={schema}", *options))
    return f"{base}?options={settings.replace(' ', '%20').replace('=', '%3D')}"


@pytest.fixture
def journal_pg_schema(journal_pg_base: str) -> Iterator[str]:
    """A fresh schema of the test database for one test, dropped afterwards."""
    schema = f"fleetd_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(journal_pg_base, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(journal_pg_base, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def journal_pg_url(journal_pg_base: str, journal_pg_schema: str) -> str:
    """A URL whose connections use the test's own schema."""
    return schema_url(journal_pg_base, journal_pg_schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalKit:
    """One adapter under test. ``build()`` opens another client of the same journal (for the fake:
    the same object, which is all the memory it has); ``url`` is empty for the fake."""

    kind: str
    url: str
    build: Callable[[], Journal]

    async def leases_run_out(self) -> None:
        """Let every lease held now run out by the journal's own clock. The fake and SQLite
        time a lease by the caller's ``now``, which the test moves itself; PostgreSQL times it
        by the database's clock, so its held leases are moved a day back, as if that much of
        its time had passed."""
        if self.kind != "postgres":
            return
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as db:
            await db.execute(
                "UPDATE delivery_attempts SET lease_expires_at ="
                " lease_expires_at - interval '1 day' WHERE lease_expires_at IS NOT NULL"
            )


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def journal_kit(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JournalKit]:
    """Every test that takes this runs on the fake, on SQLite and on PostgreSQL."""
    journals: list[Journal] = []
    memory = InMemoryJournal()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    elif request.param == "postgres":
        url = request.getfixturevalue("journal_pg_url")
    else:
        url = ""

    def build() -> Journal:
        journals.append(memory if not url else SqlJournal(url))
        return journals[-1]

    try:
        yield JournalKit(kind=request.param, url=url, build=build)
    finally:
        for journal in journals:
            await journal.close()
