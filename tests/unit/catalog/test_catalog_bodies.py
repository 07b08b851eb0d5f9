"""What a provider's ``/models`` body can do to the probe: nothing but fail its own read.

The adapter runs over ``httpx.MockTransport``, and :class:`~fleetd.catalog.tracker.ModelHealth`
over the adapter, so a hostile body goes the whole way the ``model-health`` loop of
``fleetd serve`` takes it.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import httpx
import pytest

from fleetd.catalog import http as catalog_http
from fleetd.catalog.http import MAX_BODY_BYTES, HttpModelCatalog, decode_catalog
from fleetd.catalog.port import CatalogTarget
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import FakeClock
from fleetd.inbox.memory import InMemoryInbox
from fleetd.resilience import Availability, Catalog, ErrorClass
from fleetd.runtime.dependencies import DependencyView
from tests.unit.catalog.test_catalog_tracker import Holder, config

LIMIT = timedelta(seconds=5)
TARGET = CatalogTarget(provider="prov", base_url="http://catalog.invalid/v1")
DEEP = b"[" * 200_000 + b"]" * 200_000
"""Valid JSON nested far past the decoder's recursion limit."""


def _catalog(handler: Callable[[httpx.Request], httpx.Response]) -> HttpModelCatalog:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return HttpModelCatalog(clock=FakeClock(), client=client)


def _body(body: bytes) -> Callable[[httpx.Request], httpx.Response]:
    return lambda _request: httpx.Response(200, content=body)


async def _fetch(handler: Callable[[httpx.Request], httpx.Response]) -> ErrorClass | None:
    catalog = _catalog(handler)
    try:
        return (await catalog.fetch(TARGET, limit=LIMIT)).fetch.error
    finally:
        await catalog.aclose()


@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        b'{"data": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}",
        b"\xff\xfe not utf-8",
        b"not json",
        b'{"data": "not a list"}',
        b"",
    ],
)
async def test_any_body_that_is_not_a_catalog_is_a_malformed_read(body: bytes) -> None:
    """Issue 20 2d: a body nested past the recursion limit, not UTF-8, not JSON or not a model
    list ends the read as ``malformed``; nothing escapes the adapter."""
    assert await _fetch(_body(body)) is ErrorClass.MALFORMED


def test_the_decoder_turns_every_unreadable_body_into_none() -> None:
    """The decode step alone: a deep body is ``None``, a listing a catalog."""
    assert decode_catalog(DEEP) is None
    listed = decode_catalog(b'{"data": [{"id": "m1"}]}')
    assert listed is not None
    assert listed.lists("m1")


async def test_the_body_is_decoded_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 5n: a catalog is decoded in a worker thread, so a large body cannot stall the
    loop every other task (``/livez`` among them) runs on."""
    threads: list[int] = []

    def spy(body: bytes) -> Catalog | None:
        threads.append(threading.get_ident())
        return decode_catalog(body)

    monkeypatch.setattr(catalog_http, "decode_catalog", spy)
    assert await _fetch(_body(b'{"data": [{"id": "m1"}]}')) is None
    assert threads
    assert threads != [threading.get_ident()]


async def test_a_declared_length_past_the_limit_is_not_read() -> None:
    """Issue 20 5n: a ``Content-Length`` past the limit ends the read as ``too_large`` before a
    byte of the body is taken."""
    taken: list[int] = []

    async def stream() -> AsyncIterator[bytes]:
        taken.append(1)
        yield b"{}"

    def handler(_request: httpx.Request) -> httpx.Response:
        headers = {"content-length": str(MAX_BODY_BYTES + 1)}
        return httpx.Response(200, headers=headers, content=stream())

    assert await _fetch(handler) is ErrorClass.TOO_LARGE
    assert taken == []


async def test_a_streamed_body_growing_past_the_limit_stops_there() -> None:
    """Issue 20 5n: a body with no declared length is read chunk by chunk and given up as
    ``too_large`` once it passes the limit, never read to its end."""
    chunk = b" " * (1024 * 1024)
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        while True:
            sent.append(len(chunk))
            yield chunk

    assert await _fetch(lambda _r: httpx.Response(200, content=endless())) is ErrorClass.TOO_LARGE
    assert MAX_BODY_BYTES < sum(sent) <= MAX_BODY_BYTES + 2 * len(chunk)


async def test_the_probe_shows_the_outcome_and_never_benches_on_it() -> None:
    """A deep body and then an oversized one: the model-health step goes on, the provider's
    ``lastOutcome`` in ``fleet_list`` names each failure, and the profile is not benched
    (fail-open)."""
    bodies = iter([DEEP, b" " * (MAX_BODY_BYTES + 1)])
    catalog = _catalog(lambda _request: httpx.Response(200, content=next(bodies)))
    clock = FakeClock()
    health = ModelHealth(catalog=catalog, clock=clock, settings=Holder(config()), environ={})
    view = DependencyView(inbox=InMemoryInbox(), models=health, clock_now=clock.now)
    outcomes = []
    for _ in range(2):
        await health.step()
        [provider] = view.view(clock.now()).providers
        outcomes.append(provider.last_outcome)
        assert health.availability("p") is Availability.UNKNOWN
        assert health.benched_until("p", clock.now()) is None
        clock.advance(300)
    await health.aclose()
    assert outcomes == ["malformed", "too_large"]
