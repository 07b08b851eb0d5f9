"""The whole configuration: :class:`FleetdConfig`, the M4 §11 health block, and key classes.

Every health key is hot: the monitor reads :class:`~fleetd.config.ref.ConfigRef` on each tick or
notification. Keys that bind sockets, pick adapters or place files on disk are restart-only;
:data:`RESTART_KEYS` names them so a reload can report them as pending while keeping the running
value. Everything not listed there applies live.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Final
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from fleetd.config.fields import (
    DAY,
    HOUR,
    ConfigModel,
    EnvName,
    ProfileName,
    StrictBool,
    StrictInt,
    floored,
    load_context,
)
from fleetd.config.providers import ModelHealthConfig, ProviderConfig
from fleetd.config.secrets import WebhookSecret
from fleetd.config.sections import (
    ApiConfig,
    BridgeConfig,
    HerdrConfig,
    InboxConfig,
    JournalConfig,
    LeadConfig,
    ProfileConfig,
    StateConfig,
    WorktreesConfig,
)

__all__ = [
    "MAX_RECEIVERS",
    "MIN_ALERTMANAGER_REPOST",
    "PAGERDUTY_EVENTS_URL",
    "RESTART_KEYS",
    "FleetdConfig",
    "HealthConfig",
    "NotificationMode",
    "NotificationsConfig",
    "RepairConfig",
]

RESTART_KEYS: Final = frozenset(
    {
        "instance",  # the state store, its lock and the journal's rows are the instance's
        "api.host",
        "api.port",
        "api.publicUrl",
        "api.standbyPort",
        "herdr.socketPath",
        "herdr.statusPollIntervalMs",
        "worktrees.root",
        "inbox.backend",
        "journal.url",
        "journal.urlEnv",
        "state.url",
        "state.standby",
    }
)
"""Dotted keys whose change takes effect only after a restart; every other key is hot."""

MAX_RECEIVERS: Final = 8
"""Most receivers ``health.notifications.webhookUrlEnvs`` may list (the index is a label)."""


class NotificationMode(StrEnum):
    """Where a person's notifications go: nowhere, or one destination kind (its receivers are
    ``webhookUrlEnvs``, in failover order, in every kind)."""

    DISABLED = "disabled"
    WEBHOOK = "webhook"
    ALERTMANAGER = "alertmanager"
    PAGERDUTY = "pagerduty"
    SLACK = "slack"

    @property
    def sends(self) -> bool:
        """Whether a person can be told in this mode (any kind but ``disabled``)."""
        return self is not NotificationMode.DISABLED


PAGERDUTY_EVENTS_URL: Final = "https://events.pagerduty.com/v2/enqueue"
"""Where pagerduty mode sends when ``webhookUrlEnvs`` names no receiver."""
MIN_ALERTMANAGER_REPOST: Final = 10
"""The shortest re-post interval of an open alert in alertmanager mode, in seconds."""
_ROUTING_KEY: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


class NotificationsConfig(ConfigModel):
    """The human sink. Config holds variable names only; webhook mode needs the variables set in
    the environment: each receiver's URL (``http``/``https``) and the Standard Webhooks signing
    secret (``whsec_<base64>``, at least 24 bytes). A bad value is named by its key and variable,
    never shown.

    Receivers are ``webhookUrlEnvs``, an ordered list (primary first, at most
    :data:`MAX_RECEIVERS`, each variable once and each URL once) that the delivery worker fails
    over between, or ``webhookUrlEnv``, one receiver (exactly a one-element list); set one of the
    two. :attr:`receiver_envs` is the list either way."""

    mode: NotificationMode = NotificationMode.DISABLED
    # Declared before webhookUrlEnv so that its validator can see whether a list was given.
    webhook_url_envs: (
        Annotated[tuple[EnvName, ...], Field(min_length=1, max_length=MAX_RECEIVERS)] | None
    ) = Field(default=None, validate_default=True)
    webhook_url_env: EnvName | None = Field(default=None, validate_default=True)
    secret_env: EnvName | None = Field(default=None, validate_default=True)
    routing_key_env: EnvName | None = Field(default=None, validate_default=True)
    request_timeout_ms: Annotated[StrictInt, Field(ge=1000, le=30_000)] = 10_000
    alertmanager_repost_seconds: Annotated[
        StrictInt, Field(ge=MIN_ALERTMANAGER_REPOST, le=HOUR)
    ] = 60

    @model_validator(mode="before")
    @classmethod
    def _one_of_url_env_and_url_envs(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and _given(data, "webhookUrlEnv", "webhook_url_env")
            and _given(data, "webhookUrlEnvs", "webhook_url_envs")
        ):
            raise ValueError(
                "health.notifications.webhookUrlEnv and health.notifications.webhookUrlEnvs are "
                "both set; set one of them"
            )
        return data

    @field_validator("webhook_url_envs")
    @classmethod
    def _each_receiver_holds_a_url(
        cls, value: tuple[str, ...] | None, info: ValidationInfo
    ) -> tuple[str, ...] | None:
        if value is None:
            return None
        if len(set(value)) != len(value):
            raise ValueError("each environment variable may be listed once")
        seen: dict[str, str] = {}
        for name in value:
            text = _receiver_url(name, info)
            if text is None:
                continue
            other = seen.setdefault(text.strip(), name)
            if other != name:
                raise ValueError(f"environment variables {other} and {name} hold the same URL")
        return value

    @field_validator("webhook_url_env")
    @classmethod
    def _webhook_needs_its_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and (
            "webhook_url_envs" not in info.data  # the list was refused: that error says why
            or info.data["webhook_url_envs"] is not None
        ):
            return None
        _receiver_url(value, info)
        return value

    @field_validator("secret_env")
    @classmethod
    def _webhook_needs_its_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("mode") is not NotificationMode.WEBHOOK:
            return value
        text = _required_variable(value, info)
        if text is not None:
            try:
                WebhookSecret.parse(text)
            except ValueError as error:
                raise ValueError(f"environment variable {value}: {error}") from None
        return value

    @field_validator("routing_key_env")
    @classmethod
    def _pagerduty_needs_its_routing_key(
        cls, value: str | None, info: ValidationInfo
    ) -> str | None:
        if info.data.get("mode") is not NotificationMode.PAGERDUTY:
            return value
        text = _required_variable(value, info)
        if text is not None and not _ROUTING_KEY.fullmatch(text.strip()):
            raise ValueError(
                f"environment variable {value} does not hold a PagerDuty routing key "
                "(letters, digits, '-' and '_', at most 128)"
            )
        return value

    @property
    def receiver_envs(self) -> tuple[str, ...]:
        """The receivers' URL variables in failover order (empty when none is named)."""
        if self.webhook_url_envs is not None:
            return self.webhook_url_envs
        return () if self.webhook_url_env is None else (self.webhook_url_env,)

    @property
    def request_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.request_timeout_ms)

    @property
    def refresh(self) -> timedelta | None:
        """How often an open incident is re-posted to a sink that forgets alerts that stop
        arriving (alertmanager mode), ``None`` in every other mode."""
        if self.mode is not NotificationMode.ALERTMANAGER:
            return None
        return timedelta(seconds=self.alertmanager_repost_seconds)


