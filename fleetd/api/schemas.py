"""The tool contracts as files: JSON Schemas generated from a registry, and a drift check.

``contracts/api/`` holds, for every registered tool, ``<tool>.params.schema.json`` (what the tool
accepts — the same schema MCP's ``tools/list`` and the ``invalid_arguments`` hint show) and, when
the tool declares a result model, ``<tool>.result.schema.json``. The files are generated, never
edited: :func:`export_schemas` writes them from a registry, and :func:`schema_drift` /
:func:`assert_schemas_match` tell a test when the registry and the files disagree, so a change to a
tool's parameters cannot land without its contract.

``tool-result.v1.schema.json``, the answer envelope every tool shares, is generated too, from
:mod:`fleetd.api.envelope`'s models, and so is ``fleet_list.scope-all.result.schema.json``, the
``result`` of ``GET /v1/fleet?scope=all`` (:class:`~fleetd.api.results.FleetAllResult`, whose
parts carry each other instance's published summary), when the registry has ``fleet_list``.
Other files in the directory (a README) are left alone.

From a shell, with a function that builds the registry (no arguments)::

    python -m fleetd.api.schemas package.module:build_registry contracts/api [--check]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from fleetd.api.envelope import ENVELOPE_HEADER, envelope_schema
from fleetd.api.results import FleetAllResult
from fleetd.api.tools import ToolRegistry

__all__ = [
    "ENVELOPE_FILE",
    "FLEET_ALL_FILE",
    "JSON_SCHEMA_DIALECT",
    "assert_schemas_match",
    "export_schemas",
    "render_schemas",
    "schema_drift",
]

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_PARAMS_SUFFIX = ".params.schema.json"
_RESULT_SUFFIX = ".result.schema.json"
ENVELOPE_FILE = "tool-result.v1.schema.json"
FLEET_ALL_FILE = "fleet_list.scope-all.result.schema.json"


def _dump(schema: dict[str, Any]) -> str:
    return json.dumps({"$schema": JSON_SCHEMA_DIALECT, **schema}, indent=2, sort_keys=True) + "\n"


def render_schemas(registry: ToolRegistry) -> dict[str, str]:
    """File name -> file text for every contract file ``registry`` implies."""
    files = {ENVELOPE_FILE: _dump({**ENVELOPE_HEADER, **envelope_schema()})}
    for spec in registry.specs():
        files[spec.name + _PARAMS_SUFFIX] = _dump(spec.params_schema())
        if spec.result is not None:
            files[spec.name + _RESULT_SUFFIX] = _dump(spec.result.model_json_schema())
    if "fleet_list" in registry.names():
        files[FLEET_ALL_FILE] = _dump(FleetAllResult.model_json_schema())
    return files


def _generated(directory: Path) -> set[str]:
    """Names of the generated contract files already in ``directory``."""
    if not directory.is_dir():
        return set()
    return {
        path.name
        for path in directory.iterdir()
        if path.name.endswith((_PARAMS_SUFFIX, _RESULT_SUFFIX)) or path.name == ENVELOPE_FILE
    }


def export_schemas(registry: ToolRegistry, directory: Path) -> list[Path]:
    """Write the registry's contract files into ``directory``; remove ones for vanished tools."""
    directory.mkdir(parents=True, exist_ok=True)
    files = render_schemas(registry)
    for stale in sorted(_generated(directory) - set(files)):
        (directory / stale).unlink()
    written = []
    for name, text in sorted(files.items()):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def schema_drift(registry: ToolRegistry, directory: Path) -> list[str]:
    """One line per contract file that is missing, different or stale; empty when they match."""
    files = render_schemas(registry)
    present = _generated(directory)
    drift = [f"{name}: missing" for name in sorted(set(files) - present)]
    drift += [f"{name}: no such tool any more" for name in sorted(present - set(files))]
    for name in sorted(set(files) & present):
        if (directory / name).read_text(encoding="utf-8") != files[name]:
            drift.append(f"{name}: differs from the registry")
    return drift


def assert_schemas_match(registry: ToolRegistry, directory: Path) -> None:
    """Fail with every drifted file named when ``directory`` does not match ``registry``."""
    drift = schema_drift(registry, directory)
    if drift:
        raise AssertionError(
            f"tool contracts in {directory} drifted from the registry "
            "(regenerate them with fleetd.api.schemas.export_schemas):\n  " + "\n  ".join(drift)
        )


def _load_registry(target: str) -> ToolRegistry:
    module_name, _, function_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), function_name)
    registry = factory()
    if not isinstance(registry, ToolRegistry):
        raise TypeError(f"{target} did not return a ToolRegistry")
    return registry


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) the contract files of a registry built by a factory."""
    parser = argparse.ArgumentParser(prog="python -m fleetd.api.schemas")
    parser.add_argument("factory", help="module:function returning a ToolRegistry")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 on any")
    args = parser.parse_args(argv)
    registry = _load_registry(args.factory)
    if args.check:
        drift = schema_drift(registry, args.directory)
        for line in drift:
            sys.stderr.write(line + "\n")
        return 1 if drift else 0
    for path in export_schemas(registry, args.directory):
        sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
