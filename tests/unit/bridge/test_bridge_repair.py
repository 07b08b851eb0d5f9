"""``reconcile_lost_boundary`` (the bridge's ``repair``) on fakes: one test per typed result,
races, the gate."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from fleetd.bridge import RepairResult, ResultSource
from fleetd.bridge.repair_gates import RETRY_DELAY
from fleetd.bridge.sessions import SessionEvent, SessionState
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.screens import (
    CLIPPED_TAIL_MARKER,
    COMPLETION_FALLBACK_MARKER,
    READ_FAILED_NOTE,
    REPAIRED_COMPLETION_MARKER,
    UNCHANGED_MARKER,
)
from fleetd.testing import TestFleet, hold_calls
from tests.metric_samples import sample
from tests.unit.bridge.repair_fleet import (
    ERROR_SCREEN,
    LostTurn,
    assert_never_replayed,
    calls_since,
    claude_screen,
    codex_screen,
    lost_turn,
    only_repair_calls,
    repair_fleet,
)
from tests.unit.bridge.turn_values import drop_capture

R = RepairResult
TOOLS_ONLY = "\n".join(
    ["❯ two", "", "● Read(README.md)", "  ⎿  Read 42 lines (ctrl+o to expand)", "", "❯ "]
)


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    return await repair_fleet(tmp_path)


def _ticket_status(lost: LostTurn) -> str:
    ticket = lost.fleet.bridge.reads.ticket(lost.ticket)
    assert ticket is not None
    return ticket.outcome.value


def _no_replay(lost: LostTurn) -> None:
    tickets = [lost.fleet.bridge.reads.ticket(t) for t in (lost.first, lost.ticket)]
    assert_never_replayed(lost.fleet.control.calls, [t for t in tickets if t is not None])


async def test_repaired_rebuilds_the_exact_waiter_once_with_distinct_markers(
    fleet: TestFleet,
) -> None:
    """Every gate holds: the ticket ends ``repaired``, marked; the turn is DONE by reconcile."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    mark = len(fleet.control.calls)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail, outcome.attempts) == (R.REPAIRED, "resolved", 1)
    assert outcome.reconstructed
    assert only_repair_calls(calls_since(fleet, mark))
    assert [c.method for c in calls_since(fleet, mark)].count("read") == 1
    polled = await fleet.ok("fleet_poll", ticket=lost.ticket)
    assert (polled["status"], polled["source"]) == ("done", "repaired")
    assert polled["content"] == f"{REPAIRED_COMPLETION_MARKER}\n\nSecond answer."
    inbox = (await fleet.ok("fleet_poll"))["messages"]
    assert [(m["ticket"], m["source"]) for m in inbox if m["ticket"] == lost.ticket] == [
        (lost.ticket, "repaired")
    ]
    assert lost.session.state is SessionState.DONE
    assert lost.session.history[-1][1] is SessionEvent.TURN_RECONCILED
    assert sample(fleet.service.metrics.tickets_total, outcome="done", source="repaired") == 1
    again = await lost.reconcile()
    assert again.result is R.ALREADY_RESOLVED  # never resolved twice
    assert sample(fleet.service.metrics.tickets_total, outcome="done", source="repaired") == 1
    _no_replay(lost)


async def test_repaired_clipped_text_keeps_the_clipped_tail_marker(tmp_path: Path) -> None:
    """A block longer than bridge.maxScrapeChars keeps its tail and both markers."""
    fleet = await repair_fleet(tmp_path, maxScrapeChars=40)
    lost = await lost_turn(fleet)
    long = "A long answer. " * 10 + "The end."
    await lost.finish_unseen(claude_screen("two", long))
    assert (await lost.reconcile()).result is R.REPAIRED
    content = (await fleet.ok("fleet_poll", ticket=lost.ticket))["content"]
    marker_lines, body = content.split("\n\n", 1)
    assert marker_lines.split("\n") == [REPAIRED_COMPLETION_MARKER, CLIPPED_TAIL_MARKER]
    assert len(body) == 40
    assert body.endswith("The end.")


