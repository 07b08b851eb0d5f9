"""Fixtures of the end-to-end suite."""

from e2e_fleet import e2e

__all__ = ["e2e"]
