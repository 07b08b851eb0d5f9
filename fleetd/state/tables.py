"""The state store's SQLModel tables: ``state_members``, ``state_tickets``, ``state_turns`` and
``state_instances``, in a metadata of their own (not the journal's).

A prompt column holds a prompt only while its ticket is queued; a member row holds its token's
SHA-256 hash, never the token. Every row of the first three carries the ``instance`` that wrote it
and its key is unique within that instance only, so instances sharing one store (hosts on one
PostgreSQL schema) each see only their own rows. Migrations live in ``migrations/state/`` with
their own version table (``state_alembic_version``), so the journal's and the store's revisions
never mix.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import Boolean, Index, Integer, MetaData, String, Text
from sqlmodel import Field, SQLModel

from fleetd.journal.tables import UtcDateTime

__all__ = [
    "STATE_METADATA",
    "VERSION_TABLE",
    "InstanceRow",
    "MemberRow",
    "TicketRow",
    "TurnRow",
]

STATE_METADATA = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)
VERSION_TABLE = "state_alembic_version"

_ID = 64
_CODE = 32
_NAME = 128


class _Table(SQLModel):
    metadata: ClassVar[MetaData] = STATE_METADATA


class MemberRow(_Table, table=True):
    __tablename__ = "state_members"

    instance: str = Field(primary_key=True, sa_type=String(_NAME))
    session_id: str = Field(primary_key=True, sa_type=String(_ID))
    name: str = Field(sa_type=String(_NAME))
    profile: str = Field(sa_type=String(_NAME))
    kind: str = Field(sa_type=String(_CODE))
    role: str | None = Field(default=None, sa_type=Text)
    owner: str = Field(sa_type=String(_NAME))
    created_at: datetime = Field(sa_type=UtcDateTime)
    pane_id: str | None = Field(default=None, sa_type=String(_NAME))
    terminal_id: str | None = Field(default=None, sa_type=String(_NAME))
    token_hash: str = Field(sa_type=String(_ID))
    presence: bool = Field(default=False, sa_type=Boolean)
    turn: int = Field(default=0, sa_type=Integer)
    worktree_repo: str | None = Field(default=None, sa_type=Text)
    worktree_path: str | None = Field(default=None, sa_type=Text)
    worktree_branch: str | None = Field(default=None, sa_type=Text)
    worktree_ref: str | None = Field(default=None, sa_type=Text)
    worktree_base: str | None = Field(default=None, sa_type=String(_ID))
    releasing: str | None = Field(default=None, sa_type=String(_CODE))
    panes_before: str | None = Field(default=None, sa_type=Text)


class TicketRow(_Table, table=True):
    __tablename__ = "state_tickets"
    __table_args__ = (Index("ix_state_tickets_instance", "instance", "seq"),)

    instance: str = Field(primary_key=True, sa_type=String(_NAME))
    ticket_id: str = Field(primary_key=True, sa_type=String(_ID))
    target: str = Field(sa_type=String(_ID), index=True)
    owner: str = Field(sa_type=String(_NAME))
    accepted_at: datetime = Field(sa_type=UtcDateTime)
    seq: int = Field(sa_type=Integer)
    delivery: str = Field(sa_type=String(_CODE))
    prompt: str | None = Field(default=None, sa_type=Text)
    outcome: str = Field(sa_type=String(_CODE))
    source: str | None = Field(default=None, sa_type=String(_CODE))
    content: str | None = Field(default=None, sa_type=Text)
    reason: str | None = Field(default=None, sa_type=String(_ID))
    hint: str | None = Field(default=None, sa_type=Text)
    refusals: int = Field(default=0, sa_type=Integer)
    turn: int | None = Field(default=None, sa_type=Integer)
    delivered_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    resolved_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class TurnRow(_Table, table=True):
    __tablename__ = "state_turns"

    instance: str = Field(primary_key=True, sa_type=String(_NAME))
    session_id: str = Field(primary_key=True, sa_type=String(_ID))
    token_id: str = Field(sa_type=String(_ID))
    ticket_id: str = Field(sa_type=String(_ID))
    turn: int = Field(sa_type=Integer)
    delivered_at: datetime = Field(sa_type=UtcDateTime)


class InstanceRow(_Table, table=True):
    """The process that holds an instance's writer lock (what a refused second start names)."""

    __tablename__ = "state_instances"

    instance: str = Field(primary_key=True, sa_type=String(_NAME))
    pid: int = Field(sa_type=Integer)
    host: str = Field(sa_type=String(_NAME))
    started_at: datetime = Field(sa_type=UtcDateTime)
