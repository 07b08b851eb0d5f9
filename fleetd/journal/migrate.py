"""Alembic for the journal, driven from code: no ``alembic.ini``.

The migration scripts live in ``migrations/`` at the top of the repository; ``fleetd/migrations``
links to it, so the package carries them and a wheel, an editable install and a fresh clone all
find them beside this module. :func:`alembic_config` builds an in-memory Alembic ``Config`` with
that ``script_location``; ``env.py`` takes the database from ``config.attributes``
(``connection`` or ``url``) and otherwise from fleetd's own config, like ``fleetd serve`` would.
``fleetd migrate`` (:func:`fleetd.cli.migrate_main`) reads the config and calls these; the journal
itself never reads the config.

SQLite migrations run in batch mode (``render_as_batch``) and, like PostgreSQL ones, in one
transaction. A database whose revision this build does not know (written by a newer fleetd) is a
:class:`~fleetd.errors.JournalSchemaError`, never an attempted downgrade.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import JournalSchemaError
from fleetd.journal.engine import translate

__all__ = [
    "MIGRATIONS",
    "alembic_config",
    "check_at_head",
    "current_revision",
    "head_revision",
    "upgrade_engine",
]

MIGRATIONS = (Path(__file__).resolve().parents[1] / "migrations").resolve()
"""The Alembic script directory (``env.py``, ``versions/``)."""


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the journal's scripts; ``url`` is passed to ``env.py`` as is."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    if url is not None:
        config.attributes["url"] = url
    return config


def head_revision() -> str | None:
    """The newest revision this build ships."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None``: no journal schema yet)."""
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as exc:
        raise translate(exc, "migrate") from None


def upgrade_engine(engine: Engine, revision: str = "head") -> str | None:
    """Upgrade the database to ``revision``, in one transaction; returns the revision reached."""
    try:
        with engine.connect() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            connection.commit()
    except CommandError:
        raise JournalSchemaError("migrate", "unknown_revision") from None
    except (SQLAlchemyError, OSError) as exc:
        raise translate(exc, "migrate") from None
    return current_revision(engine)


def check_at_head(engine: Engine) -> None:
    """Raise :class:`JournalSchemaError` unless the database is at this build's head."""
    if current_revision(engine) != head_revision():
        raise JournalSchemaError("open", "schema_not_at_head")
