"""``health.notifications.mode`` beyond webhook: what alertmanager, pagerduty and slack need
from the config and the environment, refused by key (never showing a value), and what the
resolved target holds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fleetd.clock import FakeClock
from fleetd.config import ConfigRef, NotificationMode, parse_config
from fleetd.config.model import PAGERDUTY_EVENTS_URL
from fleetd.errors import ConfigError
from fleetd.notify.sink import resolve_sink

SLACK_URL = "https://hooks.slack.example/services/T0/B0/verysecrettoken"
PD_KEY = "abcdef0123456789abcdef0123456789"


def _notifications(**keys: Any) -> dict[str, Any]:
    return {"health": {"notifications": keys}}


@pytest.mark.parametrize(
    ("document", "environ", "key", "reason"),
    [
        (_notifications(mode="slack"), {}, "webhookUrlEnv", "required when mode is slack"),
        (
            _notifications(mode="slack", webhookUrlEnv="SLACK_URL"),
            {},
            "webhookUrlEnv",
            "SLACK_URL is not set (mode is slack)",
        ),
        (
            _notifications(mode="alertmanager", webhookUrlEnvs=["AM"]),
            {"AM": "am:9093"},
            "webhookUrlEnvs",
            "http(s)",
        ),
        (_notifications(mode="pagerduty"), {}, "routingKeyEnv", "required when mode is pagerduty"),
        (
            _notifications(mode="pagerduty", routingKeyEnv="PD_KEY"),
            {"PD_KEY": "has a space"},
            "routingKeyEnv",
            "routing key",
        ),
        (
            _notifications(mode="alertmanager", webhookUrlEnv="AM", alertmanagerRepostSeconds=5),
            {"AM": "http://am:9093"},
            "alertmanagerRepostSeconds",
            "10",
        ),
    ],
)
def test_each_kind_names_the_key_it_lacks(
    document: dict[str, Any], environ: dict[str, str], key: str, reason: str
) -> None:
    """Every sending kind needs its receivers' URL variables set (pagerduty: its routing key
    instead); the error names the key and never repeats a value."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, environ)
    assert caught.value.key == f"health.notifications.{key}"
    assert reason in caught.value.reason
    for value in environ.values():
        assert value not in str(caught.value)


def test_slack_and_alertmanager_need_no_signing_secret() -> None:
    """Only webhook mode signs: slack and alertmanager load without secretEnv; the Slack URL
    is resolved into the target and shown nowhere."""
    environ = {"SLACK_URL": SLACK_URL}
    loaded = parse_config(_notifications(mode="slack", webhookUrlEnv="SLACK_URL"), environ)
    notifications = loaded.config.health.notifications
    target = resolve_sink(notifications, environ)
    assert target is not None
    assert (target.kind, target.urls, target.secret) == (NotificationMode.SLACK, (SLACK_URL,), None)
    assert SLACK_URL not in repr(target)
    assert notifications.refresh is None
    ref = ConfigRef(loaded, environ=environ, now=FakeClock().now())
    assert SLACK_URL in ref.secret_values()


def test_pagerduty_defaults_to_the_events_api_and_keeps_its_key_secret() -> None:
    """Without receivers pagerduty sends to the Events API v2 enqueue URL; the routing key is
    in the target (for the body), out of its repr, and listed for redaction."""
    environ = {"PD_KEY": PD_KEY}
    loaded = parse_config(_notifications(mode="pagerduty", routingKeyEnv="PD_KEY"), environ)
    target = resolve_sink(loaded.config.health.notifications, environ)
    assert target is not None
    assert target.urls == (PAGERDUTY_EVENTS_URL,)
    assert target.routing_key == PD_KEY
    assert PD_KEY not in repr(target)
    ref = ConfigRef(loaded, environ=environ, now=FakeClock().now())
    assert PD_KEY in ref.secret_values()
    assert loaded.warnings == ()  # a sending mode: no partial-coverage warning


def test_alertmanager_re_posts_at_its_configured_interval() -> None:
    """alertmanager mode gives the policy a refresh (default 60 s); other modes give none."""
    environ = {"AM": "http://127.0.0.1:9093"}
    default = parse_config(_notifications(mode="alertmanager", webhookUrlEnv="AM"), environ)
    assert default.config.health.notifications.refresh == timedelta(seconds=60)
    tuned = parse_config(
        _notifications(mode="alertmanager", webhookUrlEnv="AM", alertmanagerRepostSeconds=120),
        environ,
    )
    assert tuned.config.health.notifications.refresh == timedelta(seconds=120)
