"""Members a previous run left: marks, orphans, and the edges of finding and stopping them."""

from __future__ import annotations

import json
from pathlib import Path

from fleetd.bridge.marks import SESSIONS_DIR, load_marks
from fleetd.errors import ControlLinkError, HerdrError
from fleetd.testing import TestFleet, build_test_fleet


async def _crashed(tmp_path: Path) -> tuple[TestFleet, str]:
    """A first run with one ready member, whose loops then die with nothing released."""
    first = build_test_fleet(tmp_path)
    await first.service.start()
    sid = await first.spawn_ready()
    await first.service.scheduler.stop()
    return first, sid


def _marks(fleet: TestFleet) -> list[str]:
    return [m.session_id for m in load_marks(fleet.root / "worktrees" / SESSIONS_DIR)]


async def test_a_release_removes_the_mark_of_a_closed_pane(tmp_path: Path) -> None:
    """A member that is stopped normally leaves no mark, and no session directory, behind: the
    sessions directory does not grow with every member ever spawned."""
    fleet = build_test_fleet(tmp_path)
    sid = await fleet.spawn_ready()
    sessions = fleet.root / "worktrees" / SESSIONS_DIR
    assert _marks(fleet) == [sid]
    assert (sessions / sid).is_dir()
    await fleet.ok("fleet_stop", sessionId=sid)
    assert _marks(fleet) == []
    assert list(sessions.iterdir()) == []


async def test_a_pane_herdr_could_not_close_is_an_orphan_of_the_next_run(tmp_path: Path) -> None:
    """With the link down at release the mark stays, and the next run finds the member."""
    first = build_test_fleet(tmp_path)
    await first.service.start()
    sid = await first.spawn_ready()
    first.control.fail("close_pane", ControlLinkError("connect_failed", "down"))
    await first.service.stop()
    assert _marks(first) == [sid]
    first.control.fail("close_pane", None)
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        [row] = (await second.ok("fleet_list"))["members"]
        assert (row["sessionId"], row["state"]) == (sid, "orphaned")
    finally:
        await second.service.stop()


async def test_a_member_gone_before_the_restart_is_forgotten_with_its_worktree_listed(
    tmp_path: Path,
) -> None:
    """A mark whose pane herdr no longer lists is dropped; its worktree gets a GONE manifest."""
    first, sid = await _crashed(tmp_path)
    session = first.bridge.reads.session(sid)
    assert session is not None
    assert session.worktree is not None
    session.worktree.path.mkdir(parents=True)
    first.control.remove(session.name)
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        listed = await second.ok("fleet_list")
        assert listed["members"] == []
        [preserved] = listed["preservedWorktrees"]
        assert (preserved["sessionId"], preserved["cause"], preserved["state"]) == (
            sid,
            "gone",
            "orphaned",
        )
        assert _marks(second) == []
    finally:
        await second.service.stop()


async def test_orphans_are_found_once_herdr_answers(tmp_path: Path) -> None:
    """A start with herdr down finds nothing yet; the orphan check finds it when herdr is back."""
    first, sid = await _crashed(tmp_path)
    first.control.link_down()
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        assert second.bridge.orphans.members() == []
        first.control.link_up()
        await second.clock.run(12, step=1)
        assert [o.mark.session_id for o in second.bridge.orphans.members()] == [sid]
    finally:
        await second.service.stop()


async def test_an_orphan_that_cannot_be_stopped_stays_counted(tmp_path: Path) -> None:
    """With herdr unreachable, stopping an orphan is unavailable and it keeps its slot."""
    first, sid = await _crashed(tmp_path)
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        first.control.fail("close_pane", ControlLinkError("connect_failed", "down"))
        result = await second.call("fleet_stop", sessionId=sid)
        assert result.error is not None
        assert result.error.code == "unavailable"
        capacity = {c["profile"]: c for c in (await second.ok("fleet_list"))["capacity"]}
        assert (capacity["sonnet"]["live"], capacity["sonnet"]["orphaned"]) == (1, 1)
        assert _marks(second) == [sid]
    finally:
        first.control.fail("close_pane", None)
        await second.service.stop()


async def test_another_lead_sees_and_stops_no_orphan_of_others(tmp_path: Path) -> None:
    """An orphan is its owner's: another lead neither lists nor stops it; the operator lists it."""
    first, sid = await _crashed(tmp_path)
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        other = second.lead.__class__(role=second.lead.role, name="lead-b")
        assert (await second.ok("fleet_list", other))["members"] == []
        refused = await second.call("fleet_stop", other, sessionId=sid)
        assert refused.error is not None
        assert refused.error.code == "unknown_target"
        operator = second.service.authenticator.authenticate("Bearer operator-token-for-tests-0001")
        assert [m["state"] for m in (await second.ok("fleet_list", operator))["members"]] == [
            "orphaned"
        ]
    finally:
        await second.service.stop()


