"""The httpx webhook sender against a real HTTP receiver on 127.0.0.1: one POST, one outcome."""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks

from fleetd.clock import FakeClock, SystemClock
from fleetd.health.states import Certainty, Scope, Severity
from fleetd.model.events import EventType
from fleetd.notify.core.retry import (
    PostResult,
    TransportFailure,
    Verdict,
    classify,
    next_step,
)
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.payload import CoverageStatus, IncidentEvent, build_event
from fleetd.notify.request import WebhookRequest, prepare_request
from tests.integration.hook_server import HookServer, Reply

SECRET_TEXT = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()
SECRET = WebhookSecret.parse(SECRET_TEXT)
LIMIT = timedelta(seconds=10)
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)


def incident_event(revision: int = 1) -> IncidentEvent:
    return build_event(
        incident_id="inc_0123456789abcdef01234567",
        event_type=EventType.OPEN if revision == 1 else EventType.REMINDER,
        revision=revision,
        occurred_at=T0,
        instance="fleetd-test",
        scope=Scope.CONTROL_LINK,
        subject="herdr",
        state="CONTROL_LINK_DOWN",
        severity=Severity.CRITICAL,
        certainty=Certainty.CERTAIN,
        cause="list_and_ping_failed",
        opened_at=T0,
        coverage=CoverageStatus.FULL,
    )


def request_to(url: str, event: IncidentEvent | None = None) -> WebhookRequest:
    return prepare_request(
        event or incident_event(), url=url, secret=SECRET, now=SystemClock().now()
    )


@pytest.fixture
async def server() -> AsyncIterator[HookServer]:
    async with HookServer() as running:
        yield running


@pytest.fixture
async def sender() -> AsyncIterator[HttpWebhookSender]:
    client = HttpWebhookSender(clock=SystemClock())
    yield client
    await client.aclose()


async def test_a_delivered_post_carries_the_signed_body(
    server: HookServer, sender: HttpWebhookSender
) -> None:
    """200 delivers; the receiver got one POST whose signature the reference library accepts."""
    request = request_to(server.url)
    outcome = await sender.send(request, limit=LIMIT)
    assert outcome == PostResult(status=200)
    assert classify(outcome) is Verdict.DELIVERED
    [received] = server.received
    assert (received.method, received.path) == ("POST", "/hooks/fleetd")
    assert received.body == request.body
    assert received.headers["content-type"] == "application/json"
    assert received.headers["webhook-id"] == request.event_id
    assert received.headers["idempotency-key"] == request.event_id
    verified = standardwebhooks.Webhook(SECRET_TEXT).verify(received.body, received.headers)
    assert verified["eventId"] == request.event_id


@pytest.mark.parametrize(
    ("reply", "outcome", "verdict"),
    [
        (Reply(status=204), PostResult(status=204), Verdict.DELIVERED),
        (Reply(status=408), PostResult(status=408), Verdict.RETRY),
        (
            Reply(status=429, headers={"Retry-After": "120"}),
            PostResult(status=429, retry_after=timedelta(seconds=120)),
            Verdict.RETRY,
        ),
        (
            Reply(status=503, headers={"Retry-After": "Sat, 15 Aug 2026 09:40:00 GMT"}),
            PostResult(status=503, retry_after=datetime(2026, 8, 15, 9, 40, tzinfo=UTC)),
            Verdict.RETRY,
        ),
        (Reply(status=500), PostResult(status=500), Verdict.RETRY),
        (Reply(status=400), PostResult(status=400), Verdict.PERMANENT),
        (Reply(status=401), PostResult(status=401), Verdict.PERMANENT),
        (
            Reply(status=307, headers={"Location": "http://127.0.0.1:1/elsewhere"}),
            PostResult(status=307),
            Verdict.PERMANENT,
        ),
    ],
)
async def test_each_status_comes_back_as_an_outcome(
    server: HookServer,
    sender: HttpWebhookSender,
    reply: Reply,
    outcome: PostResult,
    verdict: Verdict,
) -> None:
    """Status and Retry-After are all that return; a redirect is reported, not followed."""
    server.answer(reply)
    got = await sender.send(request_to(server.url), limit=LIMIT)
    assert got == outcome
    assert classify(got) is verdict
    assert len(server.received) == 1


