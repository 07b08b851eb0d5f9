"""The ``ModelCatalog`` port: read one provider's model catalog, once, within a limit.

One call is one ``GET {baseUrl}/models`` — free, read-only, never a completion request. The answer
is a value: a parsed :class:`~fleetd.resilience.Catalog`, or the
:class:`~fleetd.resilience.ErrorClass` of the failure (a transport error, a timeout, an HTTP status
other than 2xx, a body that is not a catalog), with the server's Retry-After when it throttled.
Nothing a provider sends can raise into fleetd or reach a log: adapters keep no body text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from fleetd.resilience import CatalogFetch

__all__ = ["CatalogAnswer", "CatalogTarget", "ModelCatalog"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogTarget:
    """Where one provider's catalog is, and the key to read it with (never logged)."""

    provider: str
    base_url: str
    api_key: str | None = None

    def __repr__(self) -> str:  # the key stays out of every repr
        return f"CatalogTarget(provider={self.provider!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogAnswer:
    """How one fetch ended, and the Retry-After a throttling provider asked for."""

    fetch: CatalogFetch
    retry_after: timedelta | None = None


class ModelCatalog(Protocol):
    """Reads provider catalogs."""

    async def fetch(self, target: CatalogTarget, *, limit: timedelta) -> CatalogAnswer:
        """``GET {target.base_url}/models`` once within ``limit``; an answer, never an error."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
