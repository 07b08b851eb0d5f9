"""No module imports a package it lives in: the one cycle the import contracts cannot see.

The ``no-circles`` contract in ``pyproject.toml`` (``lint-imports``, run by ``make lint``) forbids
cycles among the children of every package, which covers every cycle between modules except one
kind: a module that imports its own package's ``__init__`` while that ``__init__`` imports it
back (``fleetd.resilience.standing`` → ``fleetd.resilience`` → ``fleetd.resilience.standing``).
A module inside a package imports its siblings by their own names instead, so no such edge exists
at all, and this test keeps it that way. The graph is import-linter's own (grimp): imports inside
functions and under ``if TYPE_CHECKING:`` count.
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp


def ancestor_imports(edges: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each ``(importer, imported)`` where ``imported`` is a package that contains ``importer``."""
    return sorted((a, b) for a, b in edges if a.startswith(b + "."))


def test_the_check_finds_an_import_of_an_enclosing_package() -> None:
    """ancestor_imports flags a module importing a package it lives in, and not a sibling, a
    child or a look-alike prefix."""
    edges = [("p.a", "p"), ("p.q.b", "p"), ("p", "p.a"), ("p.a", "p.b"), ("pq.a", "p")]
    assert ancestor_imports(edges) == [("p.a", "p"), ("p.q.b", "p")]


def test_no_module_imports_a_package_it_lives_in() -> None:
    """No fleetd module imports a package that encloses it."""
    graph = grimp.build_graph("fleetd", cache_dir=None)
    edges = [(a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)]
    assert edges, "the graph holds no import at all"
    assert ancestor_imports(edges) == []
