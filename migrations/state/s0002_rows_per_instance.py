"""Rows per instance: members, tickets and open turns carry the instance that wrote them.

Hosts that share one state store (one PostgreSQL schema) each load, write and delete only their
own rows; a key (a session or ticket id) is unique within its instance only. Rows stored before
this revision belong to the instance recorded in ``state_instances`` as the store's holder (the
most recently started one if several are recorded; an empty name if none ever held it).

Revision ID: s0002
Revises: s0001
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0002"
down_revision: str | None = "s0001"
branch_labels: str | None = None
depends_on: str | None = None

_TABLES = (
    ("state_members", "session_id"),
    ("state_tickets", "ticket_id"),
    ("state_turns", "session_id"),
)


def _recorded_instance() -> str:
    row = (
        op.get_bind()
        .execute(sa.text("SELECT instance FROM state_instances ORDER BY started_at DESC, instance"))
        .first()
    )
    return str(row[0]) if row is not None else ""


def upgrade() -> None:
    instance = _recorded_instance()
    for table, key in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("instance", sa.String(128), nullable=False, server_default="")
            )
        op.get_bind().execute(
            sa.text(f"UPDATE {table} SET instance = :instance"),  # noqa: S608 (a fixed name)
            {"instance": instance},
        )
        with op.batch_alter_table(table) as batch:
            batch.alter_column("instance", server_default=None)
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", ["instance", key])
    op.drop_index("ix_state_tickets_seq", table_name="state_tickets")
    op.create_index("ix_state_tickets_instance", "state_tickets", ["instance", "seq"])


def downgrade() -> None:
    op.drop_index("ix_state_tickets_instance", table_name="state_tickets")
    op.create_index("ix_state_tickets_seq", "state_tickets", ["seq"])
    for table, key in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"pk_{table}", type_="primary")
            batch.create_primary_key(f"pk_{table}", [key])
            batch.drop_column("instance")
