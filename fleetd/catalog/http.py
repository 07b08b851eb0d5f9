"""``HttpModelCatalog``: the catalog probe over httpx.

One :meth:`~HttpModelCatalog.fetch` is one ``GET {baseUrl}/models``:

* the whole request is bounded by ``limit`` (``modelHealth.requestTimeoutMs``) on the injected
  :class:`~fleetd.clock.Clock`, with httpx's per-phase timeouts at the same value as a backstop;
  a provider that hangs is a ``timeout``, never a stuck loop;
* the key, when the provider has one, goes as a bearer token; redirects are not followed, the
  environment is not consulted and httpx logs nothing (:mod:`fleetd.http_client`);
* the body is streamed and read up to :data:`MAX_BODY_BYTES` (8 MiB, a compiled brake): a
  ``Content-Length`` past it, or a body that grows past it, stops the read at once and is a
  failed read of its own outcome, ``too_large``;
* the body is decoded as JSON into a catalog (:func:`~fleetd.resilience.parse_catalog`) in a
  worker thread, never on the event loop: decoding megabytes there would stall every other loop
  (``/livez`` among them). Any body that is not a catalog — not UTF-8, not JSON, nested deeper
  than the decoder recurses, not a model list — is a failed read, ``malformed``; the probe fails
  open on it like on any other failed read;
* a ``Retry-After`` is read by :func:`~fleetd.resilience.parse_retry_after`, the parser the
  webhook uses too (the tracker caps the wait);
* httpx's exceptions and the HTTP status are classified here, once (a refused connect or an
  unknown host ``refused``, any other transport failure ``reset``; statuses by
  :func:`~fleetd.resilience.classify_status`). No text from the provider is kept.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import httpx

from fleetd.catalog.port import CatalogAnswer, CatalogTarget
from fleetd.clock import Clock, DeadlineExceededError, within
from fleetd.http_client import outbound_client
from fleetd.resilience import (
    RETRY_AFTER_LIMIT,
    Catalog,
    CatalogFetch,
    ErrorClass,
    classify_status,
    parse_catalog,
    parse_retry_after,
    retry_after_delay,
)

__all__ = ["MAX_BODY_BYTES", "USER_AGENT", "HttpModelCatalog", "decode_catalog"]

MAX_BODY_BYTES = 8 * 1024 * 1024
"""A catalog larger than this is not read (``too_large``); OpenRouter's full list, the largest
known, is about a megabyte. Compiled, not a key (see ``fleetd.example.yaml``)."""

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
                if _declared_length(response) > MAX_BODY_BYTES:
                    return _failed(ErrorClass.TOO_LARGE)
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        return _failed(ErrorClass.TOO_LARGE)
        except httpx.TimeoutException:
            return _failed(ErrorClass.TIMEOUT)
        except httpx.ConnectError:
            return _failed(ErrorClass.REFUSED)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            return _failed(ErrorClass.REJECTED)
        except httpx.HTTPError:  # read, write, protocol: the exchange broke off
            return _failed(ErrorClass.RESET)
        catalog = await asyncio.to_thread(decode_catalog, bytes(body))
        if catalog is None:
            return _failed(ErrorClass.MALFORMED)
        return CatalogAnswer(fetch=CatalogFetch(catalog=catalog))

    async def aclose(self) -> None:
        await self._client.aclose()


def decode_catalog(body: bytes) -> Catalog | None:
    """The catalog in a ``/models`` body, or ``None`` for any body that is not one (not UTF-8,
    not JSON, nested past the decoder's recursion limit, not a model list)."""
    try:
        return parse_catalog(json.loads(body))
    except (ValueError, RecursionError):  # ValueError: not JSON, or not UTF-8
        return None


def _declared_length(response: httpx.Response) -> int:
    """The body length the server declared, or 0 when it declared none (or nonsense)."""
    try:
        return int(response.headers.get("content-length", "0"))
    except ValueError:
        return 0
