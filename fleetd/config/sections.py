"""The config sections other than health: API, herdr link, leads, profiles, worktrees, bridge,
inbox and journal.

Each class is one YAML section (camelCase keys there, snake_case here). Defaults are the spec's;
bounds that make a value meaningless are validation errors (every number has an upper bound,
see :mod:`fleetd.config.fields`), while the safety floors listed in
:mod:`fleetd.config.floors` clamp with a warning instead. Which keys need a restart is declared in
:data:`fleetd.config.model.RESTART_KEYS`; the rest apply live.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from fleetd.config.fields import (
    DAY,
    HOUR,
    AgentName,
    ConfigModel,
    EnvName,
    StrictBool,
    StrictInt,
    floored,
    load_context,
    mask_url,
    scheme_check,
)
from fleetd.text import git_name

__all__ = [
    "AgentKind",
    "AmqpConfig",
    "ApiConfig",
    "BridgeConfig",
    "HerdrConfig",
    "InboxBackend",
    "InboxConfig",
    "JournalConfig",
    "LeadConfig",
    "ProfileConfig",
    "PushConfig",
    "StateConfig",
    "WorktreesConfig",
]

DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
JOURNAL_FILE = "fleetd-journal.sqlite"
STATE_FILE = "fleetd-state.db"
NO_FILE_STATE_DIR = Path("var")
MAX_CHARS = 1_000_000
"""Upper bound of a character limit (a prompt, a pane scrape)."""
MAX_LOAD = 1000
"""Upper bound of a profile's ``maxLoad``."""
MAX_REPEATS = 100
"""Upper bound of a nudge or heartbeat count."""
MAX_BROKERS = 8
"""Most brokers ``inbox.amqp.urls`` may list (their index is a metric label)."""
MAX_CONTEXT_WINDOW = 100_000_000
"""Upper bound of a profile's ``contextWindow`` (the catalog reader's own bound)."""
MAX_RETENTION_DAYS = 3650
"""Upper bound of ``journal.retentionDays`` (ten years)."""


class AgentKind(StrEnum):
    """herdr's agent kind labels (``agent.start`` ``kind``)."""

    PI = "pi"
    CLAUDE = "claude"
    CODEX = "codex"
    GEMINI = "gemini"
    CURSOR = "cursor"
    DEVIN = "devin"
    AGY = "agy"
    CLINE = "cline"
    OMP = "omp"
    MASTRACODE = "mastracode"
    OPENCODE = "opencode"
    COPILOT = "copilot"
    KIMI = "kimi"
    KIRO = "kiro"
    DROID = "droid"
    AMP = "amp"
    GROK = "grok"
    HERMES = "hermes"
    KILO = "kilo"
    QODERCLI = "qodercli"
    MAKI = "maki"


class InboxBackend(StrEnum):
    MEMORY = "memory"
    AMQP = "amqp"


def _not_empty(value: Any) -> Any:
    """An empty path would be the config's own directory: refused, not guessed."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty (null for the default)")
    return value


def _beside_config(value: Path | None, info: ValidationInfo) -> Path | None:
    """Resolve a relative path against the config file's directory (when there is a file)."""
    context = load_context(info)
    if value is None or value.is_absolute() or context is None or context.base_dir is None:
        return value
    return context.base_dir / value


ConfigPath = Annotated[Path, BeforeValidator(_not_empty), AfterValidator(_beside_config)]

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def _host(value: str) -> str:
    """An address to bind: an IP address or a host name (its labels letters, digits and inner
    hyphens); what uvicorn could not even look up fails here, naming the key."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        labels = value.removesuffix(".").split(".")
        if len(value) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
            raise ValueError("must be an IP address or a host name") from None
    return value


def _ref(value: str) -> str:
    """A base ref git will read as a ref: never an option, never a NUL."""
    if not git_name(value):
        raise ValueError("must be a ref name, not an option (it starts with '-')")
    return value


class ApiConfig(ConfigModel):
    host: Annotated[str, Field(min_length=1), AfterValidator(_host)] = "127.0.0.1"
    port: Annotated[StrictInt, Field(ge=0, le=65535)] = 8765
    public_url: Annotated[str | None, AfterValidator(scheme_check("http", "https"))] = None
    max_prompt_chars: Annotated[StrictInt, Field(ge=1, le=MAX_CHARS)] = 100_000
    standby_port: Annotated[StrictInt | None, Field(ge=0, le=65535)] = None
    max_connections: Annotated[StrictInt, Field(ge=16, le=1_000_000)] = 1_000

    @field_validator("standby_port")
    @classmethod
    def _not_the_port(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value != 0 and value == info.data.get("port"):
            raise ValueError("must differ from api.port (a standby answers there while it waits)")
        return value

    @property
    def standby_listen_port(self) -> int:
        """Where a standby answers while it waits: ``standbyPort``, else the port after ``port``
        (``port`` 0 picks any). Once it takes over it serves on ``port``."""
        if self.standby_port is not None:
            return self.standby_port
        return self.port + 1 if 0 < self.port < 65535 else 0

    @property
    def base_url(self) -> str:
        """The URL members use to reach fleetd: ``publicUrl``, else ``http://host:port``."""
        if self.public_url is not None:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


