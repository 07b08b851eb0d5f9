"""The bridge's state store: members, tickets, open turns and the instance holder.

Revision ID: s0001
Revises:
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from fleetd.journal.tables import UtcDateTime

revision = "s0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "state_members",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("profile", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("role", sa.Text(), nullable=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("pane_id", sa.String(128), nullable=True),
        sa.Column("terminal_id", sa.String(128), nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("presence", sa.Boolean(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("worktree_repo", sa.Text(), nullable=True),
        sa.Column("worktree_path", sa.Text(), nullable=True),
        sa.Column("worktree_branch", sa.Text(), nullable=True),
        sa.Column("worktree_ref", sa.Text(), nullable=True),
        sa.Column("worktree_base", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("session_id", name="pk_state_members"),
    )
    op.create_table(
        "state_tickets",
        sa.Column("ticket_id", sa.String(64), nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("accepted_at", UtcDateTime(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("delivery", sa.String(32), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("source", sa.String(32), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("reason", sa.String(64), nullable=True),
        sa.Column("hint", sa.Text(), nullable=True),
        sa.Column("refusals", sa.Integer(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=True),
        sa.Column("delivered_at", UtcDateTime(), nullable=True),
        sa.Column("resolved_at", UtcDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("ticket_id", name="pk_state_tickets"),
    )
    op.create_index("ix_state_tickets_target", "state_tickets", ["target"])
    op.create_index("ix_state_tickets_seq", "state_tickets", ["seq"])
    op.create_table(
        "state_turns",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("token_id", sa.String(64), nullable=False),
        sa.Column("ticket_id", sa.String(64), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("delivered_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_state_turns"),
    )
    op.create_table(
        "state_instances",
        sa.Column("instance", sa.String(128), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(128), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("instance", name="pk_state_instances"),
    )


def downgrade() -> None:
    op.drop_table("state_instances")
    op.drop_table("state_turns")
    op.drop_index("ix_state_tickets_seq", table_name="state_tickets")
    op.drop_index("ix_state_tickets_target", table_name="state_tickets")
    op.drop_table("state_tickets")
    op.drop_table("state_members")
