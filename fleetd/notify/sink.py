"""The sink target: kind, receiver URLs, credential and request limit, from config and environment.

Config holds variable names only (``health.notifications.webhookUrlEnvs`` — or the one
``webhookUrlEnv`` — and ``secretEnv`` for a webhook, ``routingKeyEnv`` for PagerDuty); the
values are read here, when the dispatcher needs them, and kept out of every ``repr`` (a Slack
URL and a PagerDuty routing key are credentials). Pagerduty mode without receivers sends to
:data:`~fleetd.config.model.PAGERDUTY_EVENTS_URL`. Loading the config already refused a mode
without usable variables, so :func:`resolve_sink` fails only when the environment it is given
differs from the one the config was checked against.

A target is one immutable snapshot: the receivers in failover order (primary first), one secret
for all of them, one request limit per attempt. The worker takes a new snapshot at the start of a
pass, so a reload never changes the list under an attempt in flight.

:attr:`SinkTarget.generation` names the target without revealing it (a keyed hash of the URLs and
the secret). The dispatcher records it with a permanent failure: an event refused as permanent
is re-armed when the generation changes — the config now points elsewhere or signs differently
(M4 §10.4, "permanent until config changes"). One receiver keeps the generation it had before
lists existed, so an upgrade re-arms nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from fleetd.config import NotificationMode, NotificationsConfig
from fleetd.config.model import PAGERDUTY_EVENTS_URL
from fleetd.errors import ConfigError
from fleetd.notify.core.signing import WebhookSecret

__all__ = ["SinkTarget", "resolve_sink"]

_KEY_PREFIX = "health.notifications."


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkTarget:
    """A resolved target; its ``repr`` shows only the kind and the limit. ``urls``: the receivers
    in failover order, at least one, each once; ``secret`` signs (webhook), ``routing_key``
    names the PagerDuty integration (pagerduty)."""

    urls: tuple[str, ...] = field(repr=False)
    secret: WebhookSecret | None = field(default=None, repr=False)
    limit: timedelta
    kind: NotificationMode = NotificationMode.WEBHOOK
    routing_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("a webhook target needs at least one receiver")
        if len(set(self.urls)) != len(self.urls):
            raise ValueError("each webhook receiver may be listed once")
        if self.kind is NotificationMode.WEBHOOK and self.secret is None:
            raise ValueError("a webhook target needs its signing secret")
        if self.kind is NotificationMode.PAGERDUTY and not self.routing_key:
            raise ValueError("a pagerduty target needs its routing key")

    @property
    def generation(self) -> str:
        """``snk_`` + 16 hex digits of HMAC-SHA256(secret, the URLs in order): equal iff the list
        and the secret are (one receiver: HMAC of its URL alone, as before lists). Another kind
        keys the HMAC with its name and adds its routing key, so a new kind, list or key is a
        new generation."""
        message = "\0".join(self.urls).encode("utf-8")
        if self.secret is not None and self.kind is NotificationMode.WEBHOOK:
            key = self.secret.key
        else:
            key = ("fleetd.sink." + self.kind.value).encode("utf-8")
            message += b"\0" + (self.routing_key or "").encode("utf-8")
        digest = hmac.new(key, message, hashlib.sha256).hexdigest()
        return "snk_" + digest[:16]


def resolve_sink(
    notifications: NotificationsConfig, environ: Mapping[str, str]
) -> SinkTarget | None:
    """The target the mode sends to, or ``None`` when notifications are disabled.

    Raises :class:`~fleetd.errors.ConfigError` naming the key (and the variable) when a variable
    is unset, its value unusable, or two receivers hold one URL — never showing a value.
    """
    mode = notifications.mode
    if not mode.sends:
        return None
    key = "webhookUrlEnvs" if notifications.webhook_url_envs is not None else "webhookUrlEnv"
    names: tuple[str | None, ...] = notifications.receiver_envs or (None,)
    urls: dict[str, str] = {}
    if mode is NotificationMode.PAGERDUTY and not notifications.receiver_envs:
        urls[PAGERDUTY_EVENTS_URL] = ""
        names = ()
    for name in names:
        url = _value(environ, name, key, mode).strip()
        other = urls.setdefault(url, name or "")
        if other != name:
            raise ConfigError(
                _KEY_PREFIX + key, f"environment variables {other} and {name} hold the same URL"
            )
    limit = notifications.request_timeout
    if mode is NotificationMode.PAGERDUTY:
        routing_key = _value(environ, notifications.routing_key_env, "routingKeyEnv", mode)
        return SinkTarget(urls=tuple(urls), limit=limit, kind=mode, routing_key=routing_key.strip())
    if mode is not NotificationMode.WEBHOOK:
        return SinkTarget(urls=tuple(urls), limit=limit, kind=mode)
    secret_text = _value(environ, notifications.secret_env, "secretEnv", mode)
    try:
        secret = WebhookSecret.parse(secret_text)
    except ValueError as error:
        raise ConfigError(
            _KEY_PREFIX + "secretEnv", f"environment variable {notifications.secret_env}: {error}"
        ) from None
    return SinkTarget(urls=tuple(urls), secret=secret, limit=limit)


def _value(environ: Mapping[str, str], name: str | None, key: str, mode: NotificationMode) -> str:
    if name is None:
        raise ConfigError(_KEY_PREFIX + key, f"required when mode is {mode.value}")
    value = environ.get(name)
    if not value:
        raise ConfigError(_KEY_PREFIX + key, f"environment variable {name} is not set")
    return value
