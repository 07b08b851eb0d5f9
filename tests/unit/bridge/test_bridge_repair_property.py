"""A property over random interleavings: repair resolves only when every gate held, at most once,
and never types anything into herdr.

Each example builds a member whose turn 2 was delivered with a recognised baseline, then runs a
random sequence of observations and events — herdr status changes, poller passes, fleet lists,
screen changes, pane reads that fail, the member's own reply, a queued send, a stop, time — with
repair calls in between. An oracle independent of the gate code keeps the observation log and
the screen, and checks every repair answer against what the gates demand.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from fleetd.bridge import RepairResult, TicketOutcome
from fleetd.bridge.sessions import SessionState
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from tests.unit.bridge.repair_fleet import (
    ERROR_SCREEN,
    LostTurn,
    assert_never_replayed,
    claude_screen,
    lost_turn,
    repair_fleet,
)

R = RepairResult
NEW = claude_screen("two", "Second answer.")
SCREENS = {
    "baseline": claude_screen("turn 0", "Answer 0."),
    "new": NEW,
    "raw": "plain shell text\n$ ",
    "error": ERROR_SCREEN,
}
RECOGNISED_NEW = {"new"}  # the only screen whose block is recognised, non-blank and new

Step = tuple[str, object]
_ARGS: dict[str, st.SearchStrategy[object]] = {
    "status": st.sampled_from([AgentStatus.DONE, AgentStatus.DONE, AgentStatus.IDLE, *AgentStatus]),
    "poll": st.none(),
    "snapshot": st.none(),
    "screen": st.sampled_from(["new", "new", *sorted(SCREENS)]),
    "read_fails": st.sampled_from([False, False, True]),
    "advance": st.sampled_from([1, 30, 61]),
    "reconcile": st.none(),
    "reply": st.none(),
    "send": st.none(),
    "stop": st.none(),
}
# Weighted so that gates often hold (many looks and repair calls), yet every event occurs.
_KINDS = [
    *["snapshot"] * 12,
    *["reconcile"] * 8,
    *["status"] * 6,
    *["screen"] * 6,
    *["poll"] * 3,
    *["read_fails"] * 3,
    *["advance"] * 3,
    *["send"] * 2,
    "reply",
    "stop",
]
STEPS = st.sampled_from(_KINDS).flatmap(lambda kind: st.tuples(st.just(kind), _ARGS[kind]))


@dataclass
class Oracle:
    """What the gates should see, kept without the gate code."""

    log: list[tuple[AgentStatus, int] | None] = field(default_factory=list)
    screen: str = "baseline"
    read_fails: bool = False
    repaired: int = 0

    def stable_with(self, fresh: tuple[AgentStatus, int]) -> bool:
        """The last two observations (the fresh look included) are at the prompt, one seq."""
        log = [*self.log, fresh]
        last, before = log[-1], log[-2] if len(log) > 1 else None
        return (
            before is not None
            and last is not None
            and last[0].at_prompt
            and before[0].at_prompt
            and last[1] == before[1]
        )


async def _step(lost: LostTurn, oracle: Oracle, step: Step, sent: list[str]) -> None:
    fleet, kind, arg = lost.fleet, step[0], step[1]
    sid = lost.session.session_id
    live = lost.session.live
    if kind == "status" and live:
        assert isinstance(arg, AgentStatus)
        lost.status(arg)
    elif kind == "poll":
        before = fleet.bridge.reads.open_turn(sid) is not None
        await fleet.poll()
        if before and live and fleet.bridge.reads.open_turn(sid) is not None:
            agent = await fleet.control.get_agent(lost.session.name)
            oracle.log.append((agent.agent_status, agent.state_change_seq))
    elif kind == "snapshot" and live:
        agent = await fleet.control.get_agent(lost.session.name)
        oracle.log.append((agent.agent_status, agent.state_change_seq))
        await lost.snapshot()
    elif kind == "screen" and live:
        assert isinstance(arg, str)
        oracle.screen = arg
        lost.show(SCREENS[arg])
    elif kind == "read_fails":
        oracle.read_fails = bool(arg)
        fleet.control.fail("read", HerdrError("pane_read_failed", "x") if arg else None)
    elif kind == "advance":
        assert isinstance(arg, int)
        fleet.clock.advance(arg)
    elif kind == "reply" and live:
        await fleet.call("fleet_reply", fleet.member(sid), content="structured")
    elif kind == "send" and live:
        result = await fleet.call("fleet_send", target=sid, prompt=f"next {len(sent)}")
        if result.ok and result.result is not None:
            sent.append(str(result.result["ticket"]))
    elif kind == "stop" and live:
        await fleet.call("fleet_stop", sessionId=sid)
    elif kind == "reconcile":
        await _reconcile(lost, oracle)


async def _reconcile(lost: LostTurn, oracle: Oracle) -> None:
    fleet, sid = lost.fleet, lost.session.session_id
    ticket = fleet.bridge.reads.ticket(lost.ticket)
    assert ticket is not None
    before_outcome = ticket.outcome
    before_state = lost.session.state
    turn = fleet.bridge.reads.open_turn(sid)
    was_open = turn is not None and turn.token.token_id == lost.token
    fresh = None
    if lost.session.live:
        agent = await fleet.control.get_agent(lost.session.name)
        fresh = (agent.agent_status, agent.state_change_seq)
    stable = fresh is not None and oracle.stable_with(fresh)
    mark = len(fleet.control.calls)
    outcome = await lost.reconcile()
    if was_open and fresh is not None:
        oracle.log.append(fresh)
    calls = fleet.control.calls[mark:]
    event(outcome.result.value)
    # never types anything: a lookup and at most one pane read
    assert {c.method for c in calls} <= {"get_agent", "read"}
    assert [c.method for c in calls].count("read") <= 1
    if outcome.result is R.REPAIRED:
        oracle.repaired += 1
        assert oracle.repaired == 1, "a ticket was repaired twice"
        assert was_open
        assert before_outcome is TicketOutcome.PENDING
        assert before_state is SessionState.BUSY
        assert stable, "repaired without two stable observations"
        assert oracle.screen in RECOGNISED_NEW
        assert not oracle.read_fails
        assert ticket.outcome is TicketOutcome.DONE
        assert ticket.source is not None
        assert ticket.source.value == "repaired"
    elif outcome.result is not R.ALREADY_RESOLVED:
        assert ticket.outcome is before_outcome, "a refusal changed the ticket"
        if before_state is SessionState.BUSY and lost.session.live:
            assert lost.session.state is SessionState.BUSY, "a refusal moved the turn"


async def _run(first_screen: str, steps: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as root:
        fleet = await repair_fleet(Path(root))
        lost = await lost_turn(fleet)
        oracle = Oracle()
        sent: list[str] = []
        for step in [("screen", first_screen), *steps]:
            await _step(lost, oracle, step, sent)
        await _reconcile(lost, oracle)
        tickets = [fleet.bridge.reads.ticket(t) for t in (lost.first, lost.ticket, *sent)]
        known = [t for t in tickets if t is not None]
        assert_never_replayed(fleet.control.calls, known)
        terminal = sum(1 for t in known if t.terminal)
        counted = sum(
            sample.value
            for metric in fleet.service.metrics.tickets_total.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )
        assert counted == terminal  # each ticket ended once, and was counted once


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["new", *sorted(SCREENS)]), st.lists(STEPS, min_size=2, max_size=30))
def test_repair_resolves_only_when_every_gate_held_once_and_types_nothing(
    first_screen: str, steps: list[Step]
) -> None:
    """Random interleavings of observations never make repair break a gate, twice, or type."""
    asyncio.run(_run(first_screen, steps))
