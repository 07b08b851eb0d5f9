"""/metrics of a freshly built fleetd: every labelled series is there at 0 before its first event,
no ``_created`` series, incidents carry their route, and ``promtool check metrics`` is clean.

The service is built by the composition root ``fleetd serve`` uses (on fakes), and scraped over
its own app.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from fleetd.api.app import create_app
from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.memory import InMemoryInbox
from fleetd.journal.memory import InMemoryJournal
from fleetd.testing import TestFleet, build_test_fleet, sample_document

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
PROMTOOL_TIMEOUT = 30


def _fleet(tmp_path: Path) -> TestFleet:
    """Two leads, three profiles, health on, webhook mode (a receiver nobody has called)."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["health"] = {
        "enabled": True,
        "notifications": {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_KEY"},
    }
    env = {"HOOK_URL": "http://127.0.0.1:9/hook", "HOOK_KEY": SECRET}
    return build_test_fleet(tmp_path, document=document, environ=env)


async def _scrape(fleet: TestFleet) -> str:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 200
    return answer.text


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_every_series_is_present_from_start_and_none_is_created(tmp_path: Path) -> None:
    """Before any event every series fleetd declares has samples — the first permanent webhook
    failure, a nudge to each configured lead, a person's incident all read 0 — and no _created
    series. (The dependency collector's families follow configured endpoints, not label sets.)"""
    fleet = _fleet(tmp_path)
    text = await _scrape(fleet)
    declared = {
        described.name
        for series in vars(fleet.service.metrics).values()
        if isinstance(series, MetricWrapperBase)
        for described in series.describe()
    }
    sampled = {family.name for family in text_string_to_metric_families(text) if family.samples}
    assert len(declared) > 15
    assert sorted(declared - sampled) == []
    samples = _samples(text)
    assert not [name for name, _ in samples if name.endswith("_created")]
    assert "_created" not in text
    zero = [
        ("fleet_health_notifications_total", {"event": "open", "outcome": "http_4xx"}),
        ("fleet_health_notifications_total", {"event": "resolved", "outcome": "payload_refused"}),
        ("fleetd_nudges_total", {"lead": "lead-b"}),
        ("fleet_health_mute_total", {"profile": "opencode"}),
        ("fleetd_tool_calls_total", {"tool": "fleet_spawn", "outcome": "internal_error"}),
        ("fleetd_herdr_requests_total", {"method": "prompt", "outcome": "link_failed"}),
        ("fleet_lead_health", {"lead": "lead", "state": "LEAD_UNREACHABLE"}),
        ("fleet_health_lost_boundary_repairs_total", {"result": "repaired"}),
        ("fleetd_inbox_decode_failures_total", {"reason": "malformed_json"}),
        (
            "fleet_health_incidents",
            {
                "scope": "lead",
                "state": "LEAD_UNREACHABLE",
                "severity": "critical",
                "route": "human",
            },
        ),
    ]
    for name, labels in zero:
        assert samples.get((name, frozenset(labels.items()))) == 0.0, (name, labels)


async def test_an_incident_is_counted_under_the_route_that_holds_it(tmp_path: Path) -> None:
    """A down control link goes to a person: fleet_health_incidents says route human, and its
    route lead series reads 0; both existed before the incident did."""
    fleet = _fleet(tmp_path)
    await fleet.service.health.tick()
    fleet.control.link_down()
    for _ in range(3):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    [incident] = fleet.service.health.state.open_incidents()
    assert incident.route is not None
    assert incident.route.value == "human"
    samples = _samples(await _scrape(fleet))
    key = {"scope": "control_link", "state": "CONTROL_LINK_DOWN", "severity": "critical"}
    routes = {
        route: samples.get(("fleet_health_incidents", frozenset({**key, "route": route}.items())))
        for route in ("human", "lead")
    }
    assert routes == {"human": 1.0, "lead": 0.0}


def _promtool() -> str:
    """The promtool binary; a missing one fails under CI=true (.ci/run installs it), else skips."""
    found = shutil.which("promtool")
    if found is None:
        message = "promtool is not installed (Debian package prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI needs it to lint /metrics")
        pytest.skip(message)
    return found


async def test_promtool_finds_nothing_to_say_about_the_exposition(tmp_path: Path) -> None:
    """``promtool check metrics`` accepts /metrics of a fresh fleetd and of one that counted."""
    promtool = _promtool()
    fleet = _fleet(tmp_path)
    fresh = await _scrape(fleet)
    await fleet.spawn_ready()
    await fleet.service.health.tick()
    for text in (fresh, await _scrape(fleet)):
        checked = await asyncio.to_thread(
            subprocess.run,
            [promtool, "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=PROMTOOL_TIMEOUT,
            check=False,
        )
        assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


async def test_a_lead_and_a_profile_added_by_a_reload_get_their_series_at_once(
    tmp_path: Path,
) -> None:
    """After a reload that adds a lead and a profile, their labelled series read 0 before any
    event; a retired lead's gauges are no longer restored by a refresh."""
    path = tmp_path / "fleetd.yaml"
    document: dict[str, Any] = {
        "leads": [{"name": "lead", "tokenEnv": "T_LEAD"}],
        "profiles": {"codex": {"kind": "codex"}},
        "health": {"enabled": True},
    }
    env = {"T_LEAD": "lead-token-0001", "T_SECOND": "second-token-0001"}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (1_000, 1_000))
    clock = FakeClock()
    service = build_service(
        ConfigRef.load(path, env, now=clock.now()),
        environ=env,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
        journal=InMemoryJournal(),
    )
    second = frozenset({("lead", "second")})
    sonnet = frozenset({("profile", "sonnet")})
    before = _samples(service.metrics.exposition().decode())
    assert ("fleetd_nudges_total", second) not in before
    document["leads"] = [{"name": "second", "tokenEnv": "T_SECOND"}]
    document["profiles"] = {"codex": {"kind": "codex"}, "sonnet": {"kind": "claude"}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (2_000, 2_000))
    await service.check_config()
    await service.health.tick()
    after = _samples(service.metrics.exposition().decode())
    assert after[("fleetd_nudges_total", second)] == 0.0
    assert after[("fleet_health_mute_total", sonnet)] == 0.0
    assert after[("fleet_lead_assigned_incidents", second)] == 0.0
    assert ("fleet_lead_assigned_incidents", frozenset({("lead", "lead")})) not in after


async def test_a_refused_token_is_counted_once_under_no_tool(tmp_path: Path) -> None:
    """A request with an unknown token, on a tool route and on /mcp, counts once each as
    ``tool="unknown", outcome="unauthenticated"`` (a series there from the start); no tool's
    series says unauthenticated, since no tool is known before the token is."""
    fleet = _fleet(tmp_path)
    before = _samples(await _scrape(fleet))
    unknown = frozenset({("tool", "unknown"), ("outcome", "unauthenticated")})
    assert before[("fleetd_tool_calls_total", unknown)] == 0
    assert not [k for k in before if ("outcome", "unauthenticated") in k[1] and k[1] != unknown]
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as client:
        bad = {"Authorization": "Bearer not-a-token"}
        assert (await client.post("/v1/tools/fleet_send", json={}, headers=bad)).status_code == 401
        assert (await client.post("/mcp", json={}, headers=bad)).status_code == 401
    after = _samples(await _scrape(fleet))
    assert after[("fleetd_tool_calls_total", unknown)] == 2
