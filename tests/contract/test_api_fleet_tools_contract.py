"""The fleet tools' JSON Schemas in contracts/api match the registry the service builds, and every
contract schema is a valid JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleetd.api.schemas import schema_drift
from fleetd.testing import build_test_fleet

ALL_CONTRACTS = Path(__file__).resolve().parents[2] / "contracts"
CONTRACTS = ALL_CONTRACTS / "api"


def test_contract_files_match_the_fleet_tools(tmp_path: Path) -> None:
    """The committed schemas are the registry's (regenerate: see contracts/api/README.md)."""
    registry = build_test_fleet(tmp_path).service.registry
    assert schema_drift(registry, CONTRACTS) == []
    assert set(registry.names()) == {
        "fleet_spawn",
        "fleet_send",
        "fleet_poll",
        "fleet_status",
        "fleet_list",
        "fleet_stop",
        "fleet_reply",
    }


def _defaults(schema: Any) -> Iterator[tuple[Any, Any]]:
    """Every ``(subschema, default)`` pair in ``schema``, at any depth."""
    if isinstance(schema, dict):
        if "default" in schema:
            yield schema, schema["default"]
        for value in schema.values():
            yield from _defaults(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _defaults(value)


@pytest.mark.parametrize(
    "path", sorted(ALL_CONTRACTS.rglob("*.schema.json")), ids=lambda path: path.name
)
def test_every_contract_schema_is_valid_and_its_defaults_fit_it(path: Path) -> None:
    """Each contract schema passes the 2020-12 metaschema, and every default it states is a
    value its own schema accepts (a ``default: null`` on a field that refuses null is not)."""
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    misfits = []
    for subschema, default in _defaults(schema):
        local = {key: value for key, value in subschema.items() if key != "default"}
        validator = Draft202012Validator({**local, "$defs": schema.get("$defs", {})})
        if not validator.is_valid(default):
            misfits.append((subschema.get("title"), default))
    assert misfits == []
