"""Alembic scripts of the incident journal (run by :mod:`fleetd.journal.migrate`, never imported).

``env.py`` is Alembic's environment; ``versions/`` holds one module per schema revision, named
``vNNNN_<what>.py``. Add a revision with the tables changed in :mod:`fleetd.journal.tables`, then
check it with ``tests/integration/test_journal_migrations.py`` (upgrade an empty database and
compare it with the metadata on SQLite and PostgreSQL).
"""
