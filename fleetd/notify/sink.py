"""The webhook target: URL, signing secret and request limit, resolved from config and environment.

Config holds variable names only (``health.notifications.webhookUrlEnv`` / ``secretEnv``); the
values are read here, when the dispatcher needs them, and kept out of every ``repr``. Loading the
config already refused webhook mode without usable variables, so :func:`resolve_sink` fails only
when the environment it is given differs from the one the config was checked against.

:attr:`SinkTarget.generation` names the target without revealing it (a keyed hash of URL and
secret). The dispatcher records it with a permanent failure: an event refused as permanent by
one target is re-armed when the generation changes — the config now points elsewhere or signs
differently (M4 §10.4, "permanent until config changes").
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from fleetd.config import NotificationMode, NotificationsConfig
from fleetd.errors import ConfigError
from fleetd.notify.signing import WebhookSecret

__all__ = ["SinkTarget", "resolve_sink"]

_KEY_PREFIX = "health.notifications."


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkTarget:
    """A resolved webhook target; its ``repr`` shows only the limit."""

    url: str = field(repr=False)
    secret: WebhookSecret = field(repr=False)
    limit: timedelta

    @property
    def generation(self) -> str:
        """``snk_`` + 16 hex digits of HMAC-SHA256(secret, URL): equal iff URL and secret are."""
        digest = hmac.new(self.secret.key, self.url.encode("utf-8"), hashlib.sha256).hexdigest()
        return "snk_" + digest[:16]


def resolve_sink(
    notifications: NotificationsConfig, environ: Mapping[str, str]
) -> SinkTarget | None:
    """The target webhook mode sends to, or ``None`` when notifications are disabled.

    Raises :class:`~fleetd.errors.ConfigError` naming the key when a variable is unset or its
    value unusable (never showing the value).
    """
    if notifications.mode is not NotificationMode.WEBHOOK:
        return None
    url = _value(environ, notifications.webhook_url_env, "webhookUrlEnv")
    secret_text = _value(environ, notifications.secret_env, "secretEnv")
    try:
        secret = WebhookSecret.parse(secret_text)
    except ValueError as error:
        raise ConfigError(
            _KEY_PREFIX + "secretEnv", f"environment variable {notifications.secret_env}: {error}"
        ) from None
    return SinkTarget(url=url.strip(), secret=secret, limit=notifications.request_timeout)


def _value(environ: Mapping[str, str], name: str | None, key: str) -> str:
    if name is None:
        raise ConfigError(_KEY_PREFIX + key, "required when mode is webhook")
    value = environ.get(name)
    if not value:
        raise ConfigError(_KEY_PREFIX + key, f"environment variable {name} is not set")
    return value
