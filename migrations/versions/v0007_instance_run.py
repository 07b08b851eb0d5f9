"""Each instance's row names the run of the process that renews it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07

``instances.run`` is the run id of the fleetd process that last renewed the row. A process that
finds its row renewed by another run since its own last renewal shares its instance name with
another live fleetd (two configs naming one instance, each with its own state store): the one
that started later stops, so one process serves a name. A row written before this revision has
none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("run", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("run")
