"""Regressions: concurrent replies, double stops, uncertain delivery, mutes, failed spawns."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fleetd.errors import ControlLinkError, HerdrError, InboxUnavailableError, WorktreeError
from fleetd.herdr.model import AgentInfo, PaneInfo
from fleetd.herdr.protocol import encode_request
from fleetd.inbox.records import InboxRecord
from fleetd.testing import TestFleet, build_test_fleet, hold_calls


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


async def test_concurrent_replies_are_all_kept_even_when_one_publish_fails(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two members reply at once on a slow inbox that fails once: the refused one retries, both
    replies arrive."""
    a, b = await fleet.spawn_ready(), await fleet.spawn_ready("codex")
    await fleet.ok("fleet_send", target=a, prompt="x")
    await fleet.ok("fleet_send", target=b, prompt="y")
    publish = fleet.inbox.publish
    failures = iter([False, True])

    async def slow(record: InboxRecord) -> bool:
        await asyncio.sleep(0)
        if next(failures, False):
            raise InboxUnavailableError("blip")
        return await publish(record)

    monkeypatch.setattr(fleet.inbox, "publish", slow)
    results = await asyncio.gather(
        fleet.call("fleet_reply", fleet.member(a), content="answer A"),
        fleet.call("fleet_reply", fleet.member(b), content="answer B"),
    )
    refused = [(sid, n) for sid, n, r in zip((a, b), "AB", results, strict=True) if not r.ok]
    assert len(refused) == 1  # refused with a retryable error, never silently held
    assert all(r.error is None or r.error.code == "inbox_unavailable" for r in results)
    sid, name = refused[0]
    await fleet.ok("fleet_reply", fleet.member(sid), content=f"answer {name}")
    contents = sorted(m["content"] for m in (await fleet.ok("fleet_poll"))["messages"])
    assert contents == ["answer A", "answer B"]
    assert fleet.bridge.reads.unpublished == []


async def test_a_reply_whose_caller_leaves_while_it_is_stored_still_resolves_its_turn(
    fleet: TestFleet,
) -> None:
    """A dropped fleet_reply request never leaves a stored reply with its ticket pending."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    gate = hold_calls(fleet.inbox, "publish")
    replying = asyncio.ensure_future(fleet.call("fleet_reply", fleet.member(sid), content="kept"))
    await gate.entered.wait()
    replying.cancel()
    with pytest.raises(asyncio.CancelledError):
        await replying
    gate.release()
    for _ in range(10):
        await asyncio.sleep(0)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["content"]) == ("done", "kept")
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [(m["ticket"], m["content"]) for m in messages] == [(ticket, "kept")]


async def test_a_retried_stop_joins_the_first_and_never_removes_a_preserved_worktree(
    fleet: TestFleet,
) -> None:
    """A second stop during the first gets the first's outcome; the worktree is preserved."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", HerdrError("agent_blocked", "blocked"))
    await fleet.ok("fleet_send", target=sid, prompt="x")
    gate = hold_calls(fleet.control, "close_pane")
    first = asyncio.ensure_future(fleet.ok("fleet_stop", sessionId=sid))
    await asyncio.wait_for(gate.entered.wait(), 5)
    second = asyncio.ensure_future(fleet.ok("fleet_stop", sessionId=sid))
    await asyncio.sleep(0)
    gate.release()
    one, two = await first, await second
    assert one == two
    assert one["cause"] == "release_with_pending_tasks"
    assert one["worktree"] == "preserve"
    assert fleet.worktrees.removed == []


async def test_uncertain_delivery_is_never_typed_again(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """herdr typed the prompt but the answer was lost: the turn opens, the prompt is not re-sent."""
    sid = await fleet.spawn_ready()
    prompt = fleet.control.prompt

    async def typed_then_lost(target: str, text: str) -> AgentInfo:
        await prompt(target, text)
        raise ControlLinkError("request_timeout", "no answer")

    monkeypatch.setattr(fleet.control, "prompt", typed_then_lost)
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="once only"))["ticket"]
    for _ in range(5):
        await fleet.poll()
    assert [c.args["text"] for c in fleet.control.calls_to("prompt")] == ["once only"]
    assert (await fleet.ok("fleet_status", sessionId=sid))["openTurn"]["ticket"] == ticket


async def test_link_failure_before_sending_keeps_the_send_queued(fleet: TestFleet) -> None:
    """A connect failure means nothing was typed: the send waits and is delivered later, once."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("prompt", ControlLinkError("connect_failed", "refused"))
    await fleet.ok("fleet_send", target=sid, prompt="later")
    assert (await fleet.ok("fleet_status", sessionId=sid))["queued"] == 1
    fleet.control.fail("prompt", None)
    await fleet.poll()
    texts = [c.args["text"] for c in fleet.control.calls_to("prompt")]
    assert texts.count("later") == 2  # one refused attempt, one delivery
    assert (await fleet.ok("fleet_status", sessionId=sid))["queued"] == 0


async def test_mute_counting_survives_the_kept_tail(fleet: TestFleet) -> None:
    """Past the kept tail of fallback events, new ones still reach the monitor."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    monitor = fleet.service.health
    for _ in range(1005):
        fleet.bridge.mutes.note(session_id=sid, profile=session.profile, at=fleet.clock.now())
    assert monitor._new_mutes() == {sid: 1000}
    for _ in range(3):
        fleet.bridge.mutes.note(session_id=sid, profile=session.profile, at=fleet.clock.now())
    assert monitor._new_mutes() == {sid: 3}
    assert monitor._new_mutes() == {}


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (WorktreeError("provision", "invalid_argument"), 422, "invalid_arguments"),
        (WorktreeError("provision", "git_failed"), 409, "conflict"),
    ],
)
async def test_worktree_failures_are_lead_errors(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch, error: WorktreeError, status: int, code: str
) -> None:
    """A worktree that cannot be made is a clear tool error, and nothing holds a slot."""

    async def refuse(**_kw: object) -> object:
        raise error

    monkeypatch.setattr(fleet.worktrees, "provision", refuse)
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert result.error is not None
    assert (result.error.code, result.error.http_status) == (code, status)
    assert fleet.bridge.reads.live_members() == []


