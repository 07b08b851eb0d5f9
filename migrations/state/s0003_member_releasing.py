"""A member's release and its pane are written ahead: ``state_members.releasing`` holds the cause
of a release under way, so a restart after a crash in the middle of it finishes that release
instead of taking the member back live; ``state_members.panes_before`` holds, for a member stored
before herdr made its pane, the panes herdr already had under its label, so a restart can close a
pane herdr made for it and nothing else.

Revision ID: s0003
Revises: s0002
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "s0003"
down_revision: str | None = "s0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("state_members") as batch:
        batch.add_column(sa.Column("releasing", sa.String(32), nullable=True))
        batch.add_column(sa.Column("panes_before", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("state_members") as batch:
        batch.drop_column("panes_before")
        batch.drop_column("releasing")
