"""fleet_list.controlLink and the /healthz component show the classified link (M4 §4.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from fleetd.api.app import create_app
from fleetd.testing import TestFleet, build_test_fleet, sample_document


def _fleet(tmp_path: Path, *, health: bool) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": health}
    return build_test_fleet(tmp_path, document=document)


async def _surfaces(fleet: TestFleet) -> tuple[dict[str, Any], dict[str, Any]]:
    listed = (await fleet.ok("fleet_list"))["controlLink"]
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        component = (await client.get("/healthz")).json()["components"]["controlLink"]
    return listed, component


async def test_one_failed_call_is_not_a_down_link(tmp_path: Path) -> None:
    """After one failed tick the link is still up, with the failed call shown as lastCall."""
    fleet = _fleet(tmp_path, health=True)
    await fleet.service.health.tick()
    fleet.control.link_down()
    await fleet.service.health.tick()
    fleet.clock.advance(2)
    for view in await _surfaces(fleet):
        assert (view["state"], view["classifiedBy"], view["lastCall"]) == ("up", "health", "failed")
        assert view["lastFailureCode"] == "connect_failed"
    await fleet.service.health.tick()
    for view in await _surfaces(fleet):
        assert (view["state"], view["lastCall"]) == ("down", "failed")
    assert fleet.service.health.view()["health"]["controlLink"] == "CONTROL_LINK_DOWN"
    fleet.control.link_up()
    await fleet.service.health.tick()
    for view in await _surfaces(fleet):
        assert (view["state"], view["lastCall"]) == ("up", "ok")


async def test_without_health_the_state_is_the_last_call_and_says_so(tmp_path: Path) -> None:
    """With health off nothing classifies the link: state follows the last call, marked as such."""
    fleet = _fleet(tmp_path, health=False)
    await fleet.service.control.ping()
    for view in await _surfaces(fleet):
        assert (view["state"], view["classifiedBy"], view["lastCall"]) == ("up", "lastCall", "ok")