async def test_already_resolved_when_the_reply_won_first(fleet: TestFleet) -> None:
    """The member's fleet_reply closed the waiter: nothing is read, nothing changes."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    await fleet.ok("fleet_reply", fleet.member(lost.session.session_id), content="my reply")
    mark = len(fleet.control.calls)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.ALREADY_RESOLVED, "resolved")
    assert not calls_since(fleet, mark)
    polled = await fleet.ok("fleet_poll", ticket=lost.ticket)
    assert (polled["source"], polled["content"]) == ("reply", "my reply")
    assert lost.session.history[-1][1] is SessionEvent.TURN_COMPLETED


async def test_already_resolved_on_the_same_turn_moves_it_from_busy_to_done(
    fleet: TestFleet,
) -> None:
    """A ticket that ended while the session still shows its turn BUSY: that turn becomes DONE."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    now = fleet.clock.now()
    # forced: the ticket ends while its turn stays open, a race no public operation leaves
    assert fleet.bridge.tasks.resolve(lost.ticket, content="x", source=ResultSource.REPLY, now=now)
    assert lost.session.state is SessionState.BUSY
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.ALREADY_RESOLVED, "resolved_same_turn")
    # mypy keeps the BUSY narrowing across the await: the state did move
    assert lost.session.state is SessionState.DONE  # type: ignore[comparison-overlap]
    assert lost.session.history[-1][1] is SessionEvent.TURN_COMPLETED
    assert fleet.bridge.reads.open_turn(lost.session.session_id) is None


async def test_refused_no_capture_reads_nothing_and_never_retries(fleet: TestFleet) -> None:
    """Without a capture of this very turn there is no evidence: refused for good."""
    lost = await lost_turn(fleet)
    # forced: a turn with no capture of its own (a restart's) has no public way in here
    drop_capture(fleet.bridge.roster, lost.session.session_id, fleet.clock.now())
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    mark = len(fleet.control.calls)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail, outcome.retry_at) == (
        R.REFUSED_NO_CAPTURE,
        "no_capture",
        None,
    )
    assert "read" not in [c.method for c in calls_since(fleet, mark)]
    assert _ticket_status(lost) == "pending"
    assert lost.session.state is SessionState.BUSY
    fleet.clock.advance(600)
    later = await lost.reconcile()
    assert (later.result, later.detail) == (R.REFUSED_NO_CAPTURE, "repair_stopped_for_token")
    assert later.attempts == 1
    _no_replay(lost)


async def test_refused_no_baseline_on_a_first_turn_without_an_assistant_marker(
    fleet: TestFleet,
) -> None:
    """The welcome screen has no assistant marker: the baseline is unrecognised, so no repair."""
    lost = await lost_turn(fleet, turns_before=0, first_screen=" ✻ Welcome to Claude Code!")
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.REFUSED_NO_BASELINE, "baseline_unrecognised")
    assert outcome.retry_at is None
    assert _ticket_status(lost) == "pending"


async def test_refused_no_baseline_when_the_capture_read_failed(fleet: TestFleet) -> None:
    """A failed baseline read never authorises repair."""
    sid = await fleet.spawn_ready()
    fleet.control.fail("read", HerdrError("pane_read_failed", "x"))
    await fleet.ok("fleet_send", target=sid, prompt="two")
    fleet.control.fail("read", None)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    turn = fleet.bridge.reads.open_turn(sid)
    assert turn is not None
    token = turn.token
    lost = LostTurn(fleet=fleet, session_id=sid, first="", ticket=token.ticket_id, token="")
    lost.token = token.token_id
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.REFUSED_NO_BASELINE, "baseline_read_failed")


async def test_refused_no_baseline_when_the_capture_came_late(fleet: TestFleet) -> None:
    """A baseline captured seconds after delivery is not evidence."""
    sid = await fleet.spawn_ready()
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    fleet.control.set_screen(session.pane_id, claude_screen("one", "Answer 0."))
    gate = hold_calls(fleet.control, "read")
    send = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="two"))
    await asyncio.wait_for(gate.entered.wait(), 5)
    fleet.clock.advance(3)
    gate.release()
    ticket = (await send)["ticket"]
    turn = fleet.bridge.reads.open_turn(sid)
    assert turn is not None
    token = turn.token.token_id
    lost = LostTurn(fleet=fleet, session_id=sid, first="", ticket=ticket, token=token)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.REFUSED_NO_BASELINE, "baseline_late")


