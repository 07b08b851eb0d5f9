"""The webhook target resolved from config and environment, and its re-arm generation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetd.config import NotificationMode, NotificationsConfig
from fleetd.errors import ConfigError
from fleetd.notify.signing import WebhookSecret
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
        url=URL, secret=WebhookSecret.parse(SECRET_TEXT), limit=timedelta(milliseconds=2500)
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
