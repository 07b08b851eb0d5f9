"""Reading and validating the config file: the one edge where configuration enters fleetd.

The document is read once, merged with ``FLEETD_*`` overrides, validated into a frozen
:class:`~fleetd.config.model.FleetdConfig` and returned with the warnings validation produced (a
floor clamp, a disabled human sink). Any problem becomes one :class:`~fleetd.errors.ConfigError`
naming the dotted key (or the file and line for YAML that does not parse). Error and warning text
never carries a value that might be a secret: pydantic inputs are hidden, YAML errors keep only
their problem and line.

YAML nested deeper than :data:`MAX_NESTING` levels is refused while it is read (no config key is
more than a few levels deep, and the YAML reader would otherwise recurse until Python gives up);
so is a document of more than :data:`MAX_VALUES` values once its aliases are expanded (a few
nested aliases would otherwise stand for billions of values).

Each token variable the config names (``leads[i].tokenEnv``, ``operatorTokenEnv``) must hold a
token: set, without whitespace, and not shared with another identity. Otherwise that caller could
never authenticate, or two callers would be one, so the config is refused naming the key.

:func:`load_config` is the edge: it logs the warnings. The ``parse_*`` functions do the same
work silently for callers that report warnings themselves (``check-config``, reloads).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fleetd.config.env import apply_env_overrides
from fleetd.config.fields import ConfigModel, LoadContext
from fleetd.config.keys import dotted_key
from fleetd.config.model import FleetdConfig
from fleetd.errors import ConfigError

__all__ = [
    "EMPTY_FILE",
    "MAX_NESTING",
    "MAX_VALUES",
    "FileFingerprint",
    "LoadedConfig",
    "load_config",
    "parse_config",
    "parse_config_bytes",
    "parse_config_file",
    "read_config_bytes",
]

_log = logging.getLogger("fleetd.config")
_NO_FILE = "<config>"

MAX_NESTING = 32
"""Deepest nesting of mappings and lists a config file may have."""

MAX_VALUES = 10_000
"""Most values (mappings, lists, scalars; an alias counts each time) a config file may hold."""

EMPTY_FILE = (
    "the file holds no settings (it is empty or only comments); "
    "list at least the leads (see fleetd.example.yaml)"
)
"""Why a config file with no settings is refused, at start and on a reload."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileFingerprint:
    """What a reload compares to decide whether the file changed."""

    path: Path
    mtime_ns: int
    size: int
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedConfig:
    """A validated config, the warnings its validation produced, and the file it came from."""

    config: FleetdConfig
    warnings: tuple[str, ...] = ()
    source: FileFingerprint | None = None


def load_config(path: Path | None, environ: Mapping[str, str]) -> LoadedConfig:
    """Load ``path`` (or defaults when ``None``) with ``environ`` overrides; log each warning."""
    loaded = parse_config(None, environ) if path is None else parse_config_file(path, environ)
    for warning in loaded.warnings:
        _log.warning("%s", warning)
    return loaded


def parse_config_file(path: Path, environ: Mapping[str, str]) -> LoadedConfig:
    """Read and validate ``path`` without logging."""
    data, fingerprint = read_config_bytes(path)
    return parse_config_bytes(data, environ, path=path, fingerprint=fingerprint)


#: A config file is a few kilobytes; past this it is refused before it is read whole or parsed
#: (parsing a file of megabytes blocks the service for seconds, on every reload).
MAX_CONFIG_BYTES = 1024 * 1024


