"""The post-teardown invariant of M4 §8.5, on the bridge ``fleetd serve`` builds (fakes under it).

Each part is checked apart from the failure operation it guards: a member is stopped through
``fleet_stop`` with a delivered turn, a queued send and a caller waiting, the invariant holds,
and then one regression at a time is written into what the bridge holds, as a late or broken write
would leave it (straight into the roster and the ticket book: no public operation makes these
broken states); the check names exactly the part it breaks. Then the same through the health tick:
a regression after teardown becomes DELEGATION_ORPHANED under its name, the monitor's one retry
of the failure operation runs, and the incident resolves once the invariant holds again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetd.bridge import Ticket
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import Session, SessionState
from fleetd.bridge.teardown_check import TeardownInvariant, check_teardown
from fleetd.bridge.turns import TurnToken
from fleetd.health.settings import TEARDOWN_GRACE
from fleetd.health.states import MemberState
from fleetd.testing import TestFleet, build_test_fleet, sample_document
from tests.unit.bridge.turn_values import open_turn

TI = TeardownInvariant


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    document: dict[str, Any] = sample_document(tmp_path)
    document["health"] = {"enabled": True, "snapshotIntervalSeconds": 15}
    built = build_test_fleet(tmp_path, document=document)
    await built.service.own_lead_keys()
    return built


async def _stopped(fleet: TestFleet) -> tuple[Session, list[str]]:
    """A member stopped with a delivered turn, a queued send and a caller waiting on it."""
    sid = await fleet.spawn_ready()
    first = (await fleet.ok("fleet_send", target=sid, prompt="first"))["ticket"]
    second = (await fleet.ok("fleet_send", target=sid, prompt="second"))["ticket"]
    waiting = asyncio.ensure_future(fleet.ok("fleet_send", target=sid, prompt="third", wait=60))
    for _ in range(100):  # let the synchronous send be accepted; it then waits
        if len(fleet.bridge.reads.pending_for(sid)) == 3:
            break
        await asyncio.sleep(0)
    assert len(fleet.bridge.reads.pending_for(sid)) == 3
    stopped = await fleet.ok("fleet_stop", sessionId=sid)
    assert stopped["cause"] == "release_with_pending_tasks"
    third = (await waiting)["ticket"]
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.state is SessionState.RELEASED
    return session, [first, second, third]


def _check(fleet: TestFleet, session: Session) -> tuple[TeardownInvariant, ...]:
    return check_teardown(session, roster=fleet.bridge.roster, tasks=fleet.bridge.tasks)


def _open_a_turn(bridge: Bridge, session: Session) -> None:
    """A delivery that finished after the teardown opens a turn on the released target."""
    token = TurnToken(
        token_id="turn-late", session_id=session.session_id, ticket_id="t-late", turn=9
    )
    bridge.roster.inflight.close(session.session_id, "test", bridge.clock.now())
    open_turn(bridge.roster, token, bridge.clock.now())


def _mark_delivered(bridge: Bridge, session: Session) -> None:
    """A completion record for the target after its teardown, written past the ticket table
    (which refuses to type an ended ticket: ``test_ticket_machine.py``)."""
    [ticket, *_] = session.teardown_tickets
    found = bridge.reads.ticket(ticket)
    assert found is not None
    bridge.tasks.restore(dataclasses.replace(found, turn=9, delivered_at=bridge.clock.now()))


def _stray(bridge: Bridge, session: Session, *, waited: bool = False) -> None:
    """A send accepted for the target after its teardown (and, with ``waited``, a caller)."""
    ticket = bridge.tasks.accept(
        target=session.session_id, owner="lead", prompt="x", now=bridge.clock.now(), nonce="s"
    )
    if waited:
        _ = ticket.done_event  # a synchronous caller waits on it


def _queue(bridge: Bridge, session: Session) -> None:
    """The target's send queue, kept (or made again) after its teardown."""
    bridge.roster.queues[session.session_id] = ()


