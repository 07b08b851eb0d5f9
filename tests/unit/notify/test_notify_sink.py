"""The webhook target resolved from config and environment, and its re-arm generation."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest

from fleetd.config import NotificationMode, NotificationsConfig
from fleetd.errors import ConfigError
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.sink import SinkTarget, resolve_sink

SECRET_TEXT = "whsec_" + "QUFB" * 8
URL = "https://hooks.example/services/T000/very-secret"
ENV = {"HOOK_URL": URL, "HOOK_SECRET": SECRET_TEXT}
WEBHOOK = NotificationsConfig(
    mode=NotificationMode.WEBHOOK,
    webhook_url_env="HOOK_URL",
    secret_env="HOOK_SECRET",
    request_timeout_ms=2500,
)


def test_disabled_mode_has_no_target() -> None:
    """Disabled notifications resolve to nothing, whatever the environment holds."""
    assert resolve_sink(NotificationsConfig(), ENV) is None


def test_webhook_mode_resolves_url_secret_and_limit() -> None:
    """The URL and secret come from the named variables; the repr shows neither."""
    target = resolve_sink(WEBHOOK, ENV)
    assert target == SinkTarget(
        urls=(URL,), secret=WebhookSecret.parse(SECRET_TEXT), limit=timedelta(milliseconds=2500)
    )
    assert URL not in repr(target)
    assert "QUFB" not in repr(target)


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"HOOK_SECRET": SECRET_TEXT}, "health.notifications.webhookUrlEnv"),
        ({"HOOK_URL": URL}, "health.notifications.secretEnv"),
        ({"HOOK_URL": URL, "HOOK_SECRET": "whsec_short"}, "health.notifications.secretEnv"),
    ],
)
def test_a_changed_environment_is_a_config_error_naming_the_key(
    environ: dict[str, str], key: str
) -> None:
    """An unset or unusable variable names its key and never shows its value."""
    with pytest.raises(ConfigError) as caught:
        resolve_sink(WEBHOOK, environ)
    assert caught.value.key == key
    assert URL not in str(caught.value)
    assert "whsec_short" not in str(caught.value)


def test_the_generation_changes_with_url_or_secret_only() -> None:
    """Same URL and secret: same generation (a restart keeps it); either changed: a new one."""
    base = resolve_sink(WEBHOOK, ENV)
    assert base is not None
    same = resolve_sink(WEBHOOK.model_copy(update={"request_timeout_ms": 9000}), ENV)
    moved = resolve_sink(WEBHOOK, ENV | {"HOOK_URL": URL + "-2"})
    rekeyed = resolve_sink(WEBHOOK, ENV | {"HOOK_SECRET": "whsec_" + "QkJC" * 8})
    assert same is not None
    assert moved is not None
    assert rekeyed is not None
    assert same.generation == base.generation
    assert len({base.generation, moved.generation, rekeyed.generation}) == 3
    assert base.generation.startswith("snk_")
    assert len(base.generation) == 20


SECOND_URL = "https://backup.example/hooks/also-secret"
LISTED = NotificationsConfig(
    mode=NotificationMode.WEBHOOK,
    webhook_url_envs=("HOOK_URL", "HOOK_URL_2"),
    secret_env="HOOK_SECRET",
)


def test_a_list_resolves_every_receiver_in_order() -> None:
    """webhookUrlEnvs gives the receivers primary first; one webhookUrlEnv is a list of one."""
    target = resolve_sink(LISTED, ENV | {"HOOK_URL_2": SECOND_URL})
    assert target is not None
    assert target.urls == (URL, SECOND_URL)
    assert SECOND_URL not in repr(target)
    one = resolve_sink(WEBHOOK, ENV)
    assert one is not None
    assert one.urls == (URL,)


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        (ENV, "HOOK_URL_2 is not set"),
        (ENV | {"HOOK_URL_2": " " + URL}, "HOOK_URL and HOOK_URL_2 hold the same URL"),
    ],
)
def test_a_changed_environment_names_the_list_key_and_the_variable(
    environ: dict[str, str], reason: str
) -> None:
    """An unset receiver variable, or two holding one URL: the list's key and the variables,
    never a value."""
    with pytest.raises(ConfigError) as caught:
        resolve_sink(LISTED, environ)
    assert caught.value.key == "health.notifications.webhookUrlEnvs"
    assert reason in caught.value.reason
    assert URL not in str(caught.value)


def test_one_receiver_keeps_its_generation_and_a_list_has_its_own() -> None:
    """One receiver's generation is what it was before lists (nothing re-arms on upgrade); the
    list's generation changes with each URL and with their order."""
    one = resolve_sink(WEBHOOK, ENV)
    assert one is not None
    key = WebhookSecret.parse(SECRET_TEXT).key
    assert one.generation == "snk_" + hmac.new(key, URL.encode(), hashlib.sha256).hexdigest()[:16]
    environ = ENV | {"HOOK_URL_2": SECOND_URL}
    listed = resolve_sink(LISTED, environ)
    swapped = resolve_sink(LISTED, environ | {"HOOK_URL": SECOND_URL, "HOOK_URL_2": URL})
    moved = resolve_sink(LISTED, environ | {"HOOK_URL_2": SECOND_URL + "-2"})
    generations = {t.generation for t in (one, listed, swapped, moved) if t is not None}
    assert len(generations) == 4


def test_a_target_lists_each_receiver_once() -> None:
    """No target without a receiver, nor with one listed twice."""
    secret = WebhookSecret.parse(SECRET_TEXT)
    for urls in ((), (URL, URL)):
        with pytest.raises(ValueError, match="receiver"):
            SinkTarget(urls=urls, secret=secret, limit=timedelta(seconds=1))