async def test_the_response_body_is_ignored(server: HookServer, sender: HttpWebhookSender) -> None:
    """A body that tries to instruct fleetd changes nothing: the outcome is the status alone."""
    instructions = b'{"action": "replay", "restartLead": true, "url": "http://evil"}' * 20_000
    server.answer(Reply(status=200, body=instructions), Reply(status=500, body=instructions))
    assert await sender.send(request_to(server.url), limit=LIMIT) == PostResult(status=200)
    assert await sender.send(request_to(server.url), limit=LIMIT) == PostResult(status=500)


async def test_a_hanging_receiver_times_out_on_the_injected_clock(server: HookServer) -> None:
    """The whole request is bounded by requestTimeoutMs; no test sleep, the fake clock moves."""
    clock = FakeClock()
    sender = HttpWebhookSender(clock=clock)
    server.answer(Reply(hang=True))
    try:
        attempt = asyncio.ensure_future(sender.send(request_to(server.url), limit=LIMIT))
        await server.arrived.wait()
        assert clock.sleepers == 1
        clock.advance(LIMIT.total_seconds() - 0.001)
        await asyncio.sleep(0)
        assert not attempt.done()
        clock.advance(0.001)
        assert await attempt == PostResult(failure=TransportFailure.TIMEOUT)
        assert clock.sleepers == 0
    finally:
        await sender.aclose()


async def test_a_reset_connection_is_a_network_failure(
    server: HookServer, sender: HttpWebhookSender
) -> None:
    """A TCP reset before any answer is retryable network loss, without the error's text."""
    server.answer(Reply(reset=True))
    outcome = await sender.send(request_to(server.url), limit=LIMIT)
    assert outcome == PostResult(failure=TransportFailure.NETWORK)
    assert classify(outcome) is Verdict.RETRY


async def test_a_refused_connection_is_a_network_failure(sender: HttpWebhookSender) -> None:
    """Nobody listening: network failure, and the outcome carries no URL or message."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = await sender.send(request_to(f"http://127.0.0.1:{port}/x"), limit=LIMIT)
    assert outcome == PostResult(failure=TransportFailure.NETWORK)
    assert str(port) not in repr(outcome)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1:8080/x", "http://"])
async def test_an_unusable_url_is_permanent(sender: HttpWebhookSender, url: str) -> None:
    """A URL that cannot be requested is permanent until the config changes."""
    outcome = await sender.send(request_to(url), limit=LIMIT)
    assert outcome == PostResult(failure=TransportFailure.INVALID_URL)
    assert classify(outcome) is Verdict.PERMANENT


async def test_a_retry_keeps_the_id_and_signs_again(
    server: HookServer, sender: HttpWebhookSender
) -> None:
    """500 then 200: both attempts carry the same webhook-id and Idempotency-Key, both verify."""
    server.answer(Reply(status=500, headers={"Retry-After": "7"}), Reply(status=200))
    event = incident_event()
    first = await sender.send(request_to(server.url, event), limit=LIMIT)
    decision = next_step(first, failures=1, draw=0.9, now=T0)
    assert decision.verdict is Verdict.RETRY
    assert decision.delay == timedelta(seconds=7)
    assert decision.honoured_retry_after
    second = await sender.send(request_to(server.url, event), limit=LIMIT)
    assert classify(second) is Verdict.DELIVERED
    ids = {(r.headers["webhook-id"], r.headers["idempotency-key"]) for r in server.received}
    assert ids == {(event.event_id, event.event_id)}
    for received in server.received:
        standardwebhooks.Webhook(SECRET_TEXT).verify(received.body, received.headers)


async def test_the_request_repr_shows_no_url_body_or_signature(server: HookServer) -> None:
    """A request can be logged by repr without leaking its URL, body or headers."""
    request = request_to(server.url)
    shown = repr(request)
    assert request.event_id in shown
    assert server.url not in shown
    assert request.headers["webhook-signature"] not in shown
    assert "fleetd-test" not in shown


async def test_a_non_positive_limit_is_refused(sender: HttpWebhookSender) -> None:
    """A zero limit is a programming error, not an attempt."""
    with pytest.raises(ValueError, match="limit"):
        await sender.send(request_to("http://127.0.0.1:9/x"), limit=timedelta(0))
