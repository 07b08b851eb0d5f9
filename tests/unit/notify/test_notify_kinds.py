"""The sink kinds beside ``webhook``: each encoder field by field against its receiver's public
shape (Alertmanager v2 ``postableAlert``, PagerDuty Events API v2 ``enqueue``, Slack incoming
webhook ``text`` + ``blocks``), each kind's reading of a 400, and the worker carrying them out on
the one delivery path."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetd.clock import FakeClock
from fleetd.config import NotificationMode
from fleetd.health.states import Severity
from fleetd.journal.memory import InMemoryJournal
from fleetd.metrics import Metrics
from fleetd.model.events import EventType
from fleetd.notify.alertmanager import ALERTNAME, alerts_url
from fleetd.notify.core.retry import PostResult
from fleetd.notify.kinds import build_request, our_bug
from fleetd.notify.pagerduty import SEVERITIES
from fleetd.notify.payload import IncidentEvent
from fleetd.notify.sink import SinkTarget
from tests.unit.notify.sink_kit import (
    INSTANCE,
    LIMIT,
    ScriptedSender,
    human_incident,
    make_worker,
    open_incident,
    payload,
)

T0 = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
URL = "http://127.0.0.1:9/receiver"
KEY = "R0UTINGkey0123456789abcdefABCDEF"


def event(kind: EventType = EventType.OPEN, *, resolved: bool = False) -> IncidentEvent:
    incident = human_incident()
    document = payload(incident, kind, revision=1 if kind is EventType.OPEN else 2, at=T0)
    if resolved:
        document["incident"] = {
            **document["incident"],  # type: ignore[dict-item]
            "resolvedAt": (T0 + timedelta(minutes=3)).isoformat(),
            "resolveReason": "cleared",
        }
    return IncidentEvent.model_validate(document)


def body(kind: NotificationMode, item: IncidentEvent) -> Any:
    request = build_request(item, kind=kind, url=URL, now=T0, routing_key=KEY)
    assert request.headers == {"content-type": "application/json", "user-agent": "fleetd-webhook/1"}
    return json.loads(request.body)


def test_an_open_incident_is_one_firing_postable_alert() -> None:
    """Alertmanager: a one-element array; labels are exactly the six bounded ones, annotations
    carry the summary, startsAt is the opening time and a firing alert has no endsAt."""
    item = event()
    [alert] = body(NotificationMode.ALERTMANAGER, item)
    incident = item.incident
    assert set(alert) == {"labels", "annotations", "startsAt"}
    assert alert["labels"] == {
        "alertname": ALERTNAME,
        "scope": incident.scope.value,
        "state": incident.state,
        "severity": incident.severity.value,
        "fleetdInstance": INSTANCE,
        "incident": incident.id,
    }
    assert set(alert["annotations"]) == {"summary", "subject", "cause", "certainty", "routing"}
    assert incident.state in alert["annotations"]["summary"]
    assert all(
        isinstance(v, str) for v in [*alert["labels"].values(), *alert["annotations"].values()]
    )
    assert datetime.fromisoformat(alert["startsAt"]) == incident.opened_at
    assert alert["startsAt"].endswith("Z")


def test_a_reminder_is_the_same_alert_and_a_resolution_sets_ends_at() -> None:
    """The re-post of an open alert has the same labels (Alertmanager's identity) and the
    resolved event adds endsAt at the resolution time."""
    [opened] = body(NotificationMode.ALERTMANAGER, event())
    [again] = body(NotificationMode.ALERTMANAGER, event(EventType.REMINDER))
    [closed] = body(NotificationMode.ALERTMANAGER, event(EventType.RESOLVED, resolved=True))
    assert opened["labels"] == again["labels"] == closed["labels"]
    assert "endsAt" not in again
    assert datetime.fromisoformat(closed["endsAt"]) == T0 + timedelta(minutes=3)


def test_the_alertmanager_url_is_its_v2_alerts_endpoint() -> None:
    """A base URL (with or without a slash, or already the endpoint) posts to /api/v2/alerts."""
    for base in ("http://am:9093", "http://am:9093/", "http://am:9093/api/v2/alerts"):
        assert alerts_url(base) == "http://am:9093/api/v2/alerts"
    request = build_request(
        event(), kind=NotificationMode.ALERTMANAGER, url="http://am:9093", now=T0
    )
    assert request.url == "http://am:9093/api/v2/alerts"


def test_pagerduty_triggers_an_open_and_a_reminder_under_the_incident_s_dedup_key() -> None:
    """PagerDuty: routing_key, event_action trigger, dedup_key = incident id, and a payload with
    the required summary, source and severity (mapped) plus a timestamp; client is fleetd."""
    for kind in (EventType.OPEN, EventType.REMINDER):
        item = event(kind)
        document = body(NotificationMode.PAGERDUTY, item)
        assert set(document) == {"routing_key", "event_action", "dedup_key", "payload", "client"}
        assert (document["routing_key"], document["event_action"]) == (KEY, "trigger")
        assert document["dedup_key"] == item.incident.id
        assert document["client"] == "fleetd"
        sent = document["payload"]
        assert {"summary", "source", "severity"} <= set(sent)
        assert 0 < len(sent["summary"]) <= 1024
        assert sent["source"] == INSTANCE
        assert sent["severity"] in ("critical", "error", "warning", "info")
        assert sent["severity"] == item.incident.severity.value
        assert datetime.fromisoformat(sent["timestamp"]) == item.incident.opened_at
        assert sent["custom_details"]["eventType"] == kind.value


def test_pagerduty_resolves_by_dedup_key_alone() -> None:
    """A resolved incident is a resolve event: routing_key, event_action, dedup_key, no
    payload."""
    item = event(EventType.RESOLVED, resolved=True)
    document = body(NotificationMode.PAGERDUTY, item)
    assert document == {
        "routing_key": KEY,
        "event_action": "resolve",
        "dedup_key": item.incident.id,
        "client": "fleetd",
    }


def test_every_severity_maps_to_a_pagerduty_severity() -> None:
    """fleetd's three severities map onto PagerDuty's four words."""
    assert set(SEVERITIES) == set(Severity)
    assert set(SEVERITIES.values()) <= {"critical", "error", "warning", "info"}


def test_slack_gets_text_and_blocks_for_each_event() -> None:
    """Slack: a fallback text and three blocks (header plain_text, section mrkdwn, context
    mrkdwn), no channel override; the headline says open, still open or resolved."""
    headlines = []
    for kind in (EventType.OPEN, EventType.REMINDER, EventType.RESOLVED):
        item = event(kind, resolved=kind is EventType.RESOLVED)
        document = body(NotificationMode.SLACK, item)
        assert set(document) == {"text", "blocks"}
        assert item.incident.state in document["text"]
        header, section, context = document["blocks"]
        assert header["type"] == "header"
        assert header["text"]["type"] == "plain_text"
        assert len(header["text"]["text"]) <= 150
        assert section["type"] == "section"
        assert section["text"]["type"] == "mrkdwn"
        assert len(section["text"]["text"]) <= 3000
        assert context["type"] == "context"
        assert context["elements"][0]["type"] == "mrkdwn"
        assert item.incident.id in context["elements"][0]["text"]
        headlines.append(header["text"]["text"])
    assert headlines == [
        "fleetd incident opened",
        "fleetd incident still open",
        "fleetd incident resolved",
    ]


def test_a_400_is_fleetd_s_bug_for_every_kind_but_the_webhook() -> None:
    """Alertmanager's, PagerDuty's and Slack's 400 say the body was malformed; a webhook's 400
    stays the receiver's verdict; no other status is a bug."""
    for kind in (NotificationMode.ALERTMANAGER, NotificationMode.PAGERDUTY, NotificationMode.SLACK):
        assert our_bug(kind, 400)
        assert not any(our_bug(kind, status) for status in (200, 202, 403, 404, 410, 429, 500))
        assert not our_bug(kind, None)
    assert not our_bug(NotificationMode.WEBHOOK, 400)


def test_a_pagerduty_target_never_shows_its_routing_key() -> None:
    """The routing key (and the URLs) stay out of repr; a new key is a new generation."""
    one = SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.PAGERDUTY, routing_key=KEY)
    other = SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.PAGERDUTY, routing_key="k2")
    slack = SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.SLACK)
    assert KEY not in repr(one)
    assert URL not in repr(slack)
    assert len({one.generation, other.generation, slack.generation}) == 3
    with pytest.raises(ValueError, match="routing key"):
        SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.PAGERDUTY)


