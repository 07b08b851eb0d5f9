"""fleet_list.controlLink and the /healthz component show the classified link (M4 §4.3)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.errors import ControlLinkError
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
    assert str(fleet.service.health.state.link.state) == "CONTROL_LINK_DOWN"
    fleet.control.link_up()
    await fleet.service.health.tick()
    for view in await _surfaces(fleet):
        assert (view["state"], view["lastCall"]) == ("up", "ok")


async def test_without_health_the_calls_decide_with_the_same_patience(tmp_path: Path) -> None:
    """With health off the calls classify the link: one failed call, or failures younger than two
    snapshot intervals, leave it up (lastCall shows the failure); a streak that lasts turns it down,
    and the link gauge agrees with the surfaces throughout."""
    fleet = _fleet(tmp_path, health=False)
    control = fleet.service.control
    window = 2 * fleet.service.health.interval()

    async def states() -> set[tuple[object, object, object]]:
        return {(v["state"], v["classifiedBy"], v["lastCall"]) for v in await _surfaces(fleet)}

    await control.ping()
    assert await states() == {("up", "calls", "ok")}
    fleet.control.link_down()
    for _ in range(3):
        with contextlib.suppress(ControlLinkError):
            await control.ping()
        fleet.clock.advance(1)
    assert await states() == {("up", "calls", "failed")}
    assert _link_gauge(fleet) == 1.0
    fleet.clock.advance(window)
    with contextlib.suppress(ControlLinkError):
        await control.ping()
    assert await states() == {("down", "calls", "failed")}
    assert _link_gauge(fleet) == 0.0
    fleet.control.link_up()
    await control.ping()
    assert await states() == {("up", "calls", "ok")}


def _link_gauge(fleet: TestFleet) -> float:
    value = fleet.service.metrics.registry.get_sample_value("fleetd_control_link_up")
    assert value is not None
    return value


async def test_lists_that_keep_failing_while_herdr_answers_pings_say_detection_is_blind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """herdr answers ``ping`` but not ``agent.list`` (an unreadable answer, say): no link fault
    (M4 §4.3) and no member fault, yet health sees nothing. From the second failed list the
    coverage says detection is blind, on ``fleet_list`` and ``/healthz``, and one WARNING says
    so; the next list that reads clears it, with one INFO (it said nothing, for good)."""
    fleet = _fleet(tmp_path, health=True)
    await fleet.service.health.tick()
    fleet.control.fail("list_agents", ControlLinkError("invalid_response", "answer is not JSON"))
    with caplog.at_level(logging.INFO, logger="fleetd.health"):
        await fleet.service.health.tick()
        covered = (await fleet.ok("fleet_list"))["healthCoverage"]
        assert covered["status"] != "degraded"  # one failed list is one blind tick
        for _ in range(3):
            fleet.clock.advance(fleet.service.health.interval())
            await fleet.service.health.tick()
        covered = (await fleet.ok("fleet_list"))["healthCoverage"]
        assert covered["status"] == "degraded"
        assert "agent list" in covered["reason"]
        transport = httpx.ASGITransport(app=create_app(fleet.service))
        async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
            healthz = (await client.get("/healthz")).json()["components"]
        assert healthz["fleetHealth"]["status"] == "degraded"
        assert healthz["controlLink"]["state"] == "up"  # the link itself answers
        fleet.control.fail("list_agents", None)
        await fleet.service.health.tick()
    covered = (await fleet.ok("fleet_list"))["healthCoverage"]
    assert covered["status"] != "degraded"
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "agent list" in r.getMessage()]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
