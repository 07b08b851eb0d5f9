"""The service shell: probes, metrics and the fleet view route."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.runtime.scheduler import STALL_FLOOR_SECONDS, Loop, Scheduler
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet, sample_document


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


def _client(fleet: TestFleet) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    return httpx.AsyncClient(transport=transport, base_url="http://fleetd")


async def test_readyz_is_health_json_and_follows_startup(fleet: TestFleet) -> None:
    """/readyz says fail before the service started and pass after, as application/health+json."""
    async with _client(fleet) as client:
        before = await client.get("/readyz")
        fleet.service.started = True
        after = await client.get("/readyz")
    assert (before.status_code, before.json()["status"]) == (503, "fail")
    assert (after.status_code, after.json()["status"]) == (200, "pass")
    assert after.headers["content-type"].startswith("application/health+json")


async def test_livez_and_healthz_answer_while_herdr_is_down(fleet: TestFleet) -> None:
    """Liveness does not depend on herdr; /healthz stays 200 and reports the link and health."""
    fleet.control.link_down()
    await fleet.poll()
    async with _client(fleet) as client:
        livez = await client.get("/livez")
        healthz = await client.get("/healthz")
    assert livez.status_code == 200
    assert healthz.status_code == 200
    components = healthz.json()["components"]
    assert set(components) >= {"controlLink", "config", "loops", "fleetHealth"}
    assert components["fleetHealth"]["status"] == "off"


async def test_livez_fails_while_a_loop_is_stuck_in_its_step(fleet: TestFleet) -> None:
    """2a: a loop whose step waits forever (its task alive) makes /livez 503 once the step has
    run past its stall limit, and 200 again once it ends."""
    release = asyncio.Event()

    async def waits_on_a_dependency() -> None:
        await release.wait()

    scheduler = Scheduler(fleet.clock)
    scheduler.add(Loop(name="health", step=waits_on_a_dependency, interval=lambda: 30))
    fleet.service.scheduler = scheduler
    scheduler.start()
    for _ in range(3):
        await asyncio.sleep(0)
    async with _client(fleet) as client:
        assert (await client.get("/livez")).status_code == 200
        await fleet.clock.run(STALL_FLOOR_SECONDS + 1, step=10)
        stuck = await client.get("/livez")
        release.set()
        for _ in range(3):
            await asyncio.sleep(0)
        after = await client.get("/livez")
    await scheduler.stop()
    assert (stuck.status_code, stuck.json()) == (503, {"status": "fail"})
    assert after.status_code == 200


async def test_metrics_come_from_the_service_registry(fleet: TestFleet) -> None:
    """/metrics shows this service's series, including both incident series."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_stop", sessionId=sid)
    async with _client(fleet) as client:
        text = (await client.get("/metrics")).text
    assert "fleet_health_incidents_total" in text
    assert "# TYPE fleet_health_incidents gauge" in text
    assert "fleetd_config_reloads_total" in text


async def test_fleet_view_lists_herdr_agents_and_the_link(fleet: TestFleet) -> None:
    """GET /v1/fleet is fleet_list: herdr's agents as the herdr-agents loop last listed them (the
    request itself asks herdr nothing), and the control link."""
    await fleet.service.observe_herdr()  # what start() and the herdr-agents loop do
    fleet.control.calls.clear()
    async with _client(fleet) as client:
        response = await client.get("/v1/fleet", headers={"Authorization": f"Bearer {LEAD_TOKEN}"})
    view = response.json()["result"]
    assert {a["name"] for a in view["agents"]} == {"lead", "lead-b"}
    assert view["agentsAgeSeconds"] == 0.0
    assert view["controlLink"]["state"] == "up"
    assert view["version"] == 1
    assert fleet.control.calls == []


async def test_healthz_warns_while_the_control_link_is_down(tmp_path: Path) -> None:
    """A down control link makes /healthz's top-level status warn (its component fail), still
    HTTP 200; when the link is back it says pass again."""
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()

    async def healthz() -> tuple[int, str, str]:
        async with _client(fleet) as client:
            answer = await client.get("/healthz")
        body = answer.json()
        return answer.status_code, body["status"], body["components"]["controlLink"]["status"]

    await fleet.service.health.tick()
    assert await healthz() == (200, "pass", "pass")
    fleet.control.link_down()
    await fleet.service.health.tick()
    fleet.clock.advance(2)
    await fleet.service.health.tick()
    assert str(fleet.service.health.state.link.state) == "CONTROL_LINK_DOWN"
    assert await healthz() == (200, "warn", "fail")
    fleet.control.link_up()
    await fleet.service.health.tick()
    assert await healthz() == (200, "pass", "pass")