@pytest.mark.parametrize(
    ("profile", "codex", "result"),
    [
        ("codex", False, R.REFUSED_NO_BASELINE),
        ("codex", True, R.REPAIRED),
        ("opencode", True, R.REFUSED_NO_BASELINE),
    ],
)
async def test_repair_per_agent_kind(
    tmp_path: Path, profile: str, codex: bool, result: RepairResult
) -> None:
    """Codex only behind health.repair.codex; OpenCode never."""
    fleet = await repair_fleet(tmp_path, health={"repair": {"codex": codex}})
    first = codex_screen("one", "Answer 0.") if profile == "codex" else None
    lost = await lost_turn(fleet, profile=profile, first_screen=first)
    await lost.finish_unseen(codex_screen("two", "Second answer."))
    outcome = await lost.reconcile()
    assert outcome.result is result
    if result is R.REFUSED_NO_BASELINE:
        assert outcome.detail == "kind_not_enabled"


async def test_refused_unreadable_gets_one_delayed_retry_then_stops(fleet: TestFleet) -> None:
    """UNREADABLE: one retry after the delay; a second refused scrape stops repair for the token."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    fleet.control.fail("read", HerdrError("pane_read_failed", "x"))
    first = await lost.reconcile()
    assert (first.result, first.detail) == (R.REFUSED_UNREADABLE, "pane_read_failed")
    assert first.retry_at == fleet.clock.now() + RETRY_DELAY
    early = await lost.reconcile()
    assert (early.result, early.detail, early.attempts) == (
        R.REFUSED_UNREADABLE,
        "retry_not_due",
        1,
    )
    fleet.clock.advance(RETRY_DELAY.total_seconds())
    await lost.snapshot()
    second = await lost.reconcile()
    assert (second.result, second.attempts, second.retry_at) == (R.REFUSED_UNREADABLE, 2, None)
    fleet.control.fail("read", None)
    fleet.clock.advance(600)
    mark = len(fleet.control.calls)
    stopped = await lost.reconcile()
    assert (stopped.result, stopped.detail) == (R.REFUSED_UNREADABLE, "repair_stopped_for_token")
    assert "read" not in [c.method for c in calls_since(fleet, mark)]
    assert _ticket_status(lost) == "pending"
    assert lost.session.state is SessionState.BUSY
    _no_replay(lost)


async def test_refused_unchanged_then_repaired_on_the_retry(fleet: TestFleet) -> None:
    """The answer on screen is still the previous one; a minute later the new one is there."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("turn 0", "Answer 0."))
    first = await lost.reconcile()
    assert (first.result, first.detail) == (R.REFUSED_UNCHANGED, "same_as_baseline")
    assert _ticket_status(lost) == "pending"
    lost.show(claude_screen("two", "Second answer."))
    fleet.clock.advance(RETRY_DELAY.total_seconds())
    retried = await lost.reconcile()
    assert (retried.result, retried.attempts) == (R.REPAIRED, 2)


