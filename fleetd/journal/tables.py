"""The journal's SQLModel tables: ``incidents``, ``outbound_events``, ``delivery_attempts``, and
``instances`` (one row per fleetd instance sharing the journal, renewed every snapshot interval).

Every column is an id, a stable code, a count, a time or the bounded outbound payload; nothing
here can hold pane text, a prompt, a reply, a path or a secret (``tests/contract`` scans every
column after a scenario full of marker strings). The migrations in ``migrations/`` at the top
of the repository (``fleetd/migrations`` links to it) build exactly this metadata; a test
compares them.

Database rules the adapters rely on:

* ``uq_incidents_open_key``: at most one open incident per ``(scope, subject_stable_id, state,
  cause_fingerprint, key_instance)``; ``uq_incidents_key_generation``: a generation of a key is
  stored once in its namespace. ``key_instance`` is the instance whose key it is (its lead, link,
  profile or member), or ``""`` where the key is the whole journal's (an instance's liveness,
  and every incident recorded before instances were named):
  :func:`~fleetd.journal.values.key_namespace`.
* ``uq_outbound_events_revision`` and the unique ``idempotency_key``: one event per revision.
* ``uq_delivery_attempts_outstanding``: at most one outstanding attempt (``outcome IS NULL``) per
  event; ``lease_token`` fences a lease (see :class:`~fleetd.journal.values.Claim`).
* ``sink_generation`` on a permanently failed attempt names the target that refused it (a keyed
  hash, never the URL), so a config change re-arms exactly the events another target refused.

Indexes make what runs often cost what is open or outstanding, not the history kept
(resolved incidents stay until ``journal.retentionDays``): open incidents and the retention's
oldest resolved ones by ``resolved_at``, the highest generation by ``generation``, pending and
failed events by partial indexes on their state, the last delivery by ``delivered_at``, and due
attempts by ``ix_delivery_attempts_due``.

Times are stored in UTC through :class:`UtcDateTime`, which refuses naive values and gives back
aware ones on SQLite too (SQLite keeps no offset).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from fleetd.journal.values import MAX_TEXT

__all__ = ["METADATA", "AttemptRow", "EventRow", "IncidentRow", "InstanceRow", "UtcDateTime"]

METADATA = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)
"""The journal's own metadata (not SQLModel's process-wide one); every constraint is named, so
SQLite batch migrations can find them."""

_ID = 64
_CODE = 32


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC time on every dialect."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError("naive datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _open_only(column: str) -> dict[str, Any]:
    return _where(f"{column} IS NULL")


def _where(condition: str) -> dict[str, Any]:
    where = text(condition)
    return {"sqlite_where": where, "postgresql_where": where}


class _Table(SQLModel):
    metadata: ClassVar[MetaData] = METADATA


class IncidentRow(_Table, table=True):
    __tablename__ = "incidents"
    __table_args__ = (
        UniqueConstraint(
            "scope",
            "subject_stable_id",
            "state",
            "cause_fingerprint",
            "key_instance",
            "generation",
            name="uq_incidents_key_generation",
        ),
        Index(
            "uq_incidents_open_key",
            "scope",
            "subject_stable_id",
            "state",
            "cause_fingerprint",
            "key_instance",
            unique=True,
            **_open_only("resolved_at"),
        ),
        Index("ix_incidents_resolved_at", "resolved_at"),
        Index("ix_incidents_generation", "generation"),
    )

    id: str = Field(primary_key=True, sa_type=String(_ID))
    scope: str = Field(sa_type=String(_CODE))
    subject_stable_id: str = Field(sa_type=String(MAX_TEXT))
    state: str = Field(sa_type=String(_ID))
    cause_fingerprint: str = Field(sa_type=String(MAX_TEXT))
    generation: int = Field(sa_type=Integer)
    severity: str = Field(sa_type=String(_CODE))
    certainty: str = Field(sa_type=String(_CODE))
    target: str | None = Field(default=None, sa_type=String(MAX_TEXT))
    committed_work_at_risk: bool = Field(default=False, sa_type=Boolean)
    routing_owner: str | None = Field(default=None, sa_type=String(MAX_TEXT))
    routing_recipient: str | None = Field(default=None, sa_type=String(MAX_TEXT))
    routing_reason: str | None = Field(default=None, sa_type=String(MAX_TEXT))
    routing_generation: int = Field(default=0, sa_type=Integer)
    opened_at: datetime = Field(sa_type=UtcDateTime)
    resolved_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    resolve_reason: str | None = Field(default=None, sa_type=String(_CODE))
    updated_at: datetime = Field(sa_type=UtcDateTime)
    instance: str | None = Field(default=None, sa_type=String(MAX_TEXT))
    # the namespace its key is unique in: the instance's own, or "" (the journal's, 0008)
    key_instance: str = Field(default="", sa_type=String(MAX_TEXT))


class EventRow(_Table, table=True):
    __tablename__ = "outbound_events"
    __table_args__ = (
        UniqueConstraint("incident_id", "revision", name="uq_outbound_events_revision"),
        Index("ix_outbound_events_pending", "incident_id", **_where("state = 'pending'")),
        Index("ix_outbound_events_failed", "incident_id", **_where("state = 'failed'")),
        Index("ix_outbound_events_delivered_at", "delivered_at"),
        Index(
            "ix_outbound_events_delivered_reminders",
            "incident_id",
            "revision",
            **_where("event_type = 'reminder' AND state = 'delivered'"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=Integer)
    incident_id: str = Field(
        sa_type=String(_ID),
        sa_column_args=[ForeignKey("incidents.id", name="fk_outbound_events_incident")],
        index=True,
    )
    event_type: str = Field(sa_type=String(_CODE))
    revision: int = Field(sa_type=Integer)
    idempotency_key: str = Field(sa_type=String(_ID), unique=True)
    payload: dict[str, Any] = Field(sa_type=JSON)
    state: str = Field(sa_type=String(_CODE))
    created_at: datetime = Field(sa_type=UtcDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class AttemptRow(_Table, table=True):
    __tablename__ = "delivery_attempts"
    __table_args__ = (
        UniqueConstraint("event_id", "attempt", name="uq_delivery_attempts_number"),
        Index("uq_delivery_attempts_outstanding", "event_id", unique=True, **_open_only("outcome")),
        Index("ix_delivery_attempts_due", "due_at", **_open_only("outcome")),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=Integer)
    event_id: int = Field(
        sa_type=Integer,
        sa_column_args=[ForeignKey("outbound_events.id", name="fk_delivery_attempts_event")],
    )
    attempt: int = Field(sa_type=Integer)
    due_at: datetime = Field(sa_type=UtcDateTime)
    outcome: str | None = Field(default=None, sa_type=String(_CODE))
    failure_class: str | None = Field(default=None, sa_type=String(_ID))
    http_status: int | None = Field(default=None, sa_type=Integer)
    lease_owner: str | None = Field(default=None, sa_type=String(_ID))
    lease_expires_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    lease_token: int = Field(default=0, sa_type=Integer)
    created_at: datetime = Field(sa_type=UtcDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    sink_generation: str | None = Field(default=None, sa_type=String(_CODE))


class InstanceRow(_Table, table=True):
    """One fleetd instance sharing this journal: who it is and its last published summary."""

    __tablename__ = "instances"

    instance: str = Field(primary_key=True, sa_type=String(MAX_TEXT))
    host: str = Field(sa_type=String(MAX_TEXT))
    version: str = Field(sa_type=String(MAX_TEXT))
    started_at: datetime = Field(sa_type=UtcDateTime)
    last_seen: datetime = Field(sa_type=UtcDateTime)
    leads: list[str] = Field(sa_type=JSON)
    coverage: str = Field(sa_type=String(_CODE))
    summary: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    renew_ms: int | None = Field(default=None, sa_type=Integer)  # NULL: written before 0006
    run: str | None = Field(default=None, sa_type=String(_ID))  # NULL: written before 0007
