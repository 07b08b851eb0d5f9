"""Alembic for the journal, driven from code: no ``alembic.ini``, and ``fleetd migrate``.

The migration scripts live in ``migrations/`` at the top of the repository; ``fleetd/migrations``
links to it, so the package carries them and a wheel, an editable install and a fresh clone all
find them beside this module. :func:`alembic_config` builds an in-memory Alembic ``Config`` with
that ``script_location``; ``env.py`` takes the database from ``config.attributes``
(``connection`` or ``url``) and otherwise from fleetd's own config, like ``fleetd serve`` would:
the file named by ``FLEETD_CONFIG`` (or none) with ``FLEETD_*`` overrides, and ``journal.url`` /
``journal.urlEnv``.

SQLite migrations run in batch mode (``render_as_batch``) and, like PostgreSQL ones, in one
transaction. A database whose revision this build does not know (written by a newer fleetd) is a
:class:`~fleetd.errors.JournalSchemaError`, never an attempted downgrade.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import ConfigError, JournalError, JournalSchemaError
from fleetd.journal.engine import journal_engine, translate

__all__ = [
    "MIGRATIONS",
    "alembic_config",
    "check_at_head",
    "configured_url",
    "current_revision",
    "head_revision",
    "migrate_main",
    "upgrade_engine",
]

MIGRATIONS = (Path(__file__).resolve().parents[1] / "migrations").resolve()
"""The Alembic script directory (``env.py``, ``versions/``)."""

CONFIG_ENV = "FLEETD_CONFIG"
"""Environment variable naming the config file ``env.py`` reads when given no database."""


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for the journal's scripts; ``url`` is passed to ``env.py`` as is."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    if url is not None:
        config.attributes["url"] = url
    return config


def configured_url(environ: Mapping[str, str]) -> str:
    """The journal URL fleetd's config gives (``FLEETD_CONFIG`` names the file, if any)."""
    from fleetd.config import load_config  # noqa: PLC0415 - only env.py without a URL needs it

    path = environ.get(CONFIG_ENV)
    loaded = load_config(Path(path) if path else None, environ)
    return loaded.config.journal.url.get_secret_value()


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


def migrate_main(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``fleetd migrate [--config PATH] [--check]``: 0 done, 1 journal error or behind, 2 config.

    Without ``--check`` it upgrades the configured journal to this build's head; with it, it only
    reports and exits 1 when the database is not at the head. The URL prints with its password
    masked.
    """
    from fleetd.config import load_config  # noqa: PLC0415
    from fleetd.config.fields import mask_url  # noqa: PLC0415

    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    env = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog="fleetd migrate", description="Bring the incident journal to this build's schema."
    )
    parser.add_argument("--config", type=Path, default=None, help="config YAML (default: none)")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if behind")
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        url = load_config(args.config, env).config.journal.url.get_secret_value()
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=err)
        return 2
    try:
        engine = journal_engine(url)
        try:
            head = head_revision()
            reached = current_revision(engine) if args.check else upgrade_engine(engine)
        finally:
            engine.dispose()
    except JournalError as exc:
        print(f"journal error: {exc}", file=err)
        return 1
    print(f"journal: {mask_url(url)}", file=out)
    print(f"revision: {reached or 'none'} (head {head})", file=out)
    return 0 if reached == head else 1