async def test_herdr_down_during_spawn_is_unavailable_and_rolled_back(fleet: TestFleet) -> None:
    """No herdr: 503 unavailable, the worktree removed, capacity free again."""
    fleet.control.fail("create_pane", ControlLinkError("connect_failed", "refused"))
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert result.error is not None
    assert (result.error.code, result.error.http_status) == ("unavailable", 503)
    assert len(fleet.worktrees.removed) == 1
    assert fleet.bridge.reads.live_members() == []


def _answer_lost_after_create(fleet: TestFleet, monkeypatch: pytest.MonkeyPatch) -> list[PaneInfo]:
    """herdr makes each pane asked for, then its answer is lost; returns the panes it made."""
    create = fleet.control.create_pane
    made: list[PaneInfo] = []

    async def made_then_timed_out(**kwargs: Any) -> PaneInfo:
        made.append(await create(**kwargs))
        raise ControlLinkError("request_timeout", "no answer in time")

    monkeypatch.setattr(fleet.control, "create_pane", made_then_timed_out)
    return made


@pytest.mark.parametrize("lookup", ["answers", "fails"])
async def test_a_pane_made_but_answered_late_is_closed_not_leaked(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch, lookup: str
) -> None:
    """herdr made the pane, then its answer was lost (the request timed out): the spawn still
    fails as unavailable, and the pane, found by its workspace's label, is closed; when herdr
    cannot be asked either, the log names the label to look for."""
    made = _answer_lost_after_create(fleet, monkeypatch)
    if lookup == "fails":
        fleet.control.fail("labelled_panes", ControlLinkError("request_timeout", "slow"))
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert result.error is not None
    assert result.error.code == "unavailable"
    [pane] = made
    closed = [c.args["pane_id"] for c in fleet.control.calls_to("close_pane")]
    assert closed == ([pane.pane_id] if lookup == "answers" else [])
    assert fleet.bridge.reads.live_members() == []


async def test_a_lost_create_answer_never_closes_a_pane_fleetd_did_not_make(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's shell sits in a workspace labelled like the member the lead names: a lost
    create answer closes only the pane this spawn made, never theirs."""
    theirs = await fleet.control.create_pane(label="docs")
    made = _answer_lost_after_create(fleet, monkeypatch)
    result = await fleet.call("fleet_spawn", profile="sonnet", name="docs")
    assert result.error is not None
    [ours] = made
    closed = [c.args["pane_id"] for c in fleet.control.calls_to("close_pane")]
    assert closed == [ours.pane_id]
    assert theirs.pane_id not in closed


async def test_a_pane_refused_before_it_was_sent_is_not_looked_for(fleet: TestFleet) -> None:
    """A create that never left (connect refused) made nothing: nothing is closed."""
    fleet.control.fail("create_pane", ControlLinkError("connect_failed", "refused"))
    await fleet.call("fleet_spawn", profile="sonnet")
    assert fleet.control.calls_to("close_pane") == []
    assert len(fleet.control.calls_to("labelled_panes")) == 1  # only the look before the create


async def test_unexpected_spawn_failure_still_rolls_back(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a disk error while writing launch files leaves nothing half-started."""

    def disk_full(_plan: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("fleetd.bridge.spawn.write_launch_files", disk_full)
    result = await fleet.call("fleet_spawn", profile="sonnet")
    assert result.error is not None
    assert result.error.code == "internal_error"
    assert fleet.bridge.reads.live_members() == []
    assert len(fleet.worktrees.removed) == 1


async def test_stop_during_spawn_closes_the_late_pane(fleet: TestFleet) -> None:
    """A member stopped while its pane is being made does not leave that pane behind."""
    gate = hold_calls(fleet.control, "create_pane")
    spawn = asyncio.ensure_future(fleet.call("fleet_spawn", profile="sonnet"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    [session] = fleet.bridge.reads.live_members()
    await fleet.ok("fleet_stop", sessionId=session.session_id)
    gate.release()
    result = await spawn
    assert result.error is not None
    assert result.error.code == "conflict"
    closed = [c.args["pane_id"] for c in fleet.control.calls_to("close_pane")]
    assert len(closed) == 1
    assert fleet.control.calls_to("start_agent") == []


async def test_text_that_cannot_be_utf8_is_refused_at_the_tool(fleet: TestFleet) -> None:
    """A lone surrogate (valid JSON, invalid UTF-8) is a 422, not a stuck queue or a 500."""
    sid = await fleet.spawn_ready()
    lone = json.loads('"hello \\ud83d"')
    sent = await fleet.call("fleet_send", target=sid, prompt=lone)
    assert sent.error is not None
    assert sent.error.code == "invalid_arguments"
    assert (await fleet.ok("fleet_status", sessionId=sid))["queued"] == 0
    replied = await fleet.call("fleet_reply", fleet.member(sid), content=lone)
    assert replied.error is not None
    assert replied.error.code == "invalid_arguments"


def test_herdr_request_with_a_lone_surrogate_is_a_herdr_error() -> None:
    """The protocol layer refuses such text as invalid params instead of crashing."""
    with pytest.raises(HerdrError) as caught:
        encode_request("1", "pane.send_text", {"pane_id": "w1:p1", "text": "\ud83d"})
    assert caught.value.code == "invalid_params"
