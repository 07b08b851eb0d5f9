"""The state store on SQLite (the default, beside the config) or PostgreSQL, by URL.

The engine is the journal's (:func:`~fleetd.journal.engine.journal_engine`): an SQLite file is
created owner-only (``0600``) in WAL mode and every transaction begins ``IMMEDIATE``; PostgreSQL
goes through psycopg 3. Unlike the journal, an SQLite store commits with ``synchronous=NORMAL``:
in WAL mode a commit then survives a killed process (what the store is for), and only a power cut
may lose the last commits. Every transaction is bounded by ``state.operationTimeoutMs``
(:func:`~fleetd.journal.deadline.bound_operations`: ``busy_timeout`` on SQLite,
``statement_timeout``/``lock_timeout`` on PostgreSQL, a connect timeout).

Opening migrates the store to this build's head (its own revisions in ``migrations/state/``); a
store written by a newer build, or a file that is not a database, is refused with
:class:`~fleetd.errors.StateStoreError` naming why.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from sqlalchemy import Engine, delete, event, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from fleetd.errors import FleetdError, JournalError, StateStoreError
from fleetd.journal.deadline import bound_operations
from fleetd.journal.engine import journal_engine, translate
from fleetd.journal.migrate import MIGRATIONS
from fleetd.state.port import Change
from fleetd.state.records import (
    DeliveryState,
    MemberRecord,
    Snapshot,
    TicketRecord,
    TurnRecord,
)
from fleetd.state.tables import MemberRow, TicketRow, TurnRow

__all__ = ["SqlStateStore", "state_alembic_config", "state_engine"]

_MEMBERS = MemberRow.__table__  # type: ignore[attr-defined]
_TICKETS = TicketRow.__table__  # type: ignore[attr-defined]
_TURNS = TurnRow.__table__  # type: ignore[attr-defined]


def _error(exc: BaseException, operation: str) -> StateStoreError:
    if isinstance(exc, StateStoreError):
        return exc
    translated = translate(exc, operation)
    return StateStoreError(operation, translated.reason)


def state_alembic_config() -> Config:
    """An Alembic config for the state store's revisions (``migrations/state``)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", str(MIGRATIONS / "state").replace("%", "%%"))
    config.attributes["store"] = "state"
    return config


def state_engine(url: str, deadline: Callable[[], timedelta]) -> Engine:
    """An engine for the store at ``url``, its transactions bounded by ``deadline()``."""
    try:
        engine = journal_engine(url)
    except JournalError as exc:
        raise StateStoreError("open", exc.reason) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_normal_sync)
    bound_operations(engine, deadline)
    return engine


def _sqlite_normal_sync(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


class SqlStateStore:
    """The :class:`~fleetd.state.port.StateStore` on a database."""

    def __init__(self, url: str, *, deadline: Callable[[], timedelta]) -> None:
        self._engine = state_engine(url, deadline)
        self._closed = False
        self._migrate()

    @property
    def engine(self) -> Engine:
        return self._engine

    def _migrate(self) -> None:
        try:
            with self._engine.connect() as connection:
                config = state_alembic_config()
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
        except CommandError:
            self._engine.dispose()
            raise StateStoreError("open", "newer_schema") from None
        except (SQLAlchemyError, OSError, FleetdError) as exc:
            self._engine.dispose()
            raise _error(exc, "open") from None

    def load(self) -> Snapshot:
        self._check()
        try:
            with self._engine.connect() as connection:
                members = connection.execute(select(_MEMBERS)).mappings().all()
                tickets = (
                    connection.execute(select(_TICKETS).order_by(_TICKETS.c.seq)).mappings().all()
                )
                turns = connection.execute(select(_TURNS)).mappings().all()
                connection.rollback()
        except SQLAlchemyError as exc:
            raise _error(exc, "load") from None
        return Snapshot(
            members=tuple(MemberRecord(**dict(row)) for row in members),
            tickets=tuple(
                TicketRecord(**{**dict(row), "delivery": DeliveryState(row["delivery"])})
                for row in tickets
            ),
            turns=tuple(TurnRecord(**dict(row)) for row in turns),
        )

    def apply(self, change: Change) -> None:
        self._check()
        if not change:
            return
        try:
            with self._engine.begin() as connection:
                if change.drop_members:
                    connection.execute(
                        delete(_MEMBERS).where(_MEMBERS.c.session_id.in_(change.drop_members))
                    )
                if change.drop_tickets:
                    connection.execute(
                        delete(_TICKETS).where(_TICKETS.c.ticket_id.in_(change.drop_tickets))
                    )
                if change.drop_turns:
                    connection.execute(
                        delete(_TURNS).where(_TURNS.c.session_id.in_(change.drop_turns))
                    )
                for table, key, records in (
                    (_MEMBERS, "session_id", change.members),
                    (_TICKETS, "ticket_id", change.tickets),
                    (_TURNS, "session_id", change.turns),
                ):
                    if records:
                        connection.execute(self._upsert(table, key), [_row(r) for r in records])
        except SQLAlchemyError as exc:
            raise _error(exc, "write") from None

    def _upsert(self, table: Any, key: str) -> Any:
        """``INSERT ... ON CONFLICT (key) DO UPDATE``: a put replaces by key in one statement."""
        insert_into = sqlite_insert if self._engine.dialect.name == "sqlite" else pg_insert
        statement = insert_into(table)
        columns = {c.name: statement.excluded[c.name] for c in table.columns if c.name != key}
        return statement.on_conflict_do_update(index_elements=[key], set_=columns)

    def discard(self) -> None:
        self._check()
        try:
            with self._engine.begin() as connection:
                for table in (_TURNS, _TICKETS, _MEMBERS):
                    connection.execute(delete(table))
        except SQLAlchemyError as exc:
            raise _error(exc, "discard") from None

    def close(self) -> None:
        self._closed = True
        self._engine.dispose()

    def _check(self) -> None:
        if self._closed:
            raise StateStoreError("call", "closed")


def _row(record: MemberRecord | TicketRecord | TurnRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__}
