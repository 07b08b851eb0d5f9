"""An index over delivered reminders, for the purge pass that keeps only each incident's last.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05

A sink that forgets alerts (Alertmanager) gets a ``reminder`` of every open incident every
minute; the purge pass deletes the delivered ones a later delivered reminder supersedes. This
partial index holds just those rows, so the pass reads what it may delete, not the history.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

_DELIVERED_REMINDER = sa.text("event_type = 'reminder' AND state = 'delivered'")


def upgrade() -> None:
    op.create_index(
        "ix_outbound_events_delivered_reminders",
        "outbound_events",
        ["incident_id", "revision"],
        sqlite_where=_DELIVERED_REMINDER,
        postgresql_where=_DELIVERED_REMINDER,
    )


def downgrade() -> None:
    op.drop_index("ix_outbound_events_delivered_reminders", table_name="outbound_events")
