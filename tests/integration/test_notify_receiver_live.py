"""Sender and demo receiver over a real socket: an event goes out signed and is printed once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetd.clock import SystemClock
from fleetd.demo.receiver import WebhookReceiver, start_receiver
from fleetd.health.states import Certainty, Scope, Severity
from fleetd.model.events import EventType
from fleetd.notify.core.retry import PostResult, Verdict, classify
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.payload import CoverageStatus, build_event
from fleetd.notify.request import prepare_request

SECRET = WebhookSecret(bytes(range(40, 72)))
LIMIT = timedelta(seconds=10)
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)

EVENT = build_event(
    incident_id="inc_0123456789abcdef01234567",
    event_type=EventType.OPEN,
    revision=1,
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


async def test_the_sender_reaches_the_demo_receiver() -> None:
    """200 for the event and its retry; the receiver prints it, then marks the duplicate."""
    clock = SystemClock()
    lines: list[str] = []
    running = await start_receiver(WebhookReceiver(SECRET, clock=clock, report=lines.append))
    sender = HttpWebhookSender(clock=clock)
    try:
        for _ in range(2):
            request = prepare_request(EVENT, url=running.url, secret=SECRET, now=clock.now())
            assert await sender.send(request, limit=LIMIT) == PostResult(status=200)
    finally:
        await sender.aclose()
        await running.stop()
    assert lines == [
        f"open inc_0123456789abcdef01234567 revision 1 ({EVENT.event_id})",
        f"duplicate open inc_0123456789abcdef01234567 revision 1 ({EVENT.event_id})",
    ]


async def test_a_wrong_secret_is_a_permanent_refusal() -> None:
    """A receiver with another secret answers 401, which stops the event until config changes."""
    clock = SystemClock()
    lines: list[str] = []
    running = await start_receiver(WebhookReceiver(SECRET, clock=clock, report=lines.append))
    sender = HttpWebhookSender(clock=clock)
    try:
        request = prepare_request(
            EVENT, url=running.url, secret=WebhookSecret(b"\x01" * 32), now=clock.now()
        )
        outcome = await sender.send(request, limit=LIMIT)
    finally:
        await sender.aclose()
        await running.stop()
    assert outcome == PostResult(status=401)
    assert classify(outcome) is Verdict.PERMANENT
    assert lines == ["refused no_matching_signature"]