def _readd(bridge: Bridge, session: Session) -> None:
    """The released session put back in the roster, so a lookup by its name finds it again."""
    bridge.roster.add(session)


def _count_again(bridge: Bridge, session: Session) -> None:
    """An old ticket's end counted a second time."""
    ticket = bridge.reads.ticket(session.teardown_tickets[0])
    assert ticket is not None
    bridge.tasks.on_terminal(ticket)


REGRESSIONS: list[tuple[str, Callable[[Bridge, Session], None], tuple[TeardownInvariant, ...]]] = [
    ("queue-kept", _queue, (TI.QUEUE,)),
    ("turn-opened-late", _open_a_turn, (TI.TURN,)),
    ("completion-record-written-late", _mark_delivered, (TI.TURN,)),
    ("waiter-on-a-late-ticket", lambda b, s: _stray(b, s, waited=True), (TI.WAITER, TI.PENDING)),
    ("task-accepted-late", _stray, (TI.PENDING,)),
    ("send-gate-opened", lambda b, s: b.roster.gates.discard(s.session_id), (TI.SEND_GATE,)),
    ("found-by-lookups-again", _readd, (TI.QUEUE, TI.ACCEPTS_SENDS)),
    ("an-end-counted-twice", _count_again, (TI.OUTCOME,)),
]


async def test_a_clean_stop_keeps_every_part_of_the_invariant(fleet: TestFleet) -> None:
    """After a stop with a turn, a queued send and a waiter, nothing of the target is left: each
    ticket ended once, counted once, and its waiter was let go."""
    session, tickets = await _stopped(fleet)
    assert _check(fleet, session) == ()
    assert session.teardown_violations == ()
    assert sorted(session.teardown_tickets) == sorted(tickets)
    for ticket_id in tickets:
        ticket = fleet.bridge.reads.ticket(ticket_id)
        assert ticket is not None
        assert (ticket.terminal, ticket.counted, ticket.waited_on) == (True, 1, False)


@pytest.mark.parametrize(
    ("regression", "broken"),
    [pytest.param(r, b, id=name) for name, r, b in REGRESSIONS],
)
async def test_each_regression_breaks_exactly_its_part(
    fleet: TestFleet,
    regression: Callable[[Bridge, Session], None],
    broken: tuple[TeardownInvariant, ...],
) -> None:
    """One wrong write after a clean teardown: the check names exactly the parts it breaks."""
    session, _ = await _stopped(fleet)
    regression(fleet.bridge, session)
    assert _check(fleet, session) == broken


async def test_an_end_the_metric_never_counted_breaks_the_outcome_part(fleet: TestFleet) -> None:
    """A failure operation whose ends bypass the count leaves each old task counted zero times."""
    fleet.bridge.tasks.on_terminal = lambda _ticket: None  # forced: a count that never runs
    session, _ = await _stopped(fleet)
    assert session.teardown_violations == (TI.OUTCOME.value,)


async def test_a_broken_release_is_recorded_on_the_session_when_it_ends(fleet: TestFleet) -> None:
    """The release checks the invariant as its last step: a failure operation that fails the open
    turn but not the queued send leaves that task pending and without its one end, and the
    session says so before the stop answers."""
    bridge = fleet.bridge

    # a deliberately broken failure operation: it writes the bridge's tables as a bug would
    def skips_the_queue(session: Session, *, reason: str) -> list[Any]:
        sid = session.session_id
        queued = list(bridge.roster.queues[sid])
        bridge.roster.gates.add(sid)
        now = fleet.clock.now()
        bridge.roster.inflight.close(sid, "test", now)
        return [
            ticket
            for ticket in bridge.reads.pending_for(sid)
            if ticket not in queued and bridge.tasks.fail(ticket.ticket_id, reason=reason, now=now)
        ]

    bridge.lifecycle.fail_target_work = skips_the_queue  # type: ignore[method-assign]
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="first")
    await fleet.ok("fleet_send", target=sid, prompt="second")
    await fleet.ok("fleet_stop", sessionId=sid)
    session = bridge.reads.session(sid)
    assert session is not None
    assert session.teardown_violations == (TI.PENDING.value, TI.OUTCOME.value)


