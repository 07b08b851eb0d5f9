"""``FakeModelCatalog``: scripted catalog answers, and a record of every fetch."""

from __future__ import annotations

from datetime import timedelta

from fleetd.catalog.port import CatalogAnswer, CatalogTarget
from fleetd.resilience import Catalog, CatalogEntry, CatalogFetch, ErrorClass

__all__ = ["FakeModelCatalog"]


class FakeModelCatalog:
    """Answers each provider with what the test set (a listing or an error); unknown providers
    are refused."""

    def __init__(self) -> None:
        self.answers: dict[str, CatalogAnswer] = {}
        self.fetched: list[str] = []  # provider names, in fetch order
        self.closed = False

    def lists(self, provider: str, models: dict[str, int | None]) -> None:
        """``provider``'s catalog lists ``models`` (id -> stated context window)."""
        entries = {m: CatalogEntry(id=m, context_window=w) for m, w in models.items()}
        self.answers[provider] = CatalogAnswer(fetch=CatalogFetch(catalog=Catalog(entries=entries)))

    def fails(self, provider: str, error: ErrorClass, retry_after: timedelta | None = None) -> None:
        """``provider``'s catalog fetch fails with ``error``."""
        self.answers[provider] = CatalogAnswer(
            fetch=CatalogFetch(error=error), retry_after=retry_after
        )

    async def fetch(self, target: CatalogTarget, *, limit: timedelta) -> CatalogAnswer:
        self.fetched.append(target.provider)
        return self.answers.get(
            target.provider, CatalogAnswer(fetch=CatalogFetch(error=ErrorClass.REFUSED))
        )

    async def aclose(self) -> None:
        self.closed = True