class HerdrConfig(ConfigModel):
    socket_path: ConfigPath | None = None
    connect_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 2000
    request_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 5000
    status_poll_interval_ms: Annotated[StrictInt, Field(ge=50, le=60_000)] = 250

    @property
    def connect_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.connect_timeout_ms)

    @property
    def request_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.request_timeout_ms)

    @property
    def status_poll_interval(self) -> timedelta:
        return timedelta(milliseconds=self.status_poll_interval_ms)


class LeadConfig(ConfigModel):
    """A configured lead: its fleet name, the herdr agent it runs as, and its token's variable."""

    name: AgentName
    agent: AgentName
    token_env: EnvName

    @model_validator(mode="before")
    @classmethod
    def _agent_defaults_to_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("agent") is None and "name" in data:
            return {**data, "agent": data["name"]}
        return data


class ProfileConfig(ConfigModel):
    """How to start a member: herdr kind, extra argv, model and provider, its load cap, and the
    context window its model is configured with (the provider's catalog, when it states one,
    overrides it: see :mod:`fleetd.catalog`)."""

    kind: AgentKind
    args: tuple[str, ...] = ()
    model: str | None = None
    provider: str | None = None
    max_load: Annotated[StrictInt, Field(ge=1, le=MAX_LOAD)] | None = None
    context_window: Annotated[StrictInt, Field(ge=1, le=MAX_CONTEXT_WINDOW)] | None = None


class WorktreesConfig(ConfigModel):
    root: ConfigPath = NO_FILE_STATE_DIR / "worktrees"
    default_repo: ConfigPath | None = None
    default_base: Annotated[str, Field(min_length=1), AfterValidator(_ref)] = "HEAD"


class PushConfig(ConfigModel):
    max_nudges_per_item: Annotated[
        StrictInt, Field(le=MAX_REPEATS), floored("bridge.push.maxNudgesPerItem")
    ] = 3
    heartbeat_interval_seconds: Annotated[
        StrictInt, Field(le=DAY), floored("bridge.push.heartbeatIntervalSeconds")
    ] = 600
    heartbeat_max: Annotated[StrictInt, Field(ge=0, le=MAX_REPEATS)] = 3

    @property
    def heartbeat_interval(self) -> timedelta:
        return timedelta(seconds=self.heartbeat_interval_seconds)


class BridgeConfig(ConfigModel):
    readiness_grace_seconds: Annotated[
        StrictInt, Field(le=HOUR), floored("bridge.readinessGraceSeconds")
    ] = 120
    submit_retry_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 1500
    max_scrape_chars: Annotated[StrictInt, Field(ge=1, le=MAX_CHARS)] = 4000
    prompt_retries: Annotated[StrictInt, Field(ge=0, le=100)] = 8
    prompt_retry_base_ms: Annotated[StrictInt, Field(ge=50, le=30_000)] = 250
    ticket_retention_seconds: Annotated[
        StrictInt, Field(le=24 * HOUR), floored("bridge.ticketRetentionSeconds")
    ] = HOUR
    tickets_kept: Annotated[StrictInt, Field(le=1_000_000), floored("bridge.ticketsKept")] = 10_000
    max_queued_sends: Annotated[StrictInt, Field(ge=1, le=10_000)] = 100
    release_on_stop: StrictBool = False
    push: PushConfig = PushConfig()

    @property
    def readiness_grace(self) -> timedelta:
        return timedelta(seconds=self.readiness_grace_seconds)

    @property
    def submit_retry(self) -> timedelta:
        return timedelta(milliseconds=self.submit_retry_ms)

    @property
    def prompt_retry_base(self) -> timedelta:
        return timedelta(milliseconds=self.prompt_retry_base_ms)

    @property
    def ticket_retention(self) -> timedelta:
        return timedelta(seconds=self.ticket_retention_seconds)


_AmqpUrl = Annotated[SecretStr, AfterValidator(scheme_check("amqp", "amqps"))]