def _given(data: dict[str, Any], alias: str, name: str) -> bool:
    """Whether ``data`` sets the key, by its YAML name or (built in Python) its field name."""
    return data.get(alias) is not None or data.get(name) is not None


def _receiver_url(name: str | None, info: ValidationInfo) -> str | None:
    """In a sending mode (with the environment known): the URL variable ``name`` holds, checked.
    Pagerduty mode may name none (it sends to :data:`PAGERDUTY_EVENTS_URL`)."""
    if name is None and info.data.get("mode") is NotificationMode.PAGERDUTY:
        return None
    text = _required_variable(name, info)
    if text is not None and not _is_http_url(text):
        raise ValueError(f"environment variable {name} does not hold an http(s) URL")
    return text


def _is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text.strip())
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unparsable netloc, e.g. an unclosed IPv6 bracket
        return False


def _required_variable(name: str | None, info: ValidationInfo) -> str | None:
    """In a sending mode: ``name`` must be given and (when the environment is known) set; returns
    the variable's value for a format check, ``None`` when there is nothing to check."""
    mode = info.data.get("mode")
    if not isinstance(mode, NotificationMode) or not mode.sends:
        return None
    if name is None:
        raise ValueError(f"required when mode is {mode.value}")
    context = load_context(info)
    if context is None or context.environ is None:
        return None
    text = context.environ.get(name)
    if not text:
        raise ValueError(f"environment variable {name} is not set (mode is {mode.value})")
    return text


