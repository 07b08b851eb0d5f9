"""Building blocks of the config model: the base class, strict scalar types and the floor clamp.

Every section is a frozen pydantic model that forbids unknown keys and speaks camelCase on the
wire (the spec's YAML spelling) while Python code uses snake_case names. The loader validates by
alias only, so a snake_case key in YAML is an unknown key, not a silent synonym.

Integers and booleans are strict: YAML already types them, and ``port: "8765"`` or ``enabled: 1``
is more likely a mistake than an intent. Environment overrides arrive as text and are converted
to the target type before validation (see :mod:`fleetd.config.env`).

Every number has an upper bound as well as a lower one. A duration is at most :data:`HOUR` or
:data:`DAY` (whichever still makes sense for its rule), so ``timedelta`` arithmetic in the loops
can never overflow; a count is at most a bound no fleet approaches, so it stays a plain JSON
integer. A value above its bound is an error naming the key, never clamped.

Validation receives a :class:`LoadContext` that carries what the file alone cannot: the
environment (webhook mode needs its variable present), the directory relative paths are resolved
against, and the list that floor clamps append their one warning to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, ValidationInfo
from pydantic.alias_generators import to_camel

from fleetd.config.floors import FLOORS

__all__ = [
    "DAY",
    "HOUR",
    "AgentName",
    "ConfigModel",
    "EnvName",
    "LoadContext",
    "ProfileName",
    "StrictBool",
    "StrictInt",
    "floored",
    "load_context",
    "mask_url",
    "scheme_check",
]

HOUR = 3600
"""Upper bound, in seconds, of a cadence or a grace period (a tick, a probe, readiness)."""

DAY = 86_400
"""Upper bound, in seconds, of a waiting period or a repeat interval."""

StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]

AgentName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
"""A herdr agent name (herdr's own rule), also used for lead names."""

EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
"""The name of an environment variable; config holds names, never secret values."""

ProfileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
"""A profile name; it appears as a metric label, so it stays short and plain."""


@dataclass(slots=True, kw_only=True)
class LoadContext:
    """What validation needs beyond the document; ``warnings`` collects floor clamps."""

    environ: Mapping[str, str] | None = None
    base_dir: Path | None = None
    warnings: list[str] = field(default_factory=list)


def load_context(info: ValidationInfo) -> LoadContext | None:
    """The :class:`LoadContext` of this validation, or ``None`` for plain construction."""
    return info.context if isinstance(info.context, LoadContext) else None


class ConfigModel(BaseModel):
    """Base of every section: frozen, closed, camelCase aliases, inputs kept out of errors."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        hide_input_in_errors=True,
    )


def floored(key: str) -> AfterValidator:
    """A validator that raises a value below ``FLOORS[key]`` to the floor and records one warning.

    The clamp lives in the type, so even a config built in Python cannot go below the floor.
    """
    floor = FLOORS[key]

    def clamp(value: int, info: ValidationInfo) -> int:
        if value >= floor:
            return value
        context = load_context(info)
        if context is not None:
            context.warnings.append(f"{key}={value} is below its floor {floor}; using {floor}")
        return floor

    return AfterValidator(clamp)


#: Query parameters that carry a secret in a database or broker URL (libpq takes ``password``
#: and ``sslpassword`` there, as PostgreSQL's own keyword/value form does).
_SECRET_PARAMS = frozenset({"password", "sslpassword", "pass", "passwd", "secret", "token"})


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` — the one before ``@`` and any query
    parameter named like one; an unparsable URL is masked entirely."""
    try:
        parts = urlsplit(url)
        password = parts.password
        hostinfo = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "***"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    secret_query = any(name.lower() in _SECRET_PARAMS for name, _ in pairs)
    if password is None and not secret_query:
        return url
    if password is not None:
        user = parts.username or ""
        parts = parts._replace(netloc=f"{user}:***@{hostinfo}")
    if secret_query:
        masked = [(n, "***" if n.lower() in _SECRET_PARAMS else v) for n, v in pairs]
        parts = parts._replace(query=urlencode(masked, safe="*"))
    return urlunsplit(parts)


def scheme_check(*schemes: str) -> Callable[[Any], Any]:
    """A validator body accepting a URL (text or secret) whose scheme (before any ``+driver``) is
    one of ``schemes`` and whose port, if any, is a number in 0-65535; the message never
    repeats the URL."""

    def check(value: Any) -> Any:
        if value is None:
            return value
        text = value if isinstance(value, str) else value.get_secret_value()
        scheme = text.partition("://")[0] if "://" in text else ""
        if scheme.partition("+")[0] not in schemes:
            raise ValueError(f"scheme must be one of {', '.join(schemes)}")
        try:  # the port is read when the URL is used: an impossible one is refused now
            _ = urlsplit(text).port
        except ValueError:
            raise ValueError("port must be a number in 0-65535") from None
        return value

    return check
