"""The screens package is pure: it imports nothing that does I/O, logs, or reads a clock."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetd.screens

PACKAGE = Path(fleetd.screens.__file__).parent
ALLOWED = {"__future__", "collections.abc", "dataclasses", "enum", "hashlib", "re", "textwrap"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_screens_modules_import_only_pure_standard_modules() -> None:
    """No socket, asyncio, logging, time, os or random import appears in fleetd/screens."""
    modules = sorted(PACKAGE.glob("*.py"))
    assert modules
    for path in modules:
        foreign = {
            name
            for name in _imports(path)
            if name not in ALLOWED and not name.startswith("fleetd.screens")
        }
        assert foreign == set(), f"{path.name} imports {sorted(foreign)}"