@pytest.mark.parametrize(
    ("screen", "detail"),
    [
        ("some shell output\n$ ", "no_assistant_marker"),
        (ERROR_SCREEN, "error_on_screen"),
        (TOOLS_ONLY, "no_assistant_text"),
    ],
)
async def test_refused_ambiguous_output(fleet: TestFleet, screen: str, detail: str) -> None:
    """Raw text, an error block or no answer block: no reply is reconstructed."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(screen)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.REFUSED_AMBIGUOUS_OUTPUT, detail)
    assert outcome.retry_at is not None
    assert _ticket_status(lost) == "pending"


async def test_stale_turn_for_an_unknown_token_or_a_released_target(fleet: TestFleet) -> None:
    """A token this run never issued, or whose target is gone, is stale: nothing happens."""
    lost = await lost_turn(fleet)
    unknown = await fleet.bridge.repair.reconcile_lost_boundary(lost.session.name, "turn-nope")
    assert (unknown.result, unknown.detail) == (R.STALE_TURN, "token_unknown")
    await fleet.ok("fleet_stop", sessionId=lost.session.session_id)
    released = await lost.reconcile()
    assert (released.result, released.detail) == (R.STALE_TURN, "token_unknown")
    assert _ticket_status(lost) == "failed"


async def test_race_lost_without_two_stable_observations(fleet: TestFleet) -> None:
    """One sighting at the prompt (plus the fresh look) is not enough after a WORKING one."""
    lost = await lost_turn(fleet)
    lost.show(claude_screen("two", "Second answer."))
    lost.status(AgentStatus.DONE)
    await lost.snapshot()
    lost.status(AgentStatus.WORKING)
    await lost.snapshot()
    lost.status(AgentStatus.DONE)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "not_stable_at_prompt")
    assert outcome.retry_at is not None
    assert _ticket_status(lost) == "pending"


async def test_race_lost_to_a_fleet_reply_during_the_pane_read(fleet: TestFleet) -> None:
    """A fleet_reply arriving while repair reads the pane wins; repair rebuilds nothing."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    gate = hold_calls(fleet.control, "read")
    repair = asyncio.ensure_future(lost.reconcile())
    await asyncio.wait_for(gate.entered.wait(), 5)
    await fleet.ok("fleet_reply", fleet.member(lost.session.session_id), content="mine")
    gate.release()
    outcome = await repair
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "lost_at_resolution")
    polled = await fleet.ok("fleet_poll", ticket=lost.ticket)
    assert (polled["source"], polled["content"]) == ("reply", "mine")
    assert lost.session.history[-1][1] is SessionEvent.TURN_COMPLETED
    _no_replay(lost)


async def test_race_lost_while_the_member_reply_is_being_stored(fleet: TestFleet) -> None:
    """A reply being stored holds the turn: repair does not even read the pane."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    with fleet.bridge.completion.storing_reply(lost.session.session_id):
        outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "reply_being_stored")


async def test_race_lost_when_the_member_works_again_during_the_read(fleet: TestFleet) -> None:
    """A WORKING observation while the pane is read: the evidence moved, the race is lost."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    gate = hold_calls(fleet.control, "read")
    repair = asyncio.ensure_future(lost.reconcile())
    await asyncio.wait_for(gate.entered.wait(), 5)
    lost.status(AgentStatus.WORKING)
    await fleet.poll()
    gate.release()
    outcome = await repair
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "lost_at_resolution")
    assert _ticket_status(lost) == "pending"


async def test_the_reconciliation_gate_holds_a_queued_send_until_the_turn_is_done(
    fleet: TestFleet,
) -> None:
    """Between the waiter's resolution and the late-reply window no queued send is typed."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    gate = hold_calls(fleet.bridge.outbox, "keep")  # the repaired record on its way to the lead
    repair = asyncio.ensure_future(lost.reconcile())
    await asyncio.wait_for(gate.entered.wait(), 5)
    assert lost.session.state is SessionState.DONE  # the waiter is resolved, the FSM moved
    prompts = len(fleet.control.calls_to("prompt"))
    sent = await fleet.ok("fleet_send", target=lost.session.session_id, prompt="three")
    await fleet.poll()
    assert len(fleet.control.calls_to("prompt")) == prompts
    gate.release()
    assert (await repair).result is R.REPAIRED
    await fleet.poll(0.5)
    assert len(fleet.control.calls_to("prompt")) == prompts  # the late-reply window
    await fleet.poll(2.0)
    assert fleet.control.calls_to("prompt")[-1].args["text"] == "three"
    assert (await fleet.ok("fleet_poll", ticket=sent["ticket"]))["status"] == "pending"


async def test_concurrent_send_and_release_during_repair(fleet: TestFleet) -> None:
    """A stop while repair reads the pane: every ticket fails once, nothing is typed or rebuilt."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    gate = hold_calls(fleet.control, "read")
    repair = asyncio.ensure_future(lost.reconcile())
    await asyncio.wait_for(gate.entered.wait(), 5)
    queued = await fleet.ok("fleet_send", target=lost.session.session_id, prompt="three")
    await fleet.ok("fleet_stop", sessionId=lost.session.session_id)
    gate.release()
    outcome = await repair
    assert outcome.result is R.RACE_LOST
    for ticket in (lost.ticket, queued["ticket"]):
        assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "failed"
    assert sample(fleet.service.metrics.tickets_total, outcome="failed", source="none") == 2
    assert "three" not in [c.args["text"] for c in fleet.control.calls_to("prompt")]
    _no_replay(lost)


