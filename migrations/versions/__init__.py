"""The journal's schema revisions, oldest first (``down_revision`` chains them)."""
