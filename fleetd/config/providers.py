"""The model providers and the catalog probe's settings (Model health).

``providers`` lists each provider a profile's ``provider`` may name: its ``name`` (a metric label),
the ``baseUrl`` of its OpenAI-compatible API (the probe reads ``{baseUrl}/models``) and, when the
catalog needs a key, ``apiKeyEnv``, the environment variable holding it — the file never holds
the key. A profile whose provider is not listed here is not probed (its verdict stays unknown).

``modelHealth`` tunes the probe: how often each provider's catalog is read (never more often than
every five minutes, the probe's compiled floor) and the watchdog of one catalog request.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from fleetd.config.fields import DAY, ConfigModel, EnvName, StrictInt, floored, scheme_check

__all__ = ["ModelHealthConfig", "ProviderConfig", "ProviderName"]

ProviderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
"""A provider's name; it appears as a metric label, so it stays short and plain."""


def _no_credentials(value: str) -> str:
    """A base URL must not carry a user or password: keys come from ``apiKeyEnv``."""
    try:
        parts = urlsplit(value)
        has_userinfo = "@" in parts.netloc
        host = parts.hostname
    except ValueError:
        raise ValueError("not a URL") from None
    if has_userinfo:
        raise ValueError("must not carry credentials; name the key's variable in apiKeyEnv")
    if not host:
        raise ValueError("needs a host")
    return value.rstrip("/")


class ProviderConfig(ConfigModel):
    """One model provider: where its catalog is and which variable holds its key."""

    name: ProviderName
    base_url: Annotated[
        str, AfterValidator(scheme_check("http", "https")), AfterValidator(_no_credentials)
    ]
    api_key_env: EnvName | None = None


class ModelHealthConfig(ConfigModel):
    """The catalog probe: its cadence (floored at five minutes) and one request's limit."""

    probe_interval_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("modelHealth.probeIntervalSeconds")
    ] = 300
    request_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 10_000

    @property
    def probe_interval(self) -> timedelta:
        return timedelta(seconds=self.probe_interval_seconds)

    @property
    def request_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.request_timeout_ms)