async def test_the_poller_leaves_a_turn_alone_while_a_resolver_holds_it(fleet: TestFleet) -> None:
    """During a repair the poller neither re-submits Enter nor runs the fallback on that turn."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    gate = hold_calls(fleet.control, "read")
    repair = asyncio.ensure_future(lost.reconcile())
    await asyncio.wait_for(gate.entered.wait(), 5)
    await fleet.poll(timedelta(seconds=5).total_seconds())
    assert not fleet.control.calls_to("send_keys")
    gate.release()
    assert (await repair).result is R.REPAIRED


async def test_an_agent_missing_from_a_fleet_list_breaks_the_stable_boundary(
    fleet: TestFleet,
) -> None:
    """A list without the member: the fresh look alone is one sighting, not two."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    fleet.bridge.repair.observe({})
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "not_stable_at_prompt")
    await lost.snapshot()  # a sighting after the gap, then the fresh look: two again
    fleet.clock.advance(RETRY_DELAY.total_seconds())
    assert (await lost.reconcile()).result is R.REPAIRED


async def test_an_unreadable_agent_on_a_poller_pass_breaks_the_stable_boundary(
    fleet: TestFleet,
) -> None:
    """herdr answering the member's lookup with an error counts as a conflicting observation."""
    lost = await lost_turn(fleet)
    await lost.finish_unseen(claude_screen("two", "Second answer."))
    fleet.control.fail("get_agent", HerdrError("agent_unreadable", "x"), target=lost.session.name)
    await fleet.poll()
    fleet.control.fail("get_agent", None, target=lost.session.name)
    outcome = await lost.reconcile()
    assert (outcome.result, outcome.detail) == (R.RACE_LOST, "not_stable_at_prompt")


async def test_the_observed_fallback_marks_text_equal_to_its_baseline(fleet: TestFleet) -> None:
    """After a trusted boundary the same guard core still resolves, but says the text is old."""
    lost = await lost_turn(fleet)
    lost.status(AgentStatus.WORKING)
    await fleet.poll()
    lost.status(AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)
    polled = await fleet.ok("fleet_poll", ticket=lost.ticket)
    assert (polled["status"], polled["source"]) == ("done", "fallback")
    assert polled["content"] == (f"{COMPLETION_FALLBACK_MARKER}\n{UNCHANGED_MARKER}\n\nAnswer 0.")
    assert lost.session.history[-1][1] is SessionEvent.TURN_COMPLETED


async def test_the_observed_fallback_stays_fail_open_without_a_baseline(fleet: TestFleet) -> None:
    """No capture and an unreadable pane: a trusted boundary still resolves, marked unreadable."""
    lost = await lost_turn(fleet)
    # forced: a turn with no capture of its own (a restart's) has no public way in here
    drop_capture(fleet.bridge.roster, lost.session.session_id, fleet.clock.now())
    lost.status(AgentStatus.WORKING)
    await fleet.poll()
    lost.status(AgentStatus.DONE)
    fleet.control.fail("read", HerdrError("pane_read_failed", "x"))
    await fleet.poll()
    await fleet.poll(1.0)
    polled = await fleet.ok("fleet_poll", ticket=lost.ticket)
    assert (polled["status"], polled["source"]) == ("done", "raw_fallback")
    assert polled["content"] == f"{COMPLETION_FALLBACK_MARKER}\n\n{READ_FAILED_NOTE}"
