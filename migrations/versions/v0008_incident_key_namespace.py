"""An incident's key is unique within the instance it belongs to.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07

Several instances on one journal each have a herdr link (subject ``herdr``), and may have leads
or profiles of the same name: the open key ``(scope, subject, state, cause)`` made the second
instance's incident a conflict, refused and never recorded — its person never paged.
``incidents.key_instance`` is the instance whose key it is, or ``""`` where the key is the whole
journal's (an instance's liveness, which every instance judges, and every incident recorded
before instances were named); the open key and the key-generation constraint include it. Rows of
another scope than ``instance`` take their owner's name.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_UNRESOLVED = sa.text("resolved_at IS NULL")
_KEY = ["scope", "subject_stable_id", "state", "cause_fingerprint"]


def upgrade() -> None:
    op.drop_index("uq_incidents_open_key", table_name="incidents")
    with op.batch_alter_table("incidents") as batch:
        batch.add_column(
            sa.Column("key_instance", sa.String(length=200), nullable=False, server_default="")
        )
        batch.drop_constraint("uq_incidents_key_generation", type_="unique")
        batch.create_unique_constraint(
            "uq_incidents_key_generation", [*_KEY, "key_instance", "generation"]
        )
    op.execute(
        "UPDATE incidents SET key_instance = instance "
        "WHERE scope <> 'instance' AND instance IS NOT NULL"
    )
    op.create_index(
        "uq_incidents_open_key",
        "incidents",
        [*_KEY, "key_instance"],
        unique=True,
        sqlite_where=_UNRESOLVED,
        postgresql_where=_UNRESOLVED,
    )


def downgrade() -> None:
    op.drop_index("uq_incidents_open_key", table_name="incidents")
    with op.batch_alter_table("incidents") as batch:
        batch.drop_constraint("uq_incidents_key_generation", type_="unique")
        batch.create_unique_constraint("uq_incidents_key_generation", [*_KEY, "generation"])
        batch.drop_column("key_instance")
    op.create_index(
        "uq_incidents_open_key",
        "incidents",
        _KEY,
        unique=True,
        sqlite_where=_UNRESOLVED,
        postgresql_where=_UNRESOLVED,
    )
