"""Alembic environment of the incident journal and the state store; no ``alembic.ini``.

``config.attributes["store"] == "state"`` migrates the bridge's state store: its revisions are in
``state/`` and its version table is ``state_alembic_version``, so each store migrates only its
own tables. Anything else is the journal (``versions/``, ``alembic_version``).

The database comes from ``config.attributes``: an open ``connection`` (what fleetd passes), else a
``url``, else fleetd's own config (``FLEETD_CONFIG`` names the file, if any). The engine is
the journal's own (owner-only SQLite file, WAL, ``BEGIN IMMEDIATE``). SQLite runs in batch mode;
every dialect runs the whole upgrade in one transaction. On PostgreSQL that transaction first
takes an advisory lock of its store and schema, so fleetd processes starting at once on a fresh
database (several hosts, a standby) migrate one after another instead of racing on the same
``CREATE TABLE`` (the loser failed with a unique violation); the later ones find the head.
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import context
from sqlalchemy import Connection, text

from fleetd.config import load_config
from fleetd.journal.engine import journal_engine
from fleetd.journal.tables import METADATA
from fleetd.state.tables import STATE_METADATA, VERSION_TABLE

config = context.config
_STATE = config.attributes.get("store") == "state"
_METADATA = STATE_METADATA if _STATE else METADATA
_VERSION_TABLE = VERSION_TABLE if _STATE else "alembic_version"
# Two 32-bit keys: a key space apart from the one-bigint keys of the state store's writer locks.
_MIGRATION_LOCK = text(
    "SELECT pg_advisory_xact_lock(hashtext('fleetd-migrations'), "
    "hashtext(current_schema() || ':' || :store))"
)


def _url() -> str:
    """The database given in ``config.attributes``, else the journal URL of fleetd's own config:
    the file ``FLEETD_CONFIG`` names (or none) with the ``FLEETD_*`` overrides."""
    url = config.attributes.get("url")
    if isinstance(url, str):
        return url
    path = os.environ.get("FLEETD_CONFIG")
    loaded = load_config(Path(path) if path else None, os.environ)
    return loaded.config.journal.url.get_secret_value()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=_METADATA,
        version_table=_VERSION_TABLE,
        render_as_batch=True,
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":  # held until this transaction ends
            connection.execute(_MIGRATION_LOCK, {"store": _VERSION_TABLE})
        context.run_migrations()


def _online() -> None:
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given)
        return
    engine = journal_engine(_url())
    try:
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    finally:
        engine.dispose()


def _offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=_METADATA,
        version_table=_VERSION_TABLE,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _offline()
else:
    _online()