def _member(fleet: TestFleet, session_id: str) -> tuple[MemberState | None, str | None]:
    evidence = fleet.service.health.state.members.get(session_id)
    return (None, None) if evidence is None else (evidence.state, evidence.cause)


async def _tick(fleet: TestFleet, seconds: float = 15) -> None:
    fleet.clock.advance(seconds)
    await fleet.service.health.tick()


async def test_a_turn_opened_after_teardown_is_orphaned_and_the_one_retry_clears_it(
    fleet: TestFleet,
) -> None:
    """A late delivery opens a turn on a released target: after the grace the health tick reports
    DELEGATION_ORPHANED naming that part, the owning lead gets the record, the monitor's one
    retry of the failure operation drops the turn, and the incident resolves."""
    session, _ = await _stopped(fleet)
    sid = session.session_id
    await _tick(fleet)
    assert _member(fleet, sid) == (MemberState.RELEASED, "released")
    _open_a_turn(fleet.bridge, session)
    await _tick(fleet, TEARDOWN_GRACE.total_seconds())
    assert _member(fleet, sid) == (MemberState.DELEGATION_ORPHANED, "turn_after_teardown")
    [incident] = [i for i in fleet.service.health.state.open_incidents() if i.subject == sid]
    assert dict(incident.evidence)["teardown_invariants"] == "turn_after_teardown"
    assert fleet.bridge.reads.open_turn(sid) is None  # the one retry ran
    assert fleet.session(sid).teardown_violations == ()
    polled = await fleet.ok("fleet_poll")
    [record] = [m for m in polled["messages"] if m["kind"] == "health"]
    assert (record["state"], record["evidence"]["teardown_invariants"]) == (
        "DELEGATION_ORPHANED",
        "turn_after_teardown",
    )
    await _tick(fleet)
    assert _member(fleet, sid) == (MemberState.RELEASED, "released")
    assert not [i for i in fleet.service.health.state.open_incidents() if i.subject == sid]


async def test_a_part_the_retry_cannot_mend_stays_orphaned_and_is_retried_only_once(
    fleet: TestFleet,
) -> None:
    """An old task's end counted twice is not mended by the failure operation: the incident stays
    open under that part's name and the operation ran exactly once more."""
    session, _ = await _stopped(fleet)
    sid = session.session_id
    calls: list[str] = []
    real = fleet.bridge.lifecycle.fail_target_work

    def counting(session: Session, *, reason: str) -> list[Ticket]:
        calls.append(reason)
        return real(session, reason=reason)

    fleet.bridge.lifecycle.fail_target_work = counting  # type: ignore[method-assign]
    _count_again(fleet.bridge, session)
    fleet.bridge.roster.touch(sid)  # as the ticket book touches a target whose ticket ends
    for _ in range(3):
        await _tick(fleet, TEARDOWN_GRACE.total_seconds())
        assert _member(fleet, sid) == (
            MemberState.DELEGATION_ORPHANED,
            "outcome_not_once_after_teardown",
        )
    assert calls == ["delegation_orphaned"]
    assert fleet.session(sid).teardown_violations == (TI.OUTCOME.value,)


@pytest.mark.parametrize("by", ["session_id", "name", "pane_id"])
async def test_the_lookup_check_agrees_with_find(fleet: TestFleet, by: str) -> None:
    """The O(1) lookup check says what ``find`` does, for each name a lead may use."""
    session, _ = await _stopped(fleet)
    roster = fleet.bridge.roster
    name = getattr(session, by)
    assert roster.find(name) is None
    assert not roster.finds(session)
    roster.add(session)  # registered again: found by its name
    assert roster.finds(session) is (roster.find(session.name) is session)
    assert roster.finds(session)
