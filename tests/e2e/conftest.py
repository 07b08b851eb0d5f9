"""Fixtures of the end-to-end suite."""

from tests.e2e.e2e_fleet import e2e
from tests.e2e.page_fleet import browser_page, page_fleet, shared_page_fleet

__all__ = ["browser_page", "e2e", "page_fleet", "shared_page_fleet"]
