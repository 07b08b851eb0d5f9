"""One capacity view for a benched profile (issue 20 3a, 3b): fleet_list, the idle-lead heartbeat
and placement say the same thing, and work to a live member is accepted with a flag.

The fleet is built by the production composition root; the model-health step runs on a fake
catalog that stops listing the profile's model, exactly as the ``model-health`` loop would.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetd.api.tools import Caller, Role
from fleetd.catalog.fake import FakeModelCatalog
from fleetd.testing import TestFleet, build_test_fleet, sample_document

OPERATOR = Caller(role=Role.OPERATOR, name="operator")
BENCH = timedelta(minutes=5)


@pytest.fixture
def catalog() -> FakeModelCatalog:
    """The provider's catalog: it lists sonnet's model until a test says otherwise."""
    fake = FakeModelCatalog()
    fake.lists("prov", {"sonnet-4": None})
    return fake


@pytest.fixture
async def fleet(tmp_path: Path, catalog: FakeModelCatalog) -> TestFleet:
    document = sample_document(tmp_path)
    document["providers"] = [{"name": "prov", "baseUrl": "http://catalog.invalid/v1"}]
    document["profiles"]["sonnet"] |= {"model": "sonnet-4", "provider": "prov"}
    built = build_test_fleet(tmp_path, document=document, catalog=catalog)
    await built.service.own_lead_keys()
    await built.service.models.step()
    return built


async def _bench(fleet: TestFleet, catalog: FakeModelCatalog) -> None:
    """The provider stops listing sonnet's model: the next probe benches the profile."""
    catalog.lists("prov", {"other": None})
    fleet.clock.advance(BENCH.total_seconds())
    await fleet.service.models.step()
    assert fleet.service.models.benched_until("sonnet", fleet.clock.now()) is not None


async def _row(fleet: TestFleet, caller: Caller = OPERATOR) -> dict[str, Any]:
    view = await fleet.ok("fleet_list", caller)
    row: dict[str, Any]
    [row] = [r for r in view["capacity"] if r["profile"] == "sonnet"]
    return row


async def _heartbeat(fleet: TestFleet) -> str:
    await fleet.service.push.push_once()
    beats = [
        c.args["text"]
        for c in fleet.control.calls_to("prompt")
        if c.args["target"] == "lead" and "Capacity:" in c.args["text"]
    ]
    return str(beats[-1])


async def test_a_benched_profile_has_no_free_slot_on_any_surface(
    fleet: TestFleet, catalog: FakeModelCatalog
) -> None:
    """sonnet live 1/2 with its model benched: fleet_list shows free 0 and benched, the
    heartbeat free 0 and the model down, placement refuses it with profile_benched."""
    await fleet.spawn_ready()
    await _bench(fleet, catalog)
    until = fleet.service.models.benched_until("sonnet", fleet.clock.now())
    assert until is not None

    row = await _row(fleet)
    assert (row["live"], row["maxLoad"], row["free"]) == (1, 2, 0)
    assert (row["benched"], row["benchedUntil"]) == (True, until.isoformat())

    beat = await _heartbeat(fleet)
    stamp = until.isoformat(timespec="minutes")
    assert f"sonnet live 1/2, free 0 (model down until {stamp}), reclaimable 1" in beat

    refused = await fleet.call("fleet_spawn", profile="sonnet")
    assert refused.error is not None
    assert refused.error.code == "profile_benched"
    assert refused.error.hint is not None
    assert "sonnet" not in refused.error.hint["profiles"]


async def test_the_surfaces_agree_again_once_the_bench_ends(
    fleet: TestFleet, catalog: FakeModelCatalog
) -> None:
    """The model listed again after the bench: free 1 everywhere, and placement grants it."""
    await fleet.spawn_ready()
    await _bench(fleet, catalog)
    catalog.lists("prov", {"sonnet-4": None})
    fleet.clock.advance(BENCH.total_seconds())
    await fleet.service.models.step()
    row = await _row(fleet)
    assert (row["free"], row["benched"], row["benchedUntil"]) == (1, False, None)
    fleet.clock.advance(fleet.bridge.settings().bridge.push.heartbeat_interval.total_seconds())
    assert "sonnet live 1/2, free 1, reclaimable 1" in await _heartbeat(fleet)
    await fleet.ok("fleet_spawn", profile="sonnet")


async def test_an_uncapped_benched_profile_shows_no_free_slot(
    tmp_path: Path,
) -> None:
    """An unlimited profile has free null, but not while benched: then free 0 like placement."""
    document = sample_document(tmp_path)
    document["providers"] = [{"name": "prov", "baseUrl": "http://catalog.invalid/v1"}]
    document["profiles"]["codex"] |= {"model": "gpt-5", "provider": "prov"}
    catalog = FakeModelCatalog()
    catalog.lists("prov", {"other": None})
    fleet = build_test_fleet(tmp_path, document=document, catalog=catalog)
    await fleet.service.models.step()
    view = await fleet.ok("fleet_list", OPERATOR)
    rows = {r["profile"]: r for r in view["capacity"]}
    assert (rows["codex"]["maxLoad"], rows["codex"]["free"], rows["codex"]["benched"]) == (
        None,
        0,
        True,
    )
    assert (rows["opencode"]["free"], rows["opencode"]["benched"]) == (None, False)
    refused = await fleet.call("fleet_spawn", profile="codex")
    assert refused.error is not None
    assert refused.error.code == "profile_benched"


async def test_work_to_a_live_member_of_a_benched_profile_is_accepted_and_flagged(
    fleet: TestFleet, catalog: FakeModelCatalog
) -> None:
    """Issue 20 3b: fleet_send is never refused for a bench, but its answer, fleet_status and
    the member's fleet_list row say the model is benched and until when."""
    sid = await fleet.spawn_ready()
    plain = await fleet.ok("fleet_send", target=sid, prompt="before")
    assert "modelHealth" not in plain
    assert "modelHealth" not in await fleet.ok("fleet_status", sessionId=sid)
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")

    await _bench(fleet, catalog)
    until = fleet.service.models.benched_until("sonnet", fleet.clock.now())
    assert until is not None
    flag = {"state": "benched", "benchedUntil": until.isoformat()}
    sent = await fleet.ok("fleet_send", target=sid, prompt="after")
    assert sent["status"] in ("pending", "delivered")
    assert sent["modelHealth"] == flag
    assert (await fleet.ok("fleet_status", sessionId=sid))["modelHealth"] == flag
    view = await fleet.ok("fleet_list")
    [member] = [m for m in view["members"] if m["sessionId"] == sid]
    assert member["modelHealth"] == flag
