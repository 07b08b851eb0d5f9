"""Fixtures of the end-to-end suite."""

from tests.e2e.e2e_fleet import e2e

__all__ = ["e2e"]
