"""Indexes that make the journal's frequent queries follow the open set, not the history kept.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

Resolved incidents are kept for ``journal.retentionDays``; before this revision the delivery
pass's ``max(delivered_at)``, the reload of pending resolutions and the generations of every key
ever seen each read all of them. These indexes serve those reads (and the retention's deletes).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_PENDING = sa.text("state = 'pending'")
_FAILED = sa.text("state = 'failed'")


def upgrade() -> None:
    op.create_index("ix_incidents_resolved_at", "incidents", ["resolved_at"])
    op.create_index("ix_incidents_generation", "incidents", ["generation"])
    op.create_index(
        "ix_outbound_events_pending",
        "outbound_events",
        ["incident_id"],
        sqlite_where=_PENDING,
        postgresql_where=_PENDING,
    )
    op.create_index(
        "ix_outbound_events_failed",
        "outbound_events",
        ["incident_id"],
        sqlite_where=_FAILED,
        postgresql_where=_FAILED,
    )
    op.create_index("ix_outbound_events_delivered_at", "outbound_events", ["delivered_at"])


def downgrade() -> None:
    op.drop_index("ix_outbound_events_delivered_at", table_name="outbound_events")
    op.drop_index("ix_outbound_events_failed", table_name="outbound_events")
    op.drop_index("ix_outbound_events_pending", table_name="outbound_events")
    op.drop_index("ix_incidents_generation", table_name="incidents")
    op.drop_index("ix_incidents_resolved_at", table_name="incidents")
