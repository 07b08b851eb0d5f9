"""Dotted key names: walking the model, naming a validation error, reading and replacing values.

A dotted key is the YAML spelling of a value's place: ``health.snapshotIntervalSeconds``,
``profiles.sonnet.maxLoad``, ``leads[0].tokenEnv``. Errors, warnings, env overrides, restart
reports and the example-file test all speak it, so the walk lives in one place.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from fleetd.config.fields import ConfigModel
from fleetd.config.model import FleetdConfig

__all__ = [
    "KeySpec",
    "dotted_key",
    "flatten",
    "get_value",
    "iter_keys",
    "replace_value",
    "section_of",
    "upper_bound",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeySpec:
    """One settable value: its dotted YAML key, its Python attribute path, its pydantic field."""

    dotted: str
    names: tuple[str, ...]
    field: FieldInfo


def section_of(annotation: Any) -> type[ConfigModel] | None:
    """The config model a field holds (directly, optionally, or as tuple/mapping items)."""
    if isinstance(annotation, type) and issubclass(annotation, ConfigModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = section_of(arg)
        if found is not None:
            return found
    return None


def upper_bound(field: FieldInfo) -> int | None:
    """The largest value a numeric key accepts (its ``le``), or ``None`` when it has none."""
    pending: list[Any] = [*field.metadata, field.annotation]
    while pending:
        item = pending.pop()
        bound = getattr(item, "le", None)  # pydantic keeps Field(le=...) as annotated_types.Le
        if isinstance(bound, int):
            return bound
        if isinstance(item, FieldInfo):
            pending.extend(item.metadata)
        else:
            pending.extend(typing.get_args(item))
    return None


def _is_section(field: FieldInfo) -> bool:
    """A nested section (not a list of leads or a mapping of profiles)."""
    annotation = field.annotation
    return isinstance(annotation, type) and issubclass(annotation, ConfigModel)


def _alias(name: str, field: FieldInfo) -> str:
    return field.alias or name


def iter_keys(model: type[ConfigModel] = FleetdConfig, prefix: str = "") -> Iterator[KeySpec]:
    """Every leaf key under ``model``; ``leads`` and ``profiles`` count as one leaf each."""
    yield from _walk(model, prefix, ())


def _walk(model: type[ConfigModel], prefix: str, names: tuple[str, ...]) -> Iterator[KeySpec]:
    for name, field in model.model_fields.items():
        dotted = f"{prefix}{_alias(name, field)}"
        if _is_section(field):
            child = field.annotation
            assert isinstance(child, type)
            assert issubclass(child, ConfigModel)
            yield from _walk(child, f"{dotted}.", (*names, name))
        else:
            yield KeySpec(dotted=dotted, names=(*names, name), field=field)


def dotted_key(loc: tuple[int | str, ...], model: type[ConfigModel] = FleetdConfig) -> str:
    """Name a pydantic error location in YAML spelling (aliases, ``[i]`` for list items)."""
    parts: list[str] = []
    current: type[ConfigModel] | None = model
    verbatim_next = False
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
            continue
        if item == "[key]":
            continue
        field = None if verbatim_next or current is None else _field_named(current, item)
        verbatim_next = False
        if field is None:
            parts.append(f".{item}")
            continue
        name, info = field
        parts.append(f".{_alias(name, info)}")
        current = section_of(info.annotation)
        verbatim_next = typing.get_origin(info.annotation) in (Mapping, dict)
    return "".join(parts).lstrip(".")


def _field_named(model: type[ConfigModel], item: str) -> tuple[str, FieldInfo] | None:
    for name, info in model.model_fields.items():
        if item in (name, info.alias):
            return name, info
    return None


def replace_value(model: M, names: tuple[str, ...], value: object) -> M:
    """A copy of ``model`` with the attribute at ``names`` set to ``value``."""
    head, *rest = names
    if not rest:
        return model.model_copy(update={head: value})
    child = getattr(model, head)
    return model.model_copy(update={head: replace_value(child, tuple(rest), value)})


def get_value(model: BaseModel, names: tuple[str, ...]) -> object:
    """The attribute at ``names``."""
    value: object = model
    for name in names:
        value = getattr(value, name)
    return value


def flatten(config: FleetdConfig) -> dict[str, object]:
    """Dotted key -> value for every leaf, with each profile's keys listed separately."""
    flat: dict[str, object] = {}
    for spec in iter_keys():
        value = get_value(config, spec.names)
        if spec.dotted == "profiles" and isinstance(value, Mapping):
            for profile, settings in value.items():
                for sub in iter_keys(type(settings), f"profiles.{profile}."):
                    flat[sub.dotted] = get_value(settings, sub.names)
            continue
        flat[spec.dotted] = value
    return flat
