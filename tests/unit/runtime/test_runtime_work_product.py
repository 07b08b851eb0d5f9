"""WORK_PRODUCT_AT_RISK for live members: commits ahead measured once per terminal edge (§9)."""

from __future__ import annotations

from pathlib import Path

from fleetd.bridge.worktrees import Worktree
from fleetd.testing import TestFleet, build_test_fleet, sample_document


async def _fleet(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["health"] = {"enabled": True}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    return fleet


def _count_measures(fleet: TestFleet) -> list[Worktree]:
    """Record every ``commits_ahead`` call the service makes on its worktrees."""
    calls: list[Worktree] = []
    original = fleet.worktrees.commits_ahead

    async def counted(worktree: Worktree) -> int:
        calls.append(worktree)
        return await original(worktree)

    fleet.worktrees.commits_ahead = counted  # type: ignore[method-assign]
    return calls


async def _ticks(fleet: TestFleet, count: int) -> None:
    for _ in range(count):
        fleet.clock.advance(30)
        await fleet.service.health.tick()


async def test_done_member_with_commits_ahead_is_work_product_at_risk(tmp_path: Path) -> None:
    """A live DONE member whose branch is ahead of its base earns the warning after long idle."""
    fleet = await _fleet(tmp_path)
    measures = _count_measures(fleet)
    sid = await fleet.spawn_ready("codex")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    await fleet.ok("fleet_send", target=sid, prompt="commit the fix")
    fleet.worktrees.add_commits(session.worktree, 3)
    await fleet.ok("fleet_reply", fleet.member(sid), content="committed")
    await fleet.ok("fleet_poll")  # collected: the member is done, not waiting on its lead
    await _ticks(fleet, 40)
    assert fleet.session(sid).live
    assert fleet.session(sid).commits_ahead == 3
    [incident] = (await fleet.ok("fleet_list"))["incidents"]
    assert (incident["state"], incident["subject"]) == ("WORK_PRODUCT_AT_RISK", sid)
    assert incident["severity"] == "warning"
    assert measures == [session.worktree]  # one edge, one measurement, not one per tick


async def test_each_new_terminal_edge_is_measured_again(tmp_path: Path) -> None:
    """A later turn is a new edge: its count replaces the old one; steady ticks measure nothing."""
    fleet = await _fleet(tmp_path)
    measures = _count_measures(fleet)
    sid = await fleet.spawn_ready("codex")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    await _ticks(fleet, 3)
    assert measures == []  # READY is not a terminal edge
    await fleet.ok("fleet_send", target=sid, prompt="look only")
    await fleet.ok("fleet_reply", fleet.member(sid), content="nothing to commit")
    await _ticks(fleet, 3)
    assert (len(measures), fleet.session(sid).commits_ahead) == (1, 0)
    await fleet.ok("fleet_send", target=sid, prompt="now commit")
    fleet.worktrees.add_commits(session.worktree, 1)
    await fleet.ok("fleet_reply", fleet.member(sid), content="committed")
    await _ticks(fleet, 3)
    assert (len(measures), fleet.session(sid).commits_ahead) == (2, 1)


async def test_edges_past_the_per_tick_limit_are_measured_at_the_next_ticks(
    tmp_path: Path,
) -> None:
    """Ten members reach an edge at once: eight are measured this tick and the other two at the
    next, though nothing about them changed in between; then nothing is measured again."""
    fleet = await _fleet(tmp_path)
    measures = _count_measures(fleet)
    sids = [await fleet.spawn_ready("codex") for _ in range(10)]
    await _ticks(fleet, 1)
    for sid in sids:
        await fleet.ok("fleet_send", target=sid, prompt="look only")
        await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    await _ticks(fleet, 1)
    assert len(measures) == 8
    await _ticks(fleet, 1)
    assert len(measures) == 10
    assert all(fleet.session(sid).commits_ahead == 0 for sid in sids)
    await _ticks(fleet, 3)
    assert len(measures) == 10
