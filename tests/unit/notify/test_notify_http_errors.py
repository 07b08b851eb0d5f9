"""The sender translates every httpx failure into a bounded class, in one place."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from fleetd.clock import FakeClock
from fleetd.notify.core.retry import PostResult, TransportFailure
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.request import WebhookRequest

SECRET_URL = "https://hooks.example.com/services/T000/B000/XXXX"
REQUEST = WebhookRequest(event_id="evt_1", url=SECRET_URL, body=b"{}", headers={})


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (httpx.ConnectTimeout, TransportFailure.TIMEOUT),
        (httpx.ReadTimeout, TransportFailure.TIMEOUT),
        (httpx.WriteTimeout, TransportFailure.TIMEOUT),
        (httpx.PoolTimeout, TransportFailure.TIMEOUT),
        (httpx.ConnectError, TransportFailure.NETWORK),
        (httpx.ReadError, TransportFailure.NETWORK),
        (httpx.WriteError, TransportFailure.NETWORK),
        (httpx.RemoteProtocolError, TransportFailure.NETWORK),
        (httpx.LocalProtocolError, TransportFailure.NETWORK),
        (httpx.ProxyError, TransportFailure.NETWORK),
        (httpx.UnsupportedProtocol, TransportFailure.INVALID_URL),
    ],
)
async def test_httpx_errors_become_outcome_classes(
    error: type[httpx.TransportError], failure: TransportFailure
) -> None:
    """Each httpx transport error maps to network, timeout or invalid URL, without its text."""

    def fail(request: httpx.Request) -> httpx.Response:
        raise error(f"boom at {SECRET_URL}", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(fail))
    sender = HttpWebhookSender(clock=FakeClock(), client=client)
    try:
        outcome = await sender.send(REQUEST, limit=timedelta(seconds=5))
    finally:
        await sender.aclose()
    assert outcome == PostResult(failure=failure)
    assert "hooks.example.com" not in repr(outcome)


async def test_an_unreadable_retry_after_is_dropped() -> None:
    """A Retry-After that is neither seconds nor an HTTP-date leaves the backoff in charge."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "after lunch"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    sender = HttpWebhookSender(clock=FakeClock(), client=client)
    try:
        assert await sender.send(REQUEST, limit=timedelta(seconds=5)) == PostResult(status=429)
    finally:
        await sender.aclose()
