"""The test tree is a package tree, so helpers are imported by name (``tests.contract....``).

Every directory under ``tests/`` that holds Python files has an ``__init__.py``: pytest then
imports each test module under its package name (``tests.unit.api.test_mcp_gate``) with the
repository root on ``sys.path``, and a helper such as ``tests/e2e/e2e_fleet.py`` is imported as
``tests.e2e.e2e_fleet``, never through the directory pytest happened to put on the path.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tests

TESTS = Path(tests.__file__).parent
HELPERS = {path.stem for path in TESTS.rglob("*.py")} - {"__init__", "conftest"}


def test_every_directory_with_python_files_is_a_package() -> None:
    """A new test directory without ``__init__.py`` would fall back to rootdir-relative names."""
    directories = {path.parent for path in TESTS.rglob("*.py")}
    assert directories
    assert sorted(d for d in directories if not (d / "__init__.py").is_file()) == []


def test_helpers_are_imported_through_the_tests_package() -> None:
    """No module imports a sibling helper by its bare name (``from e2e_fleet import ...``)."""
    bare = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            bare += [(path.name, name) for name in names if name.split(".")[0] in HELPERS]
    assert bare == []