class AmqpConfig(ConfigModel):
    """The broker: one ``url``, or ``urls``, an ordered list of brokers (primary first) that
    fleetd fails over between; set one of the two. URLs are secrets: they print masked and
    compare by value. One URL (either key) is a single broker, exactly as before ``urls``
    existed; the list is meant for nodes of one cluster (or addresses of one broker), see
    :mod:`fleetd.inbox.amqp_link`."""

    url: _AmqpUrl = SecretStr(DEFAULT_AMQP_URL)
    urls: Annotated[tuple[_AmqpUrl, ...], Field(min_length=1, max_length=MAX_BROKERS)] | None = None
    connect_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 10_000
    operation_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 10_000

    @model_validator(mode="before")
    @classmethod
    def _one_of_url_and_urls(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("url") is not None and data.get("urls") is not None:
            raise ValueError("inbox.amqp.url and inbox.amqp.urls are both set; set one of them")
        return data

    @field_validator("urls")
    @classmethod
    def _distinct(cls, value: tuple[SecretStr, ...] | None) -> tuple[SecretStr, ...] | None:
        if value is not None and len({url.get_secret_value() for url in value}) != len(value):
            raise ValueError("each broker may be listed once")
        return value

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The brokers in failover order: ``urls``, else the one ``url``."""
        chosen = self.urls if self.urls is not None else (self.url,)
        return tuple(url.get_secret_value() for url in chosen)

    @property
    def connect_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.connect_timeout_ms)

    @property
    def operation_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.operation_timeout_ms)

    @field_serializer("url", when_used="json")
    def _masked(self, value: SecretStr) -> str:
        return mask_url(value.get_secret_value())

    @field_serializer("urls", when_used="json")
    def _masked_list(self, value: tuple[SecretStr, ...] | None) -> list[str] | None:
        return None if value is None else [mask_url(url.get_secret_value()) for url in value]


class InboxConfig(ConfigModel):
    backend: InboxBackend = InboxBackend.MEMORY
    amqp: AmqpConfig = AmqpConfig()


_SQLITE = "sqlite:///"


def _sqlite_beside(url: Any, base: Path | None) -> Any:
    """``url`` with a relative SQLite path resolved beside the config (``base``), as every other
    relative path of the file is; anything else as it is."""
    if not isinstance(url, str) or base is None or not url.startswith(_SQLITE):
        return url
    path, mark, query = url[len(_SQLITE) :].partition("?")
    if not path or path.startswith("/") or path == ":memory:":
        return url
    return f"{_SQLITE}{base / path}{mark}{query}"


def _journal_url(value: Any, info: ValidationInfo) -> Any:
    """The URL ``journal.urlEnv`` names, else ``url`` as written, else (``null``) the SQLite file
    beside the config (``./var`` without a file)."""
    context = load_context(info)
    variable = info.data.get("url_env")
    if variable is not None:
        if value is not None:
            raise ValueError("set url or urlEnv, not both")
        if context is None or context.environ is None:
            raise ValueError(f"urlEnv needs the environment to read {variable}")
        return _sqlite_beside(context.environ.get(variable), context.base_dir)
    base = context.base_dir if context is not None and context.base_dir is not None else None
    if value is not None:
        return _sqlite_beside(value, base)
    return f"sqlite:///{(base or NO_FILE_STATE_DIR) / JOURNAL_FILE}"


_journal_schemes = scheme_check("sqlite", "postgresql")


def _state_url(value: Any, info: ValidationInfo) -> Any:
    """``url`` as written, else (``null``) the SQLite file beside the config (``./var`` without
    a file)."""
    context = load_context(info)
    base = context.base_dir if context is not None and context.base_dir is not None else None
    if value is not None:
        return _sqlite_beside(value, base)
    return f"sqlite:///{(base or NO_FILE_STATE_DIR) / STATE_FILE}"


class StateConfig(ConfigModel):
    """Where the bridge's state store lives (what a restart needs: members, token hashes, tickets
    and open turns) and how long one of its operations may take. After loading, ``url`` is always
    concrete (SQLite or PostgreSQL) and prints masked."""

    url: Annotated[SecretStr, BeforeValidator(_state_url), AfterValidator(_journal_schemes)] = (
        Field(default=None, validate_default=True)
    )
    operation_timeout_ms: Annotated[StrictInt, Field(ge=100, le=60_000)] = 2000
    standby: StrictBool = False  # ``fleetd serve --standby``: wait for a held lock, then take over

    @field_serializer("url", when_used="json")
    def _masked(self, value: SecretStr) -> str:
        return mask_url(value.get_secret_value())

    @property
    def operation_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.operation_timeout_ms)


class JournalConfig(ConfigModel):
    """Where the incident journal lives, how long one of its operations may take and how long a
    resolved incident is kept. After loading, ``url`` is always concrete (SQLite or PostgreSQL)
    and may hold a password: it prints masked. ``urlEnv`` names the environment variable that
    holds the URL, so a password never has to sit in the file; it must be set when the config
    loads, and then ``url`` must be left out (``null``)."""

    url_env: EnvName | None = None
    url: Annotated[SecretStr, BeforeValidator(_journal_url), AfterValidator(_journal_schemes)] = (
        Field(default=None, validate_default=True)
    )
    operation_timeout_ms: Annotated[
        StrictInt, Field(le=60_000), floored("journal.operationTimeoutMs")
    ] = 5000
    retention_days: Annotated[
        StrictInt, Field(le=MAX_RETENTION_DAYS), floored("journal.retentionDays")
    ] = 30

    @property
    def operation_timeout(self) -> timedelta:
        return timedelta(milliseconds=self.operation_timeout_ms)

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self.retention_days)

    @field_validator("url_env")
    @classmethod
    def _variable_holds_a_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        context = load_context(info)
        if value is None or context is None or context.environ is None:
            return value
        url = context.environ.get(value)
        if not url:
            raise ValueError(f"environment variable {value} is not set")
        try:
            _journal_schemes(url)
        except ValueError:
            raise ValueError(
                f"environment variable {value} must hold a sqlite:/// or postgresql:// URL"
            ) from None
        return value

    @field_serializer("url", when_used="json")
    def _masked(self, value: SecretStr) -> str:
        return mask_url(value.get_secret_value())
