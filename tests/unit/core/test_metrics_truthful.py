"""/metrics after real traffic: every declared series is fed and says what the service knows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetd.api.app import create_app
from fleetd.testing import TestFleet, build_test_fleet, sample_document

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True}
    built = build_test_fleet(tmp_path, document=document)
    await built.service.own_lead_keys()
    return built


async def _scrape(fleet: TestFleet) -> tuple[Samples, dict[str, object]]:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        text = (await client.get("/metrics")).text
        healthz = (await client.get("/healthz")).json()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, healthz["components"]["controlLink"]


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_every_series_is_fed_by_real_traffic(fleet: TestFleet) -> None:
    """Tool calls, herdr requests, sessions and the link read what really happened."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="do it"))["ticket"]
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    await fleet.ok("fleet_poll", ticket=ticket)
    await fleet.call("fleet_spawn", profile="no-such-profile")
    await fleet.call("fleet_nonsense")
    await fleet.service.health.tick()

    samples, link = await _scrape(fleet)

    assert _value(samples, "fleetd_control_link_up") == 1.0
    assert link["state"] == "up"
    calls = {
        (tool, outcome): _value(samples, "fleetd_tool_calls_total", tool=tool, outcome=outcome)
        for tool, outcome in [
            ("fleet_spawn", "ok"),
            ("fleet_spawn", "invalid_arguments"),
            ("fleet_send", "ok"),
            ("fleet_reply", "ok"),
            ("fleet_poll", "ok"),
            ("unknown", "unknown_tool"),
        ]
    }
    assert set(calls.values()) == {1.0}, calls
    herdr = {
        labels: value
        for (name, labels), value in samples.items()
        if name == "fleetd_herdr_requests_total" and value  # every series exists from start
    }
    counted = {dict(labels)["method"]: value for labels, value in herdr.items()}
    assert {dict(labels)["outcome"] for labels in herdr} == {"ok"}
    assert counted == Counter(call.method for call in fleet.control.calls)
    assert _value(samples, "fleetd_sessions", profile="sonnet", state="done") == 1.0
    assert _value(samples, "fleetd_tickets_total", outcome="done", source="reply") == 1.0
    assert _value(samples, "fleet_health_tick_seconds_count") == 1.0
    assert _value(samples, "fleet_lead_health", lead="lead", state="LEAD_IDLE") == 1.0


async def test_a_stopped_member_leaves_the_sessions_gauge(fleet: TestFleet) -> None:
    """fleetd_sessions counts live sessions only: a stopped member's series reads 0 again."""
    sid = await fleet.spawn_ready()
    before, _ = await _scrape(fleet)
    await fleet.ok("fleet_stop", sessionId=sid)
    after, _ = await _scrape(fleet)
    assert _value(before, "fleetd_sessions", profile="sonnet", state="ready") == 1.0
    assert {value for (name, _), value in after.items() if name == "fleetd_sessions"} == {0.0}


async def test_link_failures_are_counted_and_the_gauge_follows_the_classified_state(
    fleet: TestFleet,
) -> None:
    """A failed call is counted as link_failed; link_up drops only when health says down."""
    await fleet.service.health.tick()
    fleet.control.link_down()
    await fleet.service.health.tick()
    samples, link = await _scrape(fleet)
    assert _value(
        samples, "fleetd_herdr_requests_total", method="list_agents", outcome="link_failed"
    )
    assert (link["state"], link["lastCall"], _value(samples, "fleetd_control_link_up")) == (
        "up",
        "failed",
        1.0,
    )
    await fleet.service.health.tick()
    samples, link = await _scrape(fleet)
    assert (link["state"], link["classifiedBy"]) == ("down", "health")
    assert _value(samples, "fleetd_control_link_up") == 0.0