def read_config_bytes(path: Path) -> tuple[bytes, FileFingerprint]:
    """The file's bytes and their fingerprint (stat taken before the read); a file larger than
    :data:`MAX_CONFIG_BYTES` is refused."""
    too_large = f"larger than {MAX_CONFIG_BYTES} bytes: not a config file"
    try:
        stat = path.stat()
        if stat.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(str(path), too_large)
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_CONFIG_BYTES:  # grew after the stat
        raise ConfigError(str(path), too_large)
    fingerprint = FileFingerprint(
        path=path,
        mtime_ns=stat.st_mtime_ns,
        size=stat.st_size,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return data, fingerprint


def parse_config_bytes(
    data: bytes,
    environ: Mapping[str, str],
    *,
    path: Path,
    fingerprint: FileFingerprint | None = None,
) -> LoadedConfig:
    """Validate the YAML ``data`` of the file at ``path``; relative paths resolve beside it.

    A file that holds no settings (no bytes, only blanks or comments, or an empty ``{}``) is
    refused, at start as on a reload: it is a mistake (a wrong path, a file caught mid-write),
    never a request for the defaults, which run without ``--config``.
    """
    document = _parse_yaml(data, str(path))
    _check_shape(document, str(path))
    if document is None or (isinstance(document, Mapping) and not document):  # nothing, or {}
        raise ConfigError(str(path), EMPTY_FILE)
    if not isinstance(document, Mapping):
        raise ConfigError(str(path), "the top level must be a mapping of sections")
    loaded = parse_config(document, environ, base_dir=path.absolute().parent)
    return dataclasses.replace(loaded, source=fingerprint)


def parse_config(
    document: Mapping[str, Any] | None,
    environ: Mapping[str, str],
    *,
    base_dir: Path | None = None,
) -> LoadedConfig:
    """Validate an already-parsed document. ``base_dir`` is the config file's directory, if any."""
    raw = apply_env_overrides(document or {}, environ)
    _drop_empty_sections(raw, FleetdConfig)
    if base_dir is not None:
        # Without a file the model's defaults live under ./var; with one, beside the file.
        raw.setdefault("worktrees", {}).setdefault("root", "worktrees")
        raw.setdefault("journal", {}).setdefault("url", None)
        raw.setdefault("state", {}).setdefault("url", None)
    context = LoadContext(environ=environ, base_dir=base_dir)
    try:
        config = FleetdConfig.model_validate(raw, context=context, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise _config_error(exc) from None
    _check_leads(config)
    _check_tokens(config, environ)
    warnings = list(context.warnings)
    coverage = _coverage_warning(config) if config.health.enabled else None
    if coverage is not None:
        warnings.append(coverage)
    return LoadedConfig(config=config, warnings=tuple(warnings))


def _coverage_warning(config: FleetdConfig) -> str | None:
    """The one startup (and reload) WARN of §10.2: with detection on and no human sink, coverage
    is partial (None in a sending mode: a person is notified when no lead can act)."""
    mode = config.health.notifications.mode
    if mode.sends:
        return None
    text = f"health.notifications.mode={mode.value}: "
    text += "human escalation is unavailable; fleet health coverage is partial"
    if len(config.leads) < 2:  # a peer needs a second lead
        text += "; with a single lead, a lead failure has no active notification or recovery"
    return text


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key repeated in one mapping instead of keeping the last, and
    nesting deeper than :data:`MAX_NESTING`."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING + 1:  # the document itself is the first node
                mark = parent.start_mark if parent is not None else None
                problem = f"nested deeper than {MAX_NESTING} levels"
                raise yaml.composer.ComposerError(None, None, problem, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, str | int | float | bool):
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(data: bytes, name: str) -> Any:
    try:
        return yaml.load(data, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ConfigError(name, f"{where}{exc.problem or 'malformed YAML'}") from None
    except yaml.YAMLError:
        raise ConfigError(name, "not readable as YAML text") from None


def _check_shape(document: Any, name: str) -> None:
    """Refuse a document deeper than :data:`MAX_NESTING` or larger than :data:`MAX_VALUES` as its
    aliases expand it (a recursive alias is infinitely deep). Stops at the first excess."""
    pending: list[tuple[Any, int]] = [(document, 0)]
    count = 0
    while pending:
        node, depth = pending.pop()
        count += 1
        if count > MAX_VALUES:
            raise ConfigError(name, f"more than {MAX_VALUES} values once aliases are expanded")
        if depth > MAX_NESTING:
            raise ConfigError(name, f"nested deeper than {MAX_NESTING} levels")
        if isinstance(node, Mapping):
            pending.extend((child, depth + 1) for pair in node.items() for child in pair)
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)


def _drop_empty_sections(raw: dict[str, Any], model: type[ConfigModel]) -> None:
    """Treat ``health:`` with every key commented out (``None``) as an empty section."""
    for name, field in model.model_fields.items():
        key = field.alias or name
        child = field.annotation
        if not (isinstance(child, type) and issubclass(child, ConfigModel)) or key not in raw:
            continue
        if raw[key] is None:
            raw[key] = {}
        if isinstance(raw[key], dict):
            _drop_empty_sections(raw[key], child)


def _config_error(exc: ValidationError) -> ConfigError:
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0]
    kind = first["type"]
    if kind == "extra_forbidden":
        reason = "unknown key"
    elif kind == "missing":
        reason = "required"
    else:
        reason = first["msg"].removeprefix("Value error, ")
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    loc = first["loc"]
    if kind == "extra_forbidden":
        # The unknown key is reported as written, not mapped to a field it may resemble.
        parent = dotted_key(loc[:-1])
        key = f"{parent}.{loc[-1]}" if parent else str(loc[-1])
    else:
        key = dotted_key(loc)
    return ConfigError(key or _NO_FILE, reason)


def _check_leads(config: FleetdConfig) -> None:
    names: set[str] = set()
    agents: set[str] = set()
    for index, lead in enumerate(config.leads):
        if lead.name in names:
            raise ConfigError(f"leads[{index}].name", f"duplicate lead name {lead.name!r}")
        if lead.agent in agents:
            raise ConfigError(f"leads[{index}].agent", f"agent {lead.agent!r} is another lead's")
        names.add(lead.name)
        agents.add(lead.agent)


def _check_tokens(config: FleetdConfig, environ: Mapping[str, str]) -> None:
    """Every named token variable holds a usable token of its own (the value is never shown)."""
    named = [(f"leads[{i}].tokenEnv", lead.token_env) for i, lead in enumerate(config.leads)]
    if config.operator_token_env is not None:
        named.append(("operatorTokenEnv", config.operator_token_env))
    holders: dict[str, str] = {}
    for key, variable in named:
        token = environ.get(variable)
        if not token:
            raise ConfigError(key, f"environment variable {variable} is not set")
        if any(ch.isspace() for ch in token):
            raise ConfigError(key, f"the token in {variable} contains whitespace")
        other = holders.setdefault(token, key)
        if other != key:
            raise ConfigError(key, f"the token in {variable} is also {other}'s; tokens must differ")
