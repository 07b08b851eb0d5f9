"""``HttpModelCatalog``: the catalog probe over httpx.

One :meth:`~HttpModelCatalog.fetch` is one ``GET {baseUrl}/models``:

* the whole request is bounded by ``limit`` (``modelHealth.requestTimeoutMs``) on the injected
  :class:`~fleetd.clock.Clock`, with httpx's per-phase timeouts at the same value as a backstop;
  a provider that hangs is a ``timeout``, never a stuck loop;
* the key, when the provider has one, goes as a bearer token; redirects are not followed, the
  environment is not consulted and httpx logs nothing (:mod:`fleetd.http_client`);
* the body is read up to :data:`MAX_BODY_BYTES` and decoded as JSON into a catalog
  (:func:`~fleetd.resilience.parse_catalog`); a larger or unreadable body is ``malformed``;
* a ``Retry-After`` is read by :func:`~fleetd.resilience.parse_retry_after`, the parser the
  webhook uses too (the tracker caps the wait);
* httpx's exceptions and the HTTP status are classified here, once (a refused connect or an
  unknown host ``refused``, any other transport failure ``reset``; statuses by
  :func:`~fleetd.resilience.classify_status`). No text from the provider is kept.
"""

from __future__ import annotations

import json
from datetime import timedelta

import httpx

from fleetd.catalog.port import CatalogAnswer, CatalogTarget
from fleetd.clock import Clock, DeadlineExceededError, within
from fleetd.http_client import outbound_client
from fleetd.resilience import (
    RETRY_AFTER_LIMIT,
    CatalogFetch,
    ErrorClass,
    classify_status,
    parse_catalog,
    parse_retry_after,
    retry_after_delay,
)

__all__ = ["MAX_BODY_BYTES", "USER_AGENT", "HttpModelCatalog"]

MAX_BODY_BYTES = 16 * 1024 * 1024
"""A catalog larger than this is not read (OpenRouter's full list is a few hundred KiB)."""

USER_AGENT = "fleetd-catalog/1"


def _failed(error: ErrorClass, wait: timedelta | None = None) -> CatalogAnswer:
    return CatalogAnswer(fetch=CatalogFetch(error=error), retry_after=wait)


class HttpModelCatalog:
    """:class:`~fleetd.catalog.port.ModelCatalog` over an :class:`httpx.AsyncClient`."""

    def __init__(self, *, clock: Clock, client: httpx.AsyncClient | None = None) -> None:
        self._clock = clock
        self._client = client or outbound_client(USER_AGENT)

    async def fetch(self, target: CatalogTarget, *, limit: timedelta) -> CatalogAnswer:
        seconds = limit.total_seconds()
        if seconds <= 0:
            raise ValueError("the request limit must be positive")
        try:
            return await within(self._clock, self._get(target, seconds), seconds)
        except DeadlineExceededError:
            return _failed(ErrorClass.TIMEOUT)

    async def _get(self, target: CatalogTarget, seconds: float) -> CatalogAnswer:
        headers = {"accept": "application/json"}
        if target.api_key:
            headers["authorization"] = f"Bearer {target.api_key}"
        try:
            async with self._client.stream(
                "GET",
                f"{target.base_url.rstrip('/')}/models",
                headers=headers,
                timeout=httpx.Timeout(seconds),
            ) as response:
                asked = parse_retry_after(response.headers.get("retry-after"))
                wait = None
                if asked is not None:
                    wait = retry_after_delay(asked, self._clock.now(), cap=RETRY_AFTER_LIMIT)
                error = classify_status(response.status_code, retry_after=wait is not None)
                if error is not None:
                    return _failed(error, wait if error is ErrorClass.THROTTLED else None)
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        return _failed(ErrorClass.MALFORMED)
        except httpx.TimeoutException:
            return _failed(ErrorClass.TIMEOUT)
        except httpx.ConnectError:
            return _failed(ErrorClass.REFUSED)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            return _failed(ErrorClass.REJECTED)
        except httpx.HTTPError:  # read, write, protocol: the exchange broke off
            return _failed(ErrorClass.RESET)
        try:
            document = json.loads(bytes(body))
        except ValueError:  # not JSON, or not UTF-8
            return _failed(ErrorClass.MALFORMED)
        catalog = parse_catalog(document)
        if catalog is None:
            return _failed(ErrorClass.MALFORMED)
        return CatalogAnswer(fetch=CatalogFetch(catalog=catalog))

    async def aclose(self) -> None:
        await self._client.aclose()
