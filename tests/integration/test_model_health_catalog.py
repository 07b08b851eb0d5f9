"""Model health end to end: a local OpenAI-compatible catalog over real HTTP, the probe loop's
step on a fake clock, and what fleet_spawn and fleet_list make of it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.integration.hook_server import HookServer, Reply

OPERATOR = Caller(role=Role.OPERATOR, name="operator")
MODEL = "claude-sonnet-4"
KEY = "sk-catalog-key-0123456789"


def listing(*models: str, window: int | None = None) -> Reply:
    entries: list[dict[str, Any]] = [{"id": m, "object": "model"} for m in models]
    if window is not None:
        entries[0]["context_length"] = window
    return Reply(
        body=json.dumps({"object": "list", "data": entries}).encode(),
        headers={"content-type": "application/json"},
    )


@pytest.fixture
async def catalog() -> AsyncIterator[HookServer]:
    async with HookServer() as server:
        yield server


def _fleet(tmp_path: Path, server: HookServer) -> TestFleet:
    base = server.url.rsplit("/hooks", 1)[0] + "/v1"
    document = sample_document(tmp_path)
    document["providers"] = [{"name": "local", "baseUrl": base, "apiKeyEnv": "CATALOG_KEY"}]
    document["modelHealth"] = {"requestTimeoutMs": 2000}
    document["profiles"] = {
        "sonnet": {
            "kind": "claude",
            "model": MODEL,
            "provider": "local",
            "maxLoad": 2,
            "contextWindow": 200_000,
        },
        "opus": {"kind": "claude", "model": "claude-opus-4", "provider": "local", "maxLoad": 1},
        "codex": {"kind": "codex"},
        "elsewhere": {"kind": "opencode", "model": "m", "provider": "unlisted"},
    }
    return build_test_fleet(tmp_path, document=document, environ={"CATALOG_KEY": KEY})


async def _models(fleet: TestFleet) -> dict[str, dict[str, Any]]:
    view = await fleet.ok("fleet_list", OPERATOR)
    return {row["profile"]: row for row in view["dependencies"]["models"]}


async def test_a_listed_model_is_available_and_its_window_comes_from_the_catalog(
    tmp_path: Path, catalog: HookServer, caplog: pytest.LogCaptureFixture
) -> None:
    """One GET /v1/models with the key as a bearer token; the model is available; the
    catalog's smaller window replaces the configured one, logged once; no URL or key shows."""
    caplog.set_level(logging.INFO, logger="fleetd.catalog")
    fleet = _fleet(tmp_path, catalog)
    catalog.answer(listing(MODEL, "claude-opus-4", window=180_000))
    await fleet.service.models.step()
    [request] = catalog.received
    assert (request.method, request.path) == ("GET", "/v1/models")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    models = await _models(fleet)
    assert (models["sonnet"]["verdict"], models["sonnet"]["reason"]) == ("available", "listed")
    assert (models["sonnet"]["contextWindow"], models["sonnet"]["contextWindowSource"]) == (
        180_000,
        "catalog",
    )
    assert models["elsewhere"]["reason"] == "not_covered"
    view = await fleet.ok("fleet_list", OPERATOR)
    capacity = {row["profile"]: row for row in view["capacity"]}
    assert capacity["sonnet"]["contextWindow"] == 180_000
    assert capacity["codex"]["contextWindow"] is None
    [provider] = view["dependencies"]["providers"]
    assert (provider["name"], provider["lastOutcome"], provider["listedModels"]) == (
        "local",
        "ok",
        2,
    )
    text = json.dumps(view)
    assert KEY not in text
    assert "127.0.0.1" not in text
    logged = [r.getMessage() for r in caplog.records if "context window" in r.getMessage()]
    assert logged == [
        "profile sonnet: context window set from provider catalog: 180000 (configured 200000)"
    ]

    fleet.clock.advance(300)
    catalog.answer(listing(MODEL, "claude-opus-4", window=180_000))
    await fleet.service.models.step()
    assert len(catalog.received) == 2
    assert len([r for r in caplog.records if "context window" in r.getMessage()]) == 1


