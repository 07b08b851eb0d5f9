"""Tool contracts are generated from the registry, and any drift between the two is caught."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from fleetd.api.schemas import (
    JSON_SCHEMA_DIALECT,
    assert_schemas_match,
    export_schemas,
    main,
    render_schemas,
    schema_drift,
)
from fleetd.api.tools import Caller, Role, ToolRegistry, ToolSpec
from tests.unit.api.api_doubles import Calls, NoParams, build_registry


def test_export_writes_one_params_file_per_tool_and_declared_results(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Every tool gets <name>.params.schema.json; tools with a result model also get results."""
    written = export_schemas(registry, tmp_path)
    names = sorted(path.name for path in written)
    assert names == sorted(
        [f"{name}.params.schema.json" for name in registry.names()]
        + ["bad_shape.result.schema.json", "fleet_list.result.schema.json"]
        + ["fleet_list.scope-all.result.schema.json"]
        + ["tool-result.v1.schema.json"]
    )
    echo = json.loads((tmp_path / "echo.params.schema.json").read_text())
    assert echo.pop("$schema") == JSON_SCHEMA_DIALECT
    assert echo == registry.get("echo").params_schema()


def test_generated_schemas_are_valid_and_enforce_the_params(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Each generated file is a valid 2020-12 schema that accepts good args and refuses extras."""
    export_schemas(registry, tmp_path)
    for path in tmp_path.iterdir():
        Draft202012Validator.check_schema(json.loads(path.read_text()))
    echo = Draft202012Validator(json.loads((tmp_path / "echo.params.schema.json").read_text()))
    assert echo.is_valid({"text": "hi", "times": 2})
    assert not echo.is_valid({"text": "hi", "colour": "red"})
    assert not echo.is_valid({"times": 2})


def test_export_is_deterministic_and_matches_after_writing(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Exporting twice gives identical bytes, and the check then finds no drift."""
    export_schemas(registry, tmp_path)
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    export_schemas(registry, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first
    assert schema_drift(registry, tmp_path) == []
    assert_schemas_match(registry, tmp_path)
    assert all(text.endswith("}\n") for text in render_schemas(registry).values())


def _extra_tool() -> ToolSpec[Any]:
    async def handler(caller: Caller, params: NoParams) -> dict[str, Any]:
        return {}

    return ToolSpec(
        name="fleet_new",
        description="New.",
        params=NoParams,
        roles=frozenset(Role),
        handler=handler,
    )


def test_drift_names_missing_changed_and_stale_files(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """An edited file, a new tool and a vanished tool each show up as one named drift line."""
    export_schemas(registry, tmp_path)
    (tmp_path / "echo.params.schema.json").write_text("{}\n")
    (tmp_path / "fleet_gone.params.schema.json").write_text("{}\n")
    registry.register(_extra_tool())
    assert schema_drift(registry, tmp_path) == [
        "fleet_new.params.schema.json: missing",
        "fleet_gone.params.schema.json: no such tool any more",
        "echo.params.schema.json: differs from the registry",
    ]
    with pytest.raises(AssertionError, match=r"fleet_new\.params\.schema\.json: missing"):
        assert_schemas_match(registry, tmp_path)


def test_export_removes_stale_tool_files_and_keeps_others(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Re-exporting deletes files of vanished tools, rewrites the envelope from its models, and
    never touches hand-written neighbours."""
    (tmp_path / "fleet_gone.params.schema.json").write_text("{}\n")
    (tmp_path / "tool-result.v1.schema.json").write_text("{}\n")
    (tmp_path / "README.md").write_text("notes\n")
    export_schemas(registry, tmp_path)
    assert not (tmp_path / "fleet_gone.params.schema.json").exists()
    envelope = json.loads((tmp_path / "tool-result.v1.schema.json").read_text())
    assert envelope["$id"] == "tool-result.v1.schema.json"
    assert (tmp_path / "README.md").read_text() == "notes\n"
    assert schema_drift(registry, tmp_path) == []


def test_an_empty_or_absent_directory_reports_every_file_missing(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Checking against a directory that does not exist lists every expected file as missing."""
    drift = schema_drift(registry, tmp_path / "absent")
    assert len(drift) == len(render_schemas(registry))
    assert all(line.endswith(": missing") for line in drift)


def cli_registry() -> ToolRegistry:
    """Factory the command-line test points at."""
    return build_registry(Calls())


def test_command_line_writes_then_checks(tmp_path: Path) -> None:
    """The module's command writes the files, and --check exits 1 only when they drift."""
    target = f"{__name__}:cli_registry"
    assert main([target, str(tmp_path)]) == 0
    assert main([target, str(tmp_path), "--check"]) == 0
    (tmp_path / "echo.params.schema.json").write_text("{}\n")
    assert main([target, str(tmp_path), "--check"]) == 1
