"""The journal's tables: incidents, outbound events, delivery attempts.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime(timezone=True)


_UNRESOLVED = sa.text("resolved_at IS NULL")
_OUTSTANDING = sa.text("outcome IS NULL")


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("subject_stable_id", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=64), nullable=False),
        sa.Column("cause_fingerprint", sa.String(length=200), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("severity", sa.String(length=32), nullable=False),
        sa.Column("certainty", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=True),
        sa.Column("committed_work_at_risk", sa.Boolean(), nullable=False),
        sa.Column("routing_owner", sa.String(length=200), nullable=True),
        sa.Column("routing_recipient", sa.String(length=200), nullable=True),
        sa.Column("routing_reason", sa.String(length=200), nullable=True),
        sa.Column("routing_generation", sa.Integer(), nullable=False),
        sa.Column("opened_at", _TIME, nullable=False),
        sa.Column("resolved_at", _TIME, nullable=True),
        sa.Column("resolve_reason", sa.String(length=32), nullable=True),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_incidents"),
        sa.UniqueConstraint(
            "scope",
            "subject_stable_id",
            "state",
            "cause_fingerprint",
            "generation",
            name="uq_incidents_key_generation",
        ),
    )
    op.create_index(
        "uq_incidents_open_key",
        "incidents",
        ["scope", "subject_stable_id", "state", "cause_fingerprint"],
        unique=True,
        sqlite_where=_UNRESOLVED,
        postgresql_where=_UNRESOLVED,
    )
    op.create_table(
        "outbound_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.String(length=64), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("delivered_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"], ["incidents.id"], name="fk_outbound_events_incident"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_outbound_events"),
        sa.UniqueConstraint("idempotency_key", name="uq_outbound_events_idempotency_key"),
        sa.UniqueConstraint("incident_id", "revision", name="uq_outbound_events_revision"),
    )
    op.create_index("ix_outbound_events_incident_id", "outbound_events", ["incident_id"])
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("due_at", _TIME, nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("failure_class", sa.String(length=64), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", _TIME, nullable=True),
        sa.Column("lease_token", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("finished_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["event_id"], ["outbound_events.id"], name="fk_delivery_attempts_event"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_delivery_attempts"),
        sa.UniqueConstraint("event_id", "attempt", name="uq_delivery_attempts_number"),
    )
    op.create_index(
        "ix_delivery_attempts_due",
        "delivery_attempts",
        ["due_at"],
        sqlite_where=_OUTSTANDING,
        postgresql_where=_OUTSTANDING,
    )
    op.create_index(
        "uq_delivery_attempts_outstanding",
        "delivery_attempts",
        ["event_id"],
        unique=True,
        sqlite_where=_OUTSTANDING,
        postgresql_where=_OUTSTANDING,
    )


def downgrade() -> None:
    op.drop_table("delivery_attempts")
    op.drop_table("outbound_events")
    op.drop_table("incidents")
