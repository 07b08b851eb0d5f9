"""The bridge, api and runtime packages each export a curated surface, and others use only it.

Each package's ``__all__`` is pinned here. Every ``from fleetd.<package>.<module> import name`` in a
fleetd module outside that package (read with :mod:`ast`, wherever it stands) must name something
in the package's ``__all__``: a new reach into a package's inside is a deliberate change to this
list, not an accident. Which *modules* may import which is not checked here but by the import
contracts in ``pyproject.toml`` (``lint-imports``, run by ``make lint``); these tests check names.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import fleetd
from fleetd import api, bridge, runtime

ROOT = Path(fleetd.__file__).parent

EXPORTS: dict[ModuleType, set[str]] = {
    bridge: {
        "ORPHANED",
        "SESSIONS_DIR",
        "TRANSITIONS",
        "Bridge",
        "BridgeReads",
        "BridgeView",
        "CheckedMemberViews",
        "Delivery",
        "DurableState",
        "FakeWorktrees",
        "GitWorktrees",
        "ManifestShelf",
        "MemberBacklog",
        "MemberViews",
        "Orphan",
        "PreservedWorktree",
        "PushLoop",
        "PushOutcome",
        "ReleaseCause",
        "RepairOutcome",
        "RepairResult",
        "ResultSource",
        "Session",
        "SessionEvent",
        "SessionState",
        "SpawnRequest",
        "Ticket",
        "TicketOutcome",
        "WorktreeAction",
        "Worktrees",
        "health_settings",
        "load_manifests",
        "member_backlogs",
        "profile_inputs",
        "read_lead_stats",
        "stop_cause",
        "Absent",
        "CapacityRow",
        "ModelHealthFlag",
        "OpenTurn",
        "ReleaseResult",
        "ReplyResult",
        "SessionRow",
        "TicketResult",
        "WireModel",
        "ticket_result",
        "wire",
    },
    api: {
        "INTERNAL_ERROR_CODE",
        "Authenticator",
        "StandbyHolder",
        "ToolFailure",
        "ToolRegistry",
        "ToolResult",
        "create_app",
        "create_standby_app",
        "register_fleet_tools",
    },
    runtime: {
        "DependencyCollector",
        "DependencyReadiness",
        "DependencyView",
        "FleetAcross",
        "FleetAllResult",
        "FleetInstancePart",
        "FleetHealthMonitor",
        "FleetViewBuilder",
        "FleetViews",
        "InstanceSummary",
        "InstanceWatch",
        "RemotePeers",
        "LinkObserver",
        "LinkState",
        "LiveAgents",
        "Loop",
        "STALL_FLOOR_SECONDS",
        "Scheduler",
        "freeze_startup_heap",
        "instance_name",
        "summarize",
        "ControlLink",
        "DependenciesBlock",
        "FleetHealthBlock",
        "HealthCoverage",
        "FleetListResult",
        "FleetMember",
        "LeadRow",
        "LiveAgent",
        "OrphanMember",
        "FleetHealthComponent",
        "InboxComponent",
    },
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def reaches(source: str, importer: str, package: str) -> Iterator[tuple[str, str]]:
    """``(module, name)`` for every name ``importer`` takes from inside ``package``."""
    if importer == package or importer.startswith(package + "."):
        return
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            yield from ((node.module or "", alias.name) for alias in node.names)


@pytest.mark.parametrize("package", list(EXPORTS), ids=lambda m: m.__name__)
def test_exports_are_pinned_and_defined(package: ModuleType) -> None:
    """Each package's __all__ is exactly the pinned set, without repeats, and every name in it
    resolves."""
    assert set(package.__all__) == EXPORTS[package]
    assert len(package.__all__) == len(EXPORTS[package])
    for name in package.__all__:
        assert hasattr(package, name)


def test_the_scan_sees_reaches_into_a_package() -> None:
    """The scan finds imports past a package's front door, one inside a function too; not the front
    door itself, a look-alike package name, or an import from inside the package."""
    source = (
        "from fleetd.bridge.service import Bridge\n"
        "def later() -> None:\n    from fleetd.bridge.turns import TurnToken\n"
        "from fleetd.bridgework import Other\n"
        "from fleetd.bridge import Bridge\n"
    )
    assert sorted(reaches(source, "fleetd.runtime.monitor", "fleetd.bridge")) == [
        ("fleetd.bridge.service", "Bridge"),
        ("fleetd.bridge.turns", "TurnToken"),
    ]
    assert list(reaches(source, "fleetd.bridge.push", "fleetd.bridge")) == []


@pytest.mark.parametrize("package", list(EXPORTS), ids=lambda m: m.__name__)
def test_other_packages_use_only_the_exports(package: ModuleType) -> None:
    """Every name reached from outside is exported, as the very object its module defines."""
    outside = [
        (f"{_module_name(path)}: {module}.{name}", module, name)
        for path in sorted(ROOT.rglob("*.py"))
        for module, name in reaches(path.read_text(), _module_name(path), package.__name__)
    ]
    assert outside, "the scan found no use of the package at all"
    unexported = [where for where, _, name in outside if name not in package.__all__]
    assert unexported == [], f"add these to {package.__name__}.__all__ or keep them inside"
    for _, module, name in outside:
        assert getattr(package, name) is getattr(importlib.import_module(module), name)


def attribute_reads(source: str, names: frozenset[str]) -> list[tuple[str, int]]:
    """Each ``<anything>.<name>`` in ``source`` for a name in ``names``, with its line."""
    return [
        (node.attr, node.lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in names
    ]


def test_fleetd_outside_the_bridge_reads_it_through_its_view() -> None:
    """The api, the runtime, the composition root and the test harness read the bridge through
    ``bridge.reads`` (``session``, ``ticket``, ``pending_for`` …) and act on it through named
    operations; no module outside ``fleetd.bridge`` reaches into its roster or its ticket book, so
    the bridge's invariants stay inside it."""
    inner = frozenset({"roster", "tasks"})
    found = [
        (_module_name(path), read)
        for path in sorted(ROOT.rglob("*.py"))
        if not _module_name(path).startswith("fleetd.bridge")
        for read in attribute_reads(path.read_text(), inner)
    ]
    assert found == []
    reach = "def f(bridge):\n    return bridge.roster.get('s')\n\n\nx = self.bridge.tasks\n"
    assert sorted(attribute_reads(reach, inner)) == [("roster", 2), ("tasks", 5)]