@pytest.mark.parametrize(
    "answer",
    [listing("claude-opus-4", "other"), listing("claude-sonnet-4-20260101", "claude-opus-4")],
    ids=["omitted", "renamed"],
)
async def test_a_model_the_catalog_no_longer_lists_benches_its_profile(
    tmp_path: Path, catalog: HookServer, answer: Reply
) -> None:
    """Omitted or renamed: fleet_spawn on the profile is refused with profile_benched, whose
    hint names the profiles that can take the work (not benched, a slot free); fleet_list shows
    the bench; after the bench ends a listed model places again."""
    fleet = _fleet(tmp_path, catalog)
    await fleet.spawn_ready("opus")  # opus is now full (maxLoad 1)
    catalog.answer(answer)
    await fleet.service.models.step()
    app = create_app(fleet.service)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://fleetd",
        headers={"Authorization": f"Bearer {LEAD_TOKEN}"},
    ) as http:
        response = await http.post("/v1/tools/fleet_spawn", json={"profile": "sonnet"})
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "profile_benched"
    hint = error["hint"]
    assert hint["profiles"] == ["codex", "elsewhere"]
    assert (hint["profile"], hint["model"], hint["provider"]) == ("sonnet", MODEL, "local")
    assert hint["retryAfterSeconds"] == 300
    view = await fleet.ok("fleet_list", OPERATOR)
    [provider] = view["dependencies"]["providers"]
    assert [b["profile"] for b in provider["benched"]] == ["sonnet"]
    capacity = {row["profile"]: row for row in view["capacity"]}
    assert capacity["sonnet"]["benchedUntil"] == hint["benchedUntil"]
    assert capacity["codex"]["benchedUntil"] is None
    models = await _models(fleet)
    assert (models["sonnet"]["verdict"], models["sonnet"]["reason"]) == ("unavailable", "omitted")
    await fleet.ok("fleet_spawn", profile="codex")  # fleetd moved nothing: the lead chose

    fleet.clock.advance(300)
    catalog.answer(listing(MODEL, "claude-opus-4"))
    await fleet.service.models.step()
    await fleet.ok("fleet_spawn", profile="sonnet")


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (Reply(status=429, headers={"retry-after": "900"}), "throttled"),
        (Reply(status=500), "server_error"),
        (Reply(status=401), "auth"),
        (Reply(body=b"<html>not a catalog</html>"), "malformed"),
        (Reply(body=b'{"data": "nope"}'), "malformed"),
        (Reply(reset=True), "reset"),
    ],
    ids=["429", "500", "401", "garbage", "wrong-shape", "reset"],
)
async def test_a_failed_fetch_is_unknown_and_never_benches(
    tmp_path: Path, catalog: HookServer, reply: Reply, outcome: str
) -> None:
    """Throttled, erroring, refusing, garbage or cut off: the verdict is unknown, nothing is
    benched, the configured window stands, and the profile still places."""
    fleet = _fleet(tmp_path, catalog)
    catalog.answer(reply)
    await fleet.service.models.step()
    models = await _models(fleet)
    assert (models["sonnet"]["verdict"], models["sonnet"]["reason"]) == ("unknown", "fetch_failed")
    assert (models["sonnet"]["contextWindow"], models["sonnet"]["contextWindowSource"]) == (
        200_000,
        "config",
    )
    view = await fleet.ok("fleet_list", OPERATOR)
    [provider] = view["dependencies"]["providers"]
    assert (provider["lastOutcome"], provider["benched"]) == (outcome, [])
    await fleet.ok("fleet_spawn", profile="sonnet")


async def test_a_throttled_catalog_is_not_read_again_before_its_retry_after(
    tmp_path: Path, catalog: HookServer
) -> None:
    """A 429 asking for 15 minutes pushes the next probe past the 5-minute floor."""
    fleet = _fleet(tmp_path, catalog)
    catalog.answer(Reply(status=429, headers={"retry-after": "900"}))
    await fleet.service.models.step()
    fleet.clock.advance(600)
    await fleet.service.models.step()
    assert len(catalog.received) == 1
    fleet.clock.advance(300)
    catalog.answer(listing(MODEL))
    await fleet.service.models.step()
    assert len(catalog.received) == 2


async def test_a_hanging_catalog_times_out_on_the_watchdog(
    tmp_path: Path, catalog: HookServer
) -> None:
    """A provider that never answers is a timeout once the request watchdog passes on the
    injected clock: the step ends, the verdict is unknown, nothing is benched."""
    fleet = _fleet(tmp_path, catalog)
    catalog.answer(Reply(hang=True))
    step = asyncio.ensure_future(fleet.service.models.step())
    await asyncio.wait_for(catalog.arrived.wait(), timeout=5)
    assert not step.done()
    fleet.clock.advance(2.0)
    await asyncio.wait_for(step, timeout=5)
    view = await fleet.ok("fleet_list", OPERATOR)
    [provider] = view["dependencies"]["providers"]
    assert (provider["lastOutcome"], provider["lastError"]) == ("timeout", "timeout")
    assert (await _models(fleet))["sonnet"]["verdict"] == "unknown"


async def test_the_probe_never_runs_more_often_than_its_floor(
    tmp_path: Path, catalog: HookServer
) -> None:
    """Steps every few seconds read the catalog once per five minutes, and only ever
    GET /v1/models — never a completion."""
    fleet = _fleet(tmp_path, catalog)
    for _ in range(40):
        catalog.answer(listing(MODEL, "claude-opus-4"))
        await fleet.service.models.step()
        fleet.clock.advance(15)
    assert len(catalog.received) == 2  # at 0 s and at 300 s of 600 s
    assert {(r.method, r.path) for r in catalog.received} == {("GET", "/v1/models")}