def test_unreadable_marks_are_skipped(tmp_path: Path) -> None:
    """A launch directory without a mark, a torn mark or a misnamed one is not acted on."""
    sessions = tmp_path / SESSIONS_DIR
    (sessions / "s-launch").mkdir(parents=True)
    (sessions / "s-torn").mkdir()
    (sessions / "s-torn" / "member.json").write_text("{")
    (sessions / "s-other").mkdir()
    (sessions / "s-other" / "member.json").write_text(
        json.dumps({"schemaVersion": 1, "sessionId": "s-else"})
    )
    assert load_marks(sessions) == ()
    assert load_marks(tmp_path / "absent") == ()


async def test_the_idle_lead_heartbeat_counts_orphans_as_placement_does(tmp_path: Path) -> None:
    """An orphan's slot is not shown free to an idle lead: placement refuses it too."""
    first, _ = await _crashed(tmp_path)
    second = build_test_fleet(tmp_path, control=first.control)
    await second.service.start()
    try:
        await second.service.scheduler.stop()  # the push loop is driven by hand below
        await second.spawn_ready()
        before = len(second.control.calls_to("prompt"))  # herdr is shared with the first run
        await second.service.push.push_once()
        beats = [
            c.args["text"]
            for c in second.control.calls_to("prompt")[before:]
            if c.args["target"] == "lead" and "Capacity:" in c.args["text"]
        ]
        assert len(beats) == 1
        assert "sonnet live 2/2, free 0, reclaimable 1, orphaned 1" in beats[0]
        refused = await second.call("fleet_spawn", profile="sonnet")
        assert refused.error is not None
        assert refused.error.code == "capacity_exceeded"
    finally:
        await second.service.stop()


async def test_a_pane_herdr_did_not_close_at_a_stop_stays_counted_and_stoppable(
    tmp_path: Path,
) -> None:
    """fleet_stop in this run: herdr does not close the pane (the link timed out), so its agent
    may still run. It stays an orphan of this run, holding its slot of a maxLoad-2 profile (a
    third member is refused), shown with state orphaned; stopping it again closes the pane and
    frees the slot."""
    fleet = build_test_fleet(tmp_path)
    first = await fleet.spawn_ready()
    await fleet.spawn_ready()
    pane = fleet.session(first).pane_id
    fleet.control.fail("close_pane", ControlLinkError("request_timeout", "slow"))
    await fleet.ok("fleet_stop", sessionId=first)
    fleet.control.fail("close_pane", None)
    listed = await fleet.ok("fleet_list")
    capacity = {c["profile"]: c for c in listed["capacity"]}
    assert (capacity["sonnet"]["live"], capacity["sonnet"]["orphaned"]) == (2, 1)  # both run
    assert (first, "orphaned") in [(m["sessionId"], m["state"]) for m in listed["members"]]
    third = await fleet.call("fleet_spawn", profile="sonnet")
    assert third.error is not None
    assert third.error.code == "capacity_exceeded"
    stopped = await fleet.ok("fleet_stop", paneId=pane)
    assert stopped["orphaned"] is True
    assert pane not in fleet.control._panes  # herdr closed it
    assert first not in _marks(fleet)
    await fleet.ok("fleet_spawn", profile="sonnet")


async def test_an_unclosed_pane_herdr_then_no_longer_lists_is_forgotten(tmp_path: Path) -> None:
    """A pane herdr did not close but closed later (or lost) is found gone by the next orphan
    check: its slot is free again and its mark removed."""
    fleet = build_test_fleet(tmp_path)
    sid = await fleet.spawn_ready()
    pane = fleet.session(sid).pane_id
    assert pane is not None
    fleet.control.fail("close_pane", ControlLinkError("request_timeout", "slow"))
    await fleet.ok("fleet_stop", sessionId=sid)
    fleet.control.fail("close_pane", None)
    assert [o.mark.session_id for o in fleet.bridge.orphans.members()] == [sid]
    await fleet.control.close_pane(pane)
    await fleet.bridge.orphans.check()
    assert fleet.bridge.orphans.members() == []
    assert _marks(fleet) == []


async def test_a_rolled_back_shell_herdr_did_not_close_is_closed_at_a_later_check(
    tmp_path: Path,
) -> None:
    """A spawn rolls back before its agent started (herdr refused agent.start) and herdr does not
    close its pane either: the shell is not in agent.list, yet it is not forgotten while it stays
    open — the next orphan check asks herdr again, and once herdr closes it the slot is free."""
    fleet = build_test_fleet(tmp_path)
    fleet.control.fail("start_agent", HerdrError("agent_start_failed", "no"))
    fleet.control.fail("close_pane", ControlLinkError("request_timeout", "slow"))
    refused = await fleet.call("fleet_spawn", profile="sonnet")
    assert refused.error is not None
    [orphan] = fleet.bridge.orphans.members()
    shell = orphan.mark.pane_id
    assert shell in fleet.control._panes
    await fleet.bridge.orphans.check()  # herdr still cannot close it: still held
    assert [o.mark.pane_id for o in fleet.bridge.orphans.members()] == [shell]
    fleet.control.fail("close_pane", None)
    await fleet.bridge.orphans.check()
    assert shell not in fleet.control._panes
    assert fleet.bridge.orphans.members() == []
    assert _marks(fleet) == []
