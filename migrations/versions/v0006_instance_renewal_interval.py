"""Each instance's row says the interval it renews at.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-07

``instances.renew_ms`` is the snapshot interval the instance renews its row at, in
milliseconds: every other instance judges it down by its own interval, not by the judge's
(hosts at 60 s and at 15 s no longer page each other every minute). A row written before this
revision has none; the judge's own interval stands in for it until its next renewal.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("renew_ms", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("renew_ms")
