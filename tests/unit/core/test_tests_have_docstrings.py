"""Every test says what behaviour it proves: a ``test_*`` function with no docstring fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import tests

TESTS = Path(tests.__file__).parent


def undocumented(source: str) -> list[tuple[int, str]]:
    """The line and name of each ``test_*`` function (async or not, at any depth) in ``source``
    that has no docstring."""
    return [
        (node.lineno, node.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
        and not ast.get_docstring(node)
    ]


def test_the_scan_finds_a_test_without_a_docstring() -> None:
    """Sync, async and nested test functions without a docstring are found; documented tests and
    helpers are not."""
    source = (
        "def test_bare() -> None:\n    assert True\n"
        'def test_told() -> None:\n    """Says what it proves."""\n'
        "async def test_async_bare() -> None:\n    pass\n"
        "class TestGroup:\n    def test_method(self) -> None:\n        pass\n"
        "def helper() -> None:\n    pass\n"
    )
    assert undocumented(source) == [(1, "test_bare"), (5, "test_async_bare"), (8, "test_method")]


def test_every_test_function_has_a_docstring() -> None:
    """Each ``test_*`` function under tests/ carries a docstring saying what behaviour it proves."""
    missing = [
        f"{path.relative_to(TESTS.parent)}:{line} {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in undocumented(path.read_text(encoding="utf-8"))
    ]
    assert missing == [], "say in a docstring what behaviour each of these tests proves"
