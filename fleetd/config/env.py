"""Environment overrides: ``FLEETD_<SECTION>__<KEY>`` sets one config key.

Names come from the YAML keys, camelCase turned to upper snake case and nesting joined by a
double underscore: ``FLEETD_HEALTH__SNAPSHOT_INTERVAL_SECONDS``, ``FLEETD_INBOX__AMQP__URL``,
``FLEETD_BRIDGE__PUSH__HEARTBEAT_MAX``; the one top-level scalar is ``FLEETD_OPERATOR_TOKEN_ENV``.
Leads, profiles and providers are lists and mappings and are set in the file only; a list of
scalars (``inbox.amqp.urls``) is given comma-separated.

A ``FLEETD_`` variable containing ``__`` that names no key is an error, so a typo cannot silently
leave the default in place. Plain ``FLEETD_`` variables without ``__`` (``FLEETD_URL``,
``FLEETD_TOKEN``, ``FLEETD_SESSION``: what fleetd hands to members) are not overrides and are
ignored. Values are text; they are converted to the key's type here and then validated with the
rest of the document, so floors and bounds apply to them in the same way.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from fleetd.config.keys import KeySpec, iter_keys
from fleetd.errors import ConfigError

__all__ = ["ENV_PREFIX", "apply_env_overrides", "env_name", "override_names"]

ENV_PREFIX = "FLEETD_"
_FILE_ONLY = frozenset({"leads", "profiles", "providers"})
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_NULL = frozenset({"", "null", "none", "~"})


def env_name(dotted: str) -> str:
    """``health.snapshotIntervalSeconds`` -> ``FLEETD_HEALTH__SNAPSHOT_INTERVAL_SECONDS``."""
    parts = (re.sub(r"(?<!^)(?=[A-Z])", "_", part).upper() for part in dotted.split("."))
    return ENV_PREFIX + "__".join(parts)


def override_names() -> dict[str, KeySpec]:
    """Every override variable name -> the key it sets."""
    return {env_name(spec.dotted): spec for spec in iter_keys() if spec.dotted not in _FILE_ONLY}


def apply_env_overrides(document: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``document`` with every override in ``environ`` merged in (sorted by name)."""
    known = override_names()
    merged = _copy(document)
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        spec = known.get(name)
        if spec is None:
            if "__" in name:
                raise ConfigError(name, "not a known config override (FLEETD_<SECTION>__<KEY>)")
            continue
        _set(merged, spec.dotted, _convert(environ[name], spec, name))
    return merged


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in document.items()}


def _set(document: dict[str, Any], dotted: str, value: object) -> None:
    *sections, leaf = dotted.split(".")
    node = document
    for depth, section in enumerate(sections):
        child = node.get(section)
        if child is None:
            child = node[section] = {}
        if not isinstance(child, dict):
            raise ConfigError(".".join(sections[: depth + 1]), "must be a mapping")
        node = child
    node[leaf] = value


def _convert(text: str, spec: KeySpec, name: str) -> object:
    """Turn override text into the key's type; the message names the variable, not the value."""
    nullable, base = _unwrap(spec.field.annotation)
    stripped = text.strip()
    if nullable and stripped.lower() in _NULL:
        return None
    if base is bool:
        if stripped.lower() in _TRUE:
            return True
        if stripped.lower() in _FALSE:
            return False
        raise ConfigError(spec.dotted, f"{name} must be true or false")
    if base is int:
        try:
            return int(stripped)
        except ValueError:
            raise ConfigError(spec.dotted, f"{name} must be an integer") from None
    if typing.get_origin(base) is tuple:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    return text


def _unwrap(annotation: Any) -> tuple[bool, Any]:
    """(whether ``None`` is allowed, the underlying type) of a field annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        inner_nullable, base = _unwrap(args[0]) if len(args) == 1 else (False, annotation)
        return nullable or inner_nullable, base
    return False, annotation
