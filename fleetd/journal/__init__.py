"""The incident journal: open incidents, routing, outbound events and their delivery attempts.

M4 §10.3: an owner-only journal beside the active config (or a PostgreSQL database) keeps open
incidents, routing, delivered revisions, retry state and resolutions, so a restart neither loses
an incident nor sends a person the same event twice. It stores no pane text, prompt, reply, path
or secret: only ids, stable codes, counts, times and the outbound payload, which
:func:`fleetd.journal.values.check_payload` bounds before anything is written.

Modules: ``records`` (values, enums, the idempotency key, the payload bound; pure), ``port`` (the
``Journal`` protocol), ``memory`` and ``memory_rows`` (``InMemoryJournal``, the fake), ``tables``
(SQLModel tables), ``rows`` (stored rows read back into the values), ``engine`` (engines for SQLite
and PostgreSQL, error translation), ``store`` and ``queries`` (the SQL operations), ``deadline``
(every operation's deadline, and cutting a stuck connection), ``sql`` (``SqlJournal``), ``health``
(``JournalHealth``, ``JournalWatch``: outage reports and metrics), ``retention`` (deleting
resolved history past ``journal.retentionDays``) and ``migrate`` (Alembic, ``fleetd migrate``).
This package module imports nothing on purpose, so the records and the fake load without
SQLAlchemy.
"""
