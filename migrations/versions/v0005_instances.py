"""Several fleetd instances on one journal: the ``instances`` table and each incident's owner.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05

Each fleetd sharing a PostgreSQL journal renews its row in ``instances`` every snapshot interval
(name, host, version, start, last renewal, leads, coverage, its last published fleet summary);
one that stops renewing is ``INSTANCE_DOWN``. ``incidents.instance`` names the instance that
opened an incident, so a restart resumes only its own (a row from before is everyone's).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("instance", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=200), nullable=False),
        sa.Column("started_at", _TIME, nullable=False),
        sa.Column("last_seen", _TIME, nullable=False),
        sa.Column("leads", sa.JSON(), nullable=False),
        sa.Column("coverage", sa.String(length=32), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("instance", name="pk_instances"),
    )
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(sa.Column("instance", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("incidents") as batch:
        batch.drop_column("instance")
    op.drop_table("instances")
