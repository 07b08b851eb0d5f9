"""The catalog adapter over real HTTP: what each answer becomes, and what it never does."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest

from fleetd.catalog import http as catalog_http
from fleetd.catalog.http import HttpModelCatalog
from fleetd.catalog.port import CatalogTarget
from fleetd.clock import FakeClock, SystemClock
from fleetd.notify.core.retry import server_wait
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.request import WebhookRequest
from fleetd.resilience import ErrorClass
from tests.integration.hook_server import HookServer, Reply

LIMIT = timedelta(seconds=2)
T0 = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)


def _base(server: HookServer) -> str:
    return server.url.rsplit("/hooks", 1)[0] + "/v1/"


async def test_a_listing_is_read_with_its_windows_and_no_key_is_sent_without_one() -> None:
    """The data list becomes a catalog with each entry's stated window; no Authorization
    header goes out when the provider has no key."""
    catalog = HttpModelCatalog(clock=FakeClock())
    async with HookServer() as server:
        server.answer(
            Reply(body=b'{"data": [{"id": "a", "top_provider": {"context_length": 64000}}]}')
        )
        answer = await catalog.fetch(
            CatalogTarget(provider="p", base_url=_base(server)), limit=LIMIT
        )
        [request] = server.received
    await catalog.aclose()
    assert answer.fetch.catalog is not None
    assert answer.fetch.catalog.context_window("a") == 64000
    assert request.path == "/v1/models"
    assert "authorization" not in request.headers
    assert request.headers["user-agent"] == "fleetd-catalog/1"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(status=302, headers={"location": "http://elsewhere.invalid/"}), "rejected"),
        (Reply(status=404), "rejected"),
        (Reply(status=503, headers={"retry-after": "30"}), "throttled"),
        (Reply(status=503), "server_error"),
        (Reply(status=403), "auth"),
        (Reply(body=b"\xff\xfe not utf-8"), "malformed"),
    ],
)
async def test_statuses_and_bodies_are_classed(reply: Reply, error: str) -> None:
    """A redirect is not followed; 404 is a request error; 503 with Retry-After a throttle
    (the wait kept); other 5xx a server error; 403 auth; an unreadable body malformed."""
    catalog = HttpModelCatalog(clock=SystemClock())
    async with HookServer() as server:
        server.answer(reply)
        answer = await catalog.fetch(
            CatalogTarget(provider="p", base_url=_base(server)), limit=LIMIT
        )
    await catalog.aclose()
    assert answer.fetch.error is ErrorClass(error)
    assert (answer.retry_after is not None) == (error == "throttled")


@pytest.mark.parametrize(
    "header",
    [
        "90",
        "Sat, 01 Aug 2026 12:01:30 GMT",
        "Saturday, 01-Aug-26 12:01:30 GMT",
        "Sat Aug  1 12:01:30 2026",
        "Sat, 01 Aug 2026 11:00:00 GMT",
    ],
)
async def test_the_catalog_and_the_webhook_read_retry_after_alike(header: str) -> None:
    """One Retry-After parser: every HTTP-date form a 503 names makes the catalog's answer a
    throttle with the same wait (before the caller's cap) as the webhook sender reads."""
    clock = FakeClock(T0)
    catalog = HttpModelCatalog(clock=clock)
    sender = HttpWebhookSender(clock=clock)
    async with HookServer() as server:
        server.answer(*[Reply(status=503, headers={"retry-after": header})] * 2)
        answer = await catalog.fetch(
            CatalogTarget(provider="p", base_url=_base(server)), limit=LIMIT
        )
        request = WebhookRequest(event_id="evt_1", url=server.url, body=b"{}", headers={})
        outcome = await sender.send(request, limit=LIMIT)
    await catalog.aclose()
    await sender.aclose()
    assert answer.fetch.error is ErrorClass.THROTTLED
    assert outcome.retry_after is not None
    assert answer.retry_after == server_wait(outcome.retry_after, T0)


async def test_a_body_past_the_limit_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog larger than the limit is a failed read of its own, ``too_large``, whatever it
    holds."""
    monkeypatch.setattr(catalog_http, "MAX_BODY_BYTES", 16)
    catalog = HttpModelCatalog(clock=SystemClock())
    async with HookServer() as server:
        server.answer(Reply(body=b'{"data": [{"id": "a-long-model-name"}]}'))
        answer = await catalog.fetch(
            CatalogTarget(provider="p", base_url=_base(server)), limit=LIMIT
        )
    await catalog.aclose()
    assert answer.fetch.error is ErrorClass.TOO_LARGE


async def test_a_closed_port_is_refused_and_a_bad_url_rejected() -> None:
    """Nothing listening is ``refused``; a URL httpx cannot use is ``rejected``; a limit of
    zero is a programming error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    catalog = HttpModelCatalog(clock=SystemClock())
    refused = await catalog.fetch(
        CatalogTarget(provider="p", base_url=f"http://127.0.0.1:{port}/v1"), limit=LIMIT
    )
    assert refused.fetch.error is ErrorClass.REFUSED
    bad = await catalog.fetch(CatalogTarget(provider="p", base_url="ftp://x/v1"), limit=LIMIT)
    assert bad.fetch.error is ErrorClass.REJECTED
    with pytest.raises(ValueError, match="positive"):
        await catalog.fetch(CatalogTarget(provider="p", base_url="http://x/"), limit=timedelta(0))
    await catalog.aclose()


def test_the_key_never_shows_in_a_target_repr() -> None:
    """A target prints its provider only."""
    assert "sk-" not in repr(CatalogTarget(provider="p", base_url="http://x/", api_key="sk-1"))
