"""Ending the PostgreSQL session that holds a fleetd instance's writer lock, for the tests of
what a holder does when its lock goes with its connection."""

from __future__ import annotations

import psycopg

from fleetd.state.lock import lock_key


def end_lock_session(base: str, instance: str, schema: str) -> None:
    """End the PostgreSQL session holding ``instance``'s writer lock in the store of ``schema``,
    as a database restart or an idle-session kill would: the lock goes with it and nobody tells
    its holder. Returns once that session has ended (its lock let go)."""
    key = lock_key(instance, schema) & 0xFFFF_FFFF_FFFF_FFFF  # pg_locks shows it unsigned
    with psycopg.connect(base, autocommit=True) as db:
        row = db.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1",
            (key >> 32, key & 0xFFFF_FFFF),
        ).fetchone()
        assert row is not None, "nobody holds the lock"
        db.execute("SELECT pg_terminate_backend(%s, 5000)", (row[0],))  # waits for its end
