"""The demo receiver verifies with fleetd's own code, prints each event once, refuses the rest."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from fleetd.clock import FakeClock
from fleetd.demo.receiver import MAX_BODY_BYTES, WebhookReceiver, create_receiver_app, main
from fleetd.health.states import Certainty, Scope, Severity
from fleetd.model.events import EventType
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.payload import CoverageStatus, IncidentEvent, build_event, encode_event
from fleetd.notify.request import WebhookRequest, prepare_request, signed_request

SECRET = WebhookSecret(bytes(range(32)))
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)


def incident_event(revision: int = 1) -> IncidentEvent:
    return build_event(
        incident_id="inc_0123456789abcdef01234567",
        event_type=EventType.OPEN if revision == 1 else EventType.RESOLVED,
        revision=revision,
        occurred_at=T0,
        instance="fleetd-test",
        scope=Scope.LEAD,
        subject="lead-a",
        state="LEAD_UNREACHABLE",
        severity=Severity.CRITICAL,
        certainty=Certainty.CERTAIN,
        cause="agent_not_found",
        opened_at=T0,
        coverage=CoverageStatus.PARTIAL,
        resolved_at=T0 if revision > 1 else None,
    )


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.lines: list[str] = []
        self.receiver = WebhookReceiver(SECRET, clock=self.clock, report=self.lines.append)
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_receiver_app(self.receiver)),
            base_url="http://receiver",
        )

    async def post(self, request: WebhookRequest) -> int:
        response = await self.client.post(
            "/hooks", content=request.body, headers=dict(request.headers)
        )
        return response.status_code


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    built = Harness()
    yield built
    await built.client.aclose()


def signed(event: IncidentEvent | None = None, **changes: object) -> WebhookRequest:
    fields: dict[str, object] = {"url": "http://receiver/hooks", "secret": SECRET, "now": T0}
    return prepare_request(event or incident_event(), **(fields | changes))  # type: ignore[arg-type]


async def test_a_signed_event_is_printed_once_and_its_duplicate_marked(harness: Harness) -> None:
    """200 and one line per request; a retry of the same event id prints as a duplicate."""
    first = signed()
    assert await harness.post(first) == 200
    assert await harness.post(signed(now=T0 + timedelta(seconds=30))) == 200
    assert await harness.post(signed(incident_event(revision=2))) == 200
    assert harness.lines == [
        f"open inc_0123456789abcdef01234567 revision 1 ({first.event_id})",
        f"duplicate open inc_0123456789abcdef01234567 revision 1 ({first.event_id})",
        f"resolved inc_0123456789abcdef01234567 revision 2 ({incident_event(2).event_id})",
    ]
    assert [event.duplicate for event in harness.receiver.events] == [False, True, False]


@pytest.mark.parametrize(
    ("request_", "line"),
    [
        (signed(secret=WebhookSecret(b"\x07" * 32)), "refused no_matching_signature"),
        (signed(now=T0 - timedelta(minutes=6)), "refused too_old"),
        (signed(now=T0 + timedelta(minutes=6)), "refused too_new"),
        (
            WebhookRequest(
                event_id="x", url="", body=signed().body + b" ", headers=signed().headers
            ),
            "refused no_matching_signature",
        ),
        (
            WebhookRequest(event_id="x", url="", body=signed().body, headers={}),
            "refused missing_headers",
        ),
    ],
)
async def test_an_unverified_request_is_refused_with_401(
    harness: Harness, request_: WebhookRequest, line: str
) -> None:
    """Wrong key, stale or future timestamp, altered body, no headers: 401 and nothing printed."""
    assert await harness.post(request_) == 401
    assert harness.lines == [line]
    assert harness.receiver.events == []


async def test_a_signed_body_that_is_not_an_event_is_refused_with_400(harness: Harness) -> None:
    """Verified but not a v1 event, or an event under another id: 400."""
    document = json.loads(encode_event(incident_event()))
    document["paneText"] = "$ rm -rf /"
    extra = json.dumps(document).encode()
    other = incident_event(revision=2)
    requests = [
        signed_request(b"not json", event_id="evt_1", url="", secret=SECRET, now=T0),
        signed_request(extra, event_id=document["eventId"], url="", secret=SECRET, now=T0),
        signed_request(encode_event(other), event_id="evt_1", url="", secret=SECRET, now=T0),
    ]
    assert [await harness.post(request) for request in requests] == [400, 400, 400]
    assert harness.lines == ["refused invalid_payload"] * 2 + ["refused id_mismatch"]


async def test_an_oversized_body_is_refused_with_413(harness: Harness) -> None:
    """A body past 64 KiB is not read to the end."""
    body = b"x" * (MAX_BODY_BYTES + 1)
    request = signed_request(body, event_id="evt_1", url="", secret=SECRET, now=T0)
    assert await harness.post(request) == 413
    assert harness.lines == []


async def test_only_post_is_served(harness: Harness) -> None:
    """A GET is not a webhook."""
    assert (await harness.client.get("/hooks")).status_code == 405


@pytest.mark.parametrize("value", [None, "", "whsec_short", "not-a-secret"])
def test_main_refuses_a_missing_or_malformed_secret(
    value: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 naming the variable, without echoing its value."""
    environ = {} if value is None else {"HOOK_SECRET": value}
    assert main(["--secret-env", "HOOK_SECRET"], environ) == 2
    error = capsys.readouterr().err
    assert error.startswith("HOOK_SECRET: ")
    if value:
        assert value not in error


def test_the_secret_spelling_round_trips() -> None:
    """The whsec_ text a receiver is configured with parses back to the same key."""
    text = SECRET.encoded()
    assert text == "whsec_" + base64.b64encode(bytes(range(32))).decode()
    assert WebhookSecret.parse(text) == SECRET
