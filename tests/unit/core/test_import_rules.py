"""Imports follow the layering: checked on the source of every module under ``fleetd/``.

Every ``import`` and ``from ... import`` is read with :mod:`ast`, wherever it stands — at module
level, inside a function, or under ``if TYPE_CHECKING:`` — and resolved to the fleetd modules it
names (relative imports and ``from fleetd import compose`` included). The rules:

* ``fleetd.runtime`` never imports ``fleetd.api``: who is calling (``Caller``, ``Role``) is a
  domain value in :mod:`fleetd.identity`;
* only the entry points import the composition root ``fleetd.compose`` (the app takes a
  :class:`~fleetd.api.service.FleetService`, not the root);
* ``fleetd.health`` imports nothing of fleetd but itself (its compiled floors included);
* no import cycle between fleetd modules (``TYPE_CHECKING`` imports count: a type-only cycle is
  still two modules that cannot be understood apart).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import fleetd

ROOT = Path(fleetd.__file__).parent

ENTRY_POINTS = frozenset({"fleetd.cli", "fleetd.demo", "fleetd.__main__"})
"""Modules that may build the service through the composition root."""

TEST_HARNESS = frozenset({"fleetd.testing"})
"""The test harness builds the service through the same root as ``fleetd serve``, with fakes."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_in(source: str, module: str, *, is_package: bool = False) -> Iterator[str]:
    """Every fleetd module that ``module`` (whose source is ``source``) imports, anywhere."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node)
            submodules = [f"{target}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if name in MODULES] or [target]
        else:
            continue
        yield from (name for name in names if name in MODULES)


def imports_of(module: str) -> Iterator[str]:
    path = MODULES[module]
    return imports_in(path.read_text(), module, is_package=path.name == "__init__.py")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _violations(importer: str, imported: str) -> list[tuple[str, str]]:
    return [
        (module, name)
        for module in MODULES
        if _within(module, importer)
        for name in imports_of(module)
        if _within(name, imported)
    ]


def test_the_scan_sees_every_form_of_import() -> None:
    """Absolute, relative, from-package, function-local and TYPE_CHECKING imports all count."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import fleetd.errors\n"
        "if TYPE_CHECKING:\n    from fleetd.api.tools import Caller\n"
        "from .. import compose\n"
        "from ..health.decide import decide\n"
        "def later() -> None:\n    from .link import LinkState\n"
    )
    assert set(imports_in(source, "fleetd.runtime.probe")) == {
        "fleetd.errors",
        "fleetd.api.tools",
        "fleetd.compose",
        "fleetd.health.decide",
        "fleetd.runtime.link",
    }
    assert "fleetd.compose" in set(imports_of("fleetd.cli"))


def test_runtime_does_not_import_api() -> None:
    """The runtime sits below the api; the api's transports build on it, never the reverse."""
    assert _violations("fleetd.runtime", "fleetd.api") == []


def test_only_entry_points_import_the_composition_root() -> None:
    """No adapter, loop or core module reaches up to ``fleetd.compose``."""
    allowed = ENTRY_POINTS | TEST_HARNESS | {"fleetd.compose"}
    found = [pair for pair in _violations("fleetd", "fleetd.compose") if pair[0] not in allowed]
    assert found == []


def test_health_imports_only_health() -> None:
    """``fleetd.health`` is pure: it imports no fleetd module but its own, not even config."""
    found = [
        (module, name)
        for module in MODULES
        if _within(module, "fleetd.health")
        for name in imports_of(module)
        if not _within(name, "fleetd.health")
    ]
    assert found == []


def _graph() -> dict[str, set[str]]:
    return {module: set(imports_of(module)) - {module} for module in MODULES}


def import_cycles(graph: dict[str, set[str]] | None = None) -> list[frozenset[str]]:
    """The strongly connected components of the import graph with more than one module."""
    graph = _graph() if graph is None else graph
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for name in sorted(graph[module]):
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                cycles.append(frozenset(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_cycle_scan_finds_a_cycle() -> None:
    """The scan finds direct and longer cycles, so an empty answer means something."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d", "a"}, "f": {"a"}}
    assert sorted(map(sorted, import_cycles(graph))) == [["a", "b", "c"], ["d", "e"]]


def test_no_import_cycle() -> None:
    """No two fleetd modules import each other, directly or through others."""
    assert import_cycles() == []


def attribute_reads(source: str, names: frozenset[str]) -> list[tuple[str, int]]:
    """Each ``<anything>.<name>`` in ``source`` for a name in ``names``, with its line."""
    return [
        (node.attr, node.lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in names
    ]


def test_api_and_runtime_use_the_bridge_through_named_operations() -> None:
    """The api and the runtime ask the bridge (``session``, ``ticket``, ``pending_for`` …); they
    never reach into its roster or its ticket book, so the bridge's invariants stay inside it."""
    inner = frozenset({"roster", "tasks"})
    found = [
        (module, read)
        for module, path in MODULES.items()
        if _within(module, "fleetd.api") or _within(module, "fleetd.runtime")
        for read in attribute_reads(path.read_text(), inner)
    ]
    assert found == []
    reach = "def f(bridge):\n    return bridge.roster.get('s')\n\n\nx = self.bridge.tasks\n"
    assert sorted(attribute_reads(reach, inner)) == [("roster", 2), ("tasks", 5)]
