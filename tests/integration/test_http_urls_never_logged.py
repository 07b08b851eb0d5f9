"""A webhook URL is a secret (Slack and n8n URLs carry a token): with every logger at DEBUG, no
record — fleetd's, httpx's or httpcore's — holds it, whatever the receiver answers."""

from __future__ import annotations

import logging
import socket

import pytest

from fleetd.catalog.http import HttpModelCatalog
from fleetd.catalog.port import CatalogTarget
from fleetd.clock import FakeClock
from fleetd.journal.memory import InMemoryJournal
from fleetd.notify.core.retry import MAX_DELAY
from fleetd.notify.http import HttpWebhookSender
from tests.contract.journal_cases import T0
from tests.integration.hook_server import HookServer, Reply
from tests.unit.notify.sink_kit import human_incident, make_worker, open_incident, target

TOKEN = "T0KEN-b7f3c1d9e2a4"


def _leaks(caplog: pytest.LogCaptureFixture, *needles: str) -> list[str]:
    """Every captured record that names one of ``needles`` or comes from the HTTP client."""
    found = []
    for record in caplog.records:
        text = f"{record.name} {record.getMessage()} {record.exc_text or ''}"
        if record.name.startswith(("httpx", "httpcore")) or any(n in text for n in needles):
            found.append(text)
    return found


async def test_the_webhook_url_is_never_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """5g: the delivery worker through the real sender — 503, a reset, 503, then 200 from a
    local receiver whose URL holds a token, failing over to a refused second URL whose breaker
    opens — leaves no record with the URL, its token or its port, and none from httpx or
    httpcore, with the root at DEBUG."""
    caplog.set_level(logging.DEBUG)
    clock = FakeClock(T0)
    sender = HttpWebhookSender(clock=clock)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{probe.getsockname()[1]}/hooks/{TOKEN}-2?token={TOKEN}"
    journal = InMemoryJournal()
    async with HookServer() as server:
        url = f"{server.url}/{TOKEN}?token={TOKEN}"
        server.answer(Reply(status=503), Reply(reset=True), Reply(status=503))
        worker = make_worker(journal, sender, clock, sink=target(url, refused))
        await open_incident(journal, human_incident(), at=T0)
        for _ in range(4):
            await worker.step()
            clock.advance(MAX_DELAY.total_seconds())
        port = url.split(":")[2].split("/", maxsplit=1)[0]
        received = len(server.received)
    await sender.aclose()
    assert received == 4
    assert any("breaker open" in r.getMessage() for r in caplog.records)  # the capture works
    assert _leaks(caplog, TOKEN, port, "/hooks/") == []


async def test_the_catalog_url_is_never_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """5g: the catalog probe's client is built the same way: nothing of httpx at DEBUG."""
    caplog.set_level(logging.DEBUG)
    catalog = HttpModelCatalog(clock=FakeClock(T0))
    async with HookServer() as server:
        server.answer(Reply(body=b'{"data": [{"id": "a"}]}'))
        base = server.url.rsplit("/hooks", 1)[0] + f"/{TOKEN}/v1"
        answer = await catalog.fetch(
            CatalogTarget(provider="p", base_url=base), limit=MAX_DELAY / 100
        )
    await catalog.aclose()
    assert answer.fetch.catalog is not None
    assert _leaks(caplog, TOKEN) == []