class RepairConfig(ConfigModel):
    """Which agent kinds lost-boundary repair may rebuild a result for (M4 §8.2).

    Claude Code is always on and OpenCode always off; Codex only with ``codex``: its answers and
    its info notices share one marker and differ only in colour, which a text read loses.
    """

    codex: StrictBool = False


class HealthConfig(ConfigModel):
    """M4 §11. Floors clamp with a warning (see :mod:`fleetd.config.floors`); a duration above
    its upper bound (an hour for a cadence, a day for a waiting period) is an error."""

    enabled: StrictBool = False
    snapshot_interval_seconds: Annotated[
        StrictInt, Field(le=HOUR), floored("health.snapshotIntervalSeconds")
    ] = 30
    working_suspect_after_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("health.workingSuspectAfterSeconds")
    ] = 600
    pane_probe_interval_seconds: Annotated[
        StrictInt, Field(le=HOUR), floored("health.paneProbeIntervalSeconds")
    ] = 60
    lead_unresponsive_after_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("health.leadUnresponsiveAfterSeconds")
    ] = 300
    human_repeat_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("health.humanRepeatSeconds")
    ] = 3600
    capacity_long_idle_after_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("health.capacityLongIdleAfterSeconds")
    ] = 900
    include_pane_excerpt: StrictBool = False
    notifications: NotificationsConfig = NotificationsConfig()
    repair: RepairConfig = RepairConfig()

    @property
    def snapshot_interval(self) -> timedelta:
        return timedelta(seconds=self.snapshot_interval_seconds)

    @property
    def working_suspect_after(self) -> timedelta:
        return timedelta(seconds=self.working_suspect_after_seconds)

    @property
    def pane_probe_interval(self) -> timedelta:
        return timedelta(seconds=self.pane_probe_interval_seconds)

    @property
    def lead_unresponsive_after(self) -> timedelta:
        return timedelta(seconds=self.lead_unresponsive_after_seconds)

    @property
    def human_repeat(self) -> timedelta:
        return timedelta(seconds=self.human_repeat_seconds)

    @property
    def capacity_long_idle_after(self) -> timedelta:
        return timedelta(seconds=self.capacity_long_idle_after_seconds)


def _no_long_run(value: str) -> str:
    if re.search(r"[A-Za-z0-9]{16}", value):
        raise ValueError("must not hold a run of 16 letters or digits")
    return value


InstanceName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"),
    AfterValidator(_no_long_run),
]
"""This fleetd's name in outbound events (``fleetdInstance``): a plain name of at most 64
characters with no run of 16 letters or digits (the payload's name grammar, which keeps tokens
out)."""


class FleetdConfig(ConfigModel):
    """The validated configuration. Build it with :func:`fleetd.config.load_config`."""

    instance: InstanceName | None = None  # default: the host name (see runtime.escalation)
    api: ApiConfig = ApiConfig()
    herdr: HerdrConfig = HerdrConfig()
    operator_token_env: EnvName | None = None
    leads: tuple[LeadConfig, ...] = ()
    profiles: Mapping[ProfileName, ProfileConfig] = Field(default_factory=dict)
    worktrees: WorktreesConfig = WorktreesConfig()
    bridge: BridgeConfig = BridgeConfig()
    inbox: InboxConfig = InboxConfig()
    journal: JournalConfig = JournalConfig()
    state: StateConfig = StateConfig()
    health: HealthConfig = HealthConfig()
    providers: tuple[ProviderConfig, ...] = ()
    model_health: ModelHealthConfig = ModelHealthConfig()

    @field_validator("providers")
    @classmethod
    def _provider_names_unique(
        cls, value: tuple[ProviderConfig, ...]
    ) -> tuple[ProviderConfig, ...]:
        names = [provider.name for provider in value]
        if len(set(names)) != len(names):
            raise ValueError("provider names must be unique")
        return value

    def provider(self, name: str | None) -> ProviderConfig | None:
        """The configured provider called ``name``, if any."""
        return next((p for p in self.providers if p.name == name), None)

    def lead(self, name: str) -> LeadConfig | None:
        """The configured lead called ``name``, if any."""
        return next((lead for lead in self.leads if lead.name == name), None)
