"""The webhook sender: one POST over httpx, answered with an outcome value, never an exception.

:class:`WebhookSender` is the port the dispatcher calls; :class:`HttpWebhookSender` is its adapter.
One :meth:`~HttpWebhookSender.send` is one attempt:

* the whole attempt — connect, TLS, upload, status line — is bounded by ``limit``
  (``requestTimeoutMs``) on the injected :class:`~fleetd.clock.Clock`, with httpx's per-phase
  timeouts at the same value as a backstop; on expiry the request is cancelled (its connection
  closed) and the outcome is ``timeout``;
* the response body is never read: only the status and a parsed ``Retry-After`` come back, so
  nothing a receiver writes can steer fleetd (§10.5);
* redirects are not followed (the event would go to a URL nobody configured) and the environment
  is not consulted (``trust_env=False``: no proxy variables, no ``.netrc`` credentials added to
  the request), and neither httpx nor httpcore logs the request: the URL is a secret
  (:mod:`fleetd.http_client`);
* httpx's exceptions are translated here, once, into a
  :class:`~fleetd.notify.core.retry.TransportFailure` class; their text, which may hold the URL,
  goes
  nowhere.

What to do with the outcome is :func:`fleetd.notify.core.retry.next_step`'s business, not this
module's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

import httpx

from fleetd.clock import Clock, DeadlineExceededError, within
from fleetd.http_client import outbound_client
from fleetd.notify.core.retry import PostResult, TransportFailure
from fleetd.notify.request import USER_AGENT, WebhookRequest
from fleetd.resilience.retry_after import parse_retry_after

__all__ = ["HttpWebhookSender", "WebhookSender"]


class WebhookSender(Protocol):
    """Makes one delivery attempt of a signed webhook request."""

    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        """POST ``request`` once within ``limit``; the outcome, never an exception."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class HttpWebhookSender:
    """:class:`WebhookSender` over an :class:`httpx.AsyncClient` (its own unless given one)."""

    def __init__(self, *, clock: Clock, client: httpx.AsyncClient | None = None) -> None:
        self._clock = clock
        self._client = client or outbound_client(USER_AGENT)

    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        seconds = limit.total_seconds()
        if seconds <= 0:
            raise ValueError("the request limit must be positive")
        try:
            return await within(self._clock, self._post(request, seconds), seconds)
        except DeadlineExceededError:
            return PostResult(failure=TransportFailure.TIMEOUT)

    async def _post(self, request: WebhookRequest, seconds: float) -> PostResult:
        try:
            async with self._client.stream(
                "POST",
                request.url,
                content=request.body,
                headers=dict(request.headers),
                timeout=httpx.Timeout(seconds),
            ) as response:
                return PostResult(
                    status=response.status_code,
                    retry_after=parse_retry_after(response.headers.get("retry-after")),
                )
        except httpx.TimeoutException:
            return PostResult(failure=TransportFailure.TIMEOUT)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            return PostResult(failure=TransportFailure.INVALID_URL)
        except httpx.HTTPError:  # connect, read, write, protocol: the link failed
            return PostResult(failure=TransportFailure.NETWORK)

    async def aclose(self) -> None:
        await self._client.aclose()
