"""The fleet tools' JSON Schemas in contracts/api match the registry the service builds."""

from __future__ import annotations

from pathlib import Path

from fleetd.api.schemas import schema_drift
from fleetd.testing import build_test_fleet

CONTRACTS = Path(__file__).resolve().parents[2] / "contracts" / "api"


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
