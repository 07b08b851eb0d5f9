"""Revisions of the bridge's state store (their own version table: ``state_alembic_version``)."""
