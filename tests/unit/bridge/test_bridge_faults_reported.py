"""Faults the bridge handles itself still reach the lead, and never cost a member's work: a
launch herdr gives up on is told to the lead that spawned the member, and a pane herdr did not
close keeps its worktree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetd.errors import ControlLinkError
from fleetd.testing import TestFleet, build_test_fleet, sample_document


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True}
    built = build_test_fleet(tmp_path, document=document)
    await built.service.own_lead_keys()
    return built


async def _health_records_about(fleet: TestFleet, sid: str) -> list[dict[str, Any]]:
    """The health records in the lead's inbox that name the member, after a few ticks."""
    for _ in range(4):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    messages = (await fleet.ok("fleet_poll"))["messages"]
    return [m for m in messages if m["kind"] == "health" and sid in json.dumps(m)]


async def test_a_launch_given_up_before_anything_was_sent_is_told_to_the_lead(
    fleet: TestFleet,
) -> None:
    """herdr gives up on a member's launch before the lead sent it anything: the spawn rolls
    back (its worktree goes), and the lead that spawned it gets a NEVER_READY record saying the
    launch failed, instead of a member that vanished without a word."""
    sid = (await fleet.ok("fleet_spawn", profile="sonnet"))["sessionId"]
    fleet.control.fail_launch(fleet.session(sid).name)
    await fleet.poll()
    session = fleet.session(sid)
    assert session.released_cause == "spawn_rollback"
    assert fleet.worktrees.live == {}
    records = await _health_records_about(fleet, sid)
    assert [record["state"] for record in records][:1] == ["NEVER_READY"]
    assert "launch_failed" in json.dumps(records[0])


async def test_a_pane_herdr_did_not_close_keeps_its_worktree(fleet: TestFleet) -> None:
    """A stop of a member at rest would remove its clean worktree; herdr does not close the pane
    (the link times out), so the agent may still run there: the worktree is kept and the stop
    says so."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("close_pane", ControlLinkError("request_timeout", "slow"))
    answer = await fleet.ok("fleet_stop", sessionId=sid)
    assert (answer["cause"], answer["worktree"]) == ("completed", "preserve")
    assert len(fleet.worktrees.live) == 1
    assert fleet.worktrees.deleted_branches == []


async def test_a_pane_herdr_closed_lets_a_clean_worktree_go(fleet: TestFleet) -> None:
    """The same stop with the pane closed removes the clean worktree (the test above is about
    the pane, not about stops in general)."""
    sid = await fleet.spawn_ready()
    answer = await fleet.ok("fleet_stop", sessionId=sid)
    assert (answer["cause"], answer["worktree"]) == ("completed", "remove")
    assert fleet.worktrees.live == {}