async def test_the_worker_fails_a_slack_400_as_its_own_bug_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On the one delivery path: a Slack 400 fails that event as payload_bug, logs an ERROR
    naming it fleetd's bug (never the URL), counts it, and the receiver stays enabled."""
    clock = FakeClock(T0)
    journal = InMemoryJournal()
    await open_incident(journal, human_incident(), at=T0)
    sender = ScriptedSender(PostResult(status=400))
    metrics = Metrics()
    sink = SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.SLACK)
    worker = make_worker(journal, sender, clock, sink=sink, metrics=metrics)
    with caplog.at_level(logging.INFO, logger="fleetd.notify"):
        report = await worker.step()
    assert report.failed == 1
    [request] = sender.requests
    assert json.loads(request.body)["blocks"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "fleetd bug" in errors[0].getMessage()
    assert not any(URL in r.getMessage() for r in caplog.records)
    assert not [
        r for r in caplog.records if r.levelno == logging.WARNING and "receiver" in r.getMessage()
    ]
    exposition = metrics.exposition().decode()
    assert 'fleet_health_notifications_total{event="open",outcome="payload_bug"} 1.0' in exposition
    report_now = worker.receivers()
    assert report_now is not None
    assert not report_now.disabled


async def test_the_worker_retries_a_pagerduty_429_with_its_retry_after() -> None:
    """A 429 from PagerDuty is retried no sooner than its Retry-After; a 202 delivers."""
    clock = FakeClock(T0)
    journal = InMemoryJournal()
    await open_incident(journal, human_incident(), at=T0)
    sender = ScriptedSender(PostResult(status=429, retry_after=timedelta(seconds=30)))
    sink = SinkTarget(urls=(URL,), limit=LIMIT, kind=NotificationMode.PAGERDUTY, routing_key=KEY)
    worker = make_worker(journal, sender, clock, sink=sink, draws=[0.0])
    assert (await worker.step()).retried == 1
    clock.advance(29)
    assert (await worker.step()).claimed == 0
    clock.advance(2)
    sender.answer(PostResult(status=202))
    assert (await worker.step()).delivered == 1
    assert [json.loads(r.body)["event_action"] for r in sender.requests] == ["trigger", "trigger"]
