"""Member views a tick reads are rebuilt only when the member changed, and never go stale.

The health tick reads every member's :class:`~fleetd.health.snapshot.MemberView` and, on a large
fleet, hands back the previous tick's view for a member whose stamp did not move
(:class:`~fleetd.bridge.member_views.MemberViews`). These tests hold it to one rule: after any
change the bridge makes, the kept views equal views built from nothing; with no change, they are
the very same objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetd.bridge import CheckedMemberViews
from fleetd.bridge.backlog import MemberBacklog
from fleetd.bridge.evidence import FatalScreenSeen
from fleetd.bridge.member_views import MemberViews
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import Retention, TaskBook
from fleetd.bridge.turn_machine import RepairAnswered, StatusSighted
from fleetd.bridge.turns import TurnToken
from fleetd.health.snapshot import MemberView
from fleetd.herdr.model import AgentStatus
from fleetd.testing import TestFleet, build_test_fleet
from tests.unit.bridge.turn_values import open_turn

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


Read = Callable[..., list[MemberView]]


@pytest.fixture(params=["stamps", "tick"])
def read(request: pytest.FixtureRequest) -> Read:
    """The views as the fleet view (stamps: every member read) or the health tick (only the
    members the roster marked) reads them, checked against views built with nothing kept."""

    def reader(
        fleet: TestFleet,
        *,
        mutes: dict[str, int] | None = None,
        backlogs: dict[str, MemberBacklog] | None = None,
    ) -> list[MemberView]:
        sessions = fleet.bridge.reads.sessions()
        view = fleet.bridge.view
        if request.param == "stamps":
            kept = view.member_views(sessions, mute_counts=mutes, backlogs=backlogs)
        else:
            kept = list(view.tick_views(sessions, mute_counts=mutes or {}, backlogs=backlogs or {}))
        # every read was checked against views built with nothing kept (it raises when stale)
        assert isinstance(view.views, CheckedMemberViews)
        return kept

    return reader


def _same(before: list[MemberView], after: list[MemberView]) -> list[bool]:
    return [a is b for a, b in zip(before, after, strict=True)]


def test_every_change_to_a_session_is_a_new_value_the_roster_marks() -> None:
    """No field of a session can change in place: each change the roster makes (a field set
    even to its own value, a move along the table) puts a new object in place and marks the
    member, so a view's stamp (the session object) always moves with it."""
    roster = Roster()
    roster.add(
        Session(
            session_id="s",
            name="n",
            profile="p",
            kind="claude",
            role=None,
            owner="lead",
            created_at=T0,
        )
    )
    table = {"state", "turn", "presence", "presence_at", "state_since", "history"}
    with pytest.raises(TypeError, match="never changes"):
        roster.update("s", session_id="t")
    for field in dataclasses.fields(Session):
        before = roster.sessions["s"]
        roster.changes.take()
        if field.name in table:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(before, field.name, getattr(before, field.name))
            continue
        after = roster.update("s", **{field.name: getattr(before, field.name)})
        assert after is not before, field.name
        assert roster.sessions["s"] is after, field.name
        assert roster.changes.take() == {"s"}, field.name
    before = roster.sessions["s"]
    assert roster.apply("s", SessionEvent.PRESENCE, T0) is not before
    assert roster.changes.take() == {"s"}


async def test_a_member_that_did_not_change_keeps_its_view_object(
    fleet: TestFleet, read: Read
) -> None:
    """Two reads with no change between them hand back the same objects, idle or busy."""
    idle = await fleet.spawn_ready()
    busy = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=busy, prompt="work")
    first = read(fleet)
    assert [v.session_id for v in first] == [idle, busy]
    assert first[1].turn is not None
    assert _same(first, read(fleet)) == [True, True]


async def test_each_change_the_bridge_makes_rebuilds_only_that_member(
    fleet: TestFleet, read: Read
) -> None:
    """Every step of a member's life is seen at once, and only by that member's view."""
    other = await fleet.spawn_ready()
    row = await fleet.ok("fleet_spawn", profile="sonnet")
    sid = row["sessionId"]
    views = read(fleet)
    assert views[1].session_state.value == "spawning"

    await fleet.service.registry.contact(fleet.member(sid))  # presence: READY
    after = read(fleet)
    assert _same(views, after) == [True, False]
    assert (after[1].session_state.value, after[1].presence) == ("ready", True)

    first = (await fleet.ok("fleet_send", target=sid, prompt="one"))["ticket"]  # turn 1 opens
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert after[1].turn is not None
    assert after[1].turn.waiter_open
    assert after[1].pending_tasks == 1

    second = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]  # queued
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert (after[1].queued_sends, after[1].pending_tasks) == (1, 2)

    fleet.set_status(sid, AgentStatus.WORKING)  # the poller sees working: the turn records it
    await fleet.poll()
    after = read(fleet)

    turn = fleet.bridge.reads.open_turn(sid)
    assert turn is not None
    answered = RepairAnswered("refused_unchanged", "unchanged", retryable=True)
    # forced: a retryable repair answer on a working turn has no public way in
    fleet.bridge.roster.inflight.step(turn.token, answered, fleet.clock.now())
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert after[1].turn is not None
    assert after[1].turn.repair is not None

    # forced: only its waiter ends while the turn stays open, which no public operation does
    fleet.bridge.tasks.cancel(first, reason="test", now=fleet.clock.now())
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert after[1].turn is not None
    assert not after[1].turn.waiter_open

    seen = FatalScreenSeen(signature_id="x", ticket=first, turn=1)
    fleet.bridge.roster.update(sid, fatal_screen=seen)
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]  # rebuilt (no screen shown while BUSY)

    fleet.bridge.roster.update(sid, commits_ahead=3)  # measured on the terminal edge
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert after[1].worktree is not None
    assert after[1].worktree.commits_ahead == 3

    await fleet.ok("fleet_stop", sessionId=sid)  # released: queue and turn gone, tickets failed
    views, after = after, read(fleet)
    assert _same(views, after) == [True, False]
    assert after[1].session_state.value == "released"
    assert (after[1].turn, after[1].queued_sends, after[1].pending_tasks) == (None, 0, 0)
    assert (await fleet.ok("fleet_poll", ticket=second))["status"] == "failed"
    assert read(fleet)[0].session_id == other


async def test_a_reply_ends_the_turn_and_the_next_send_opens_a_new_one(
    fleet: TestFleet, read: Read
) -> None:
    """A turn that ends and a new one that opens at once still give a new view."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="one")
    await fleet.ok("fleet_send", target=sid, prompt="two")
    views = read(fleet)
    first_turn = views[0].turn
    assert first_turn is not None
    assert first_turn.number == 1
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    await fleet.poll()
    after = read(fleet)
    assert after[0] is not views[0]
    assert after[0].turn is not None
    assert after[0].turn.number == 2


async def test_mutes_and_waiting_replies_of_the_tick_are_read_every_time(
    fleet: TestFleet, read: Read
) -> None:
    """The per-tick counts are part of the stamp: a kept view never carries last tick's."""
    sid = await fleet.spawn_ready()
    plain = read(fleet)
    backlog = MemberBacklog(replies=2, oldest_at=T0)
    counted = read(fleet, mutes={sid: 1}, backlogs={sid: backlog})
    assert counted[0] is not plain[0]
    assert (counted[0].mute_events, counted[0].uncollected_replies) == (1, 2)
    assert read(fleet, mutes={sid: 1}, backlogs={sid: backlog})[0] is counted[0]
    assert read(fleet)[0] == plain[0]
    waiting = read(fleet, backlogs={sid: backlog})  # replies wait, nothing else moved
    assert (waiting[0].mute_events, waiting[0].uncollected_replies) == (0, 2)
    older = MemberBacklog(replies=2, oldest_at=T0.replace(hour=11))
    assert read(fleet, backlogs={sid: older})[0].oldest_uncollected_at == older.oldest_at


def _session(n: int) -> Session:
    return Session(
        session_id=f"s{n}",
        name=f"m-{n}",
        profile="p",
        kind="claude",
        role=None,
        owner="lead",
        created_at=T0,
        state=SessionState.READY,
    )


def test_views_of_sessions_the_roster_forgot_are_dropped() -> None:
    """What is kept stays bounded by the roster however many members came and went."""
    roster, tasks = Roster(), TaskBook()
    views = MemberViews(roster=roster, tasks=tasks)
    for n in range(200):
        roster.add(_session(n))
    assert len(views.build(list(roster.sessions.values()), mute_counts={}, backlogs={})) == 200
    assert len(views) == 200
    for n in range(150):
        del roster.sessions[f"s{n}"]
    kept = views.build(list(roster.sessions.values()), mute_counts={}, backlogs={})
    assert [v.session_id for v in kept] == [f"s{n}" for n in range(150, 200)]
    assert len(views) == 50


def test_the_tick_reads_again_only_the_members_the_roster_marked() -> None:
    """Assignments to a session, to its open turn and to a ledger put in its place later, and
    every change of its queue or open turn, mark it; the tick rebuilds exactly those views."""
    roster = Roster()
    tasks = TaskBook(on_target=roster.touch)
    for n in range(4):
        roster.add(_session(n))
    views = MemberViews(roster=roster, tasks=tasks)
    sessions = list(roster.sessions.values())
    first = views.for_tick(sessions, mute_counts={}, backlogs={})

    def again() -> list[bool]:
        nonlocal first
        sessions = list(roster.sessions.values())
        before, first = first, views.for_tick(sessions, mute_counts={}, backlogs={})
        fresh = MemberViews(roster=roster, tasks=tasks).build(sessions, mute_counts={}, backlogs={})
        assert list(first) == fresh
        return [a is b for a, b in zip(before, first, strict=True)]

    assert again() == [True] * 4
    roster.update("s1", terminal_id="t-moved")
    assert again() == [True, False, True, True]
    ticket = tasks.accept(target="s2", owner="lead", prompt="p", now=T0, nonce="n")
    assert again() == [True, True, False, True]
    token = TurnToken(token_id="k", session_id="s2", ticket_id=ticket.ticket_id, turn=1)
    open_turn(roster, token, T0)
    assert again() == [True, True, False, True]
    roster.inflight.step(token, StatusSighted(AgentStatus.IDLE, 3), T0)  # the watch only: no mark
    assert again() == [True] * 4
    answered = RepairAnswered("refused_unchanged", "unchanged", retryable=True)
    roster.inflight.step(token, answered, T0)  # a new ledger in the turn's place is marked
    assert again() == [True, True, False, True]
    assert first[2].turn is not None
    assert first[2].turn.repair is not None
    roster.enqueue("s3", ticket)
    assert again() == [True, True, True, False]
    assert roster.dequeue("s3", ticket)
    assert again() == [True, True, True, False]
    assert not roster.dequeue("s3", ticket)  # not there: nothing moved, nothing marked
    roster.clear_queue("s3")
    assert again() == [True] * 4
    roster.enqueue("s3", ticket)
    roster.clear_queue("s3")  # marked, read again, and as before: the kept view stands
    assert again() == [True] * 4
    tasks.cancel(ticket.ticket_id, reason="test", now=T0)
    assert again() == [True, True, False, True]
    roster.inflight.close("s2", "test", T0)
    assert again() == [True, True, False, True]
    open_turn(roster, dataclasses.replace(token, session_id="s0"), T0)
    assert again() == [False, True, True, True]
    roster.inflight.close("s0", "test", T0)
    assert again() == [False, True, True, True]
    assert again() == [True] * 4


class _CountingViews(MemberViews):
    """Member views that count the sessions each read looks at."""

    __slots__ = ("looked",)

    def __init__(self, *, roster: Roster, tasks: TaskBook) -> None:
        super().__init__(roster=roster, tasks=tasks)
        self.looked: list[int] = []

    def _read(self, sessions: Iterable[Session], **inputs: Any) -> list[MemberView]:
        sessions = list(sessions)
        self.looked.append(len(sessions))
        return super()._read(sessions, **inputs)


def test_a_new_value_of_one_member_has_the_tick_look_at_that_member_only() -> None:
    """A member's change is a new session value in the roster's place, so the list the tick is
    handed is not the last one object for object; it is the same members in the same order, and
    the tick looks again only at the one the roster marked, not at every member."""
    roster, tasks = Roster(), TaskBook()
    for n in range(50):
        roster.add(_session(n))
    views = _CountingViews(roster=roster, tasks=tasks)
    views.for_tick(list(roster.sessions.values()), mute_counts={}, backlogs={})
    roster.update("s7", terminal_id="t-moved")
    roster.apply("s9", SessionEvent.PRESENCE, T0)
    after = views.for_tick(list(roster.sessions.values()), mute_counts={}, backlogs={})
    assert views.looked == [50, 2]
    assert (after[7].terminal_id, after[9].presence) == ("t-moved", True)


def test_the_fleet_view_reads_only_the_members_marked_since_its_own_last_read() -> None:
    """The fleet view has its own reader of the roster's marks: a member marked after the
    tick took its marks is still read again by the next version, each reader looks again only
    at what was marked since its own last read, and their views agree."""
    roster, tasks = Roster(), TaskBook()
    for n in range(50):
        roster.add(_session(n))
    views = _CountingViews(roster=roster, tasks=tasks)

    def sessions() -> list[Session]:
        return list(roster.sessions.values())

    views.for_view(sessions(), backlogs={})  # the first version reads every member
    views.for_tick(sessions(), mute_counts={}, backlogs={})
    roster.update("s3", terminal_id="t-moved")
    tick = views.for_tick(sessions(), mute_counts={}, backlogs={})  # takes the tick's marks
    roster.update("s4", terminal_id="t-moved")
    version = views.for_view(sessions(), backlogs={})
    assert views.looked == [50, 50, 1, 2]  # the version reads s3 and s4, the tick s3 only
    assert version[3] is tick[3]
    assert (version[3].terminal_id, version[4].terminal_id) == ("t-moved", "t-moved")
    assert views.for_view(sessions(), backlogs={}) == version
    assert views.looked[-1] == 0


def test_the_tick_reads_every_member_when_the_sessions_are_not_the_same() -> None:
    """A new session makes the tick read every member, so no change is lost; touches of members
    the roster does not hold are counted, never kept, so the record stays bounded by the roster
    while a change of a held member is still read."""
    roster, tasks = Roster(), TaskBook()
    for n in range(3):
        roster.add(_session(n))
    views = MemberViews(roster=roster, tasks=tasks)
    sessions = list(roster.sessions.values())
    first = views.for_tick(sessions, mute_counts={}, backlogs={})
    roster.add(_session(3))  # a new member: the list differs, every member is read
    grown = views.for_tick(list(roster.sessions.values()), mute_counts={}, backlogs={})
    assert [v.session_id for v in grown] == ["s0", "s1", "s2", "s3"]
    assert grown[:3] == first
    before = roster.touches.count
    for n in range(5000):  # tickets of members long forgotten
        roster.touch(f"gone-{n}")
    assert roster.touches.count == before + 5000
    assert len(roster.touches) == len(roster.sessions)
    roster.update("s0", terminal_id="t-moved")
    assert roster.changes.marked() == frozenset({"s0"})
    after = views.for_tick(list(roster.sessions.values()), mute_counts={}, backlogs={})
    assert after[0].terminal_id == "t-moved"
    assert roster.changes.marked() == frozenset()


def test_a_send_queue_and_the_open_turns_refuse_changes_they_would_not_report() -> None:
    """A send queue is a value (only the roster puts a new one in its place, and marks the
    member), and the open-turn map refuses the mutations that would bypass the change marks: an
    open turn is put only by ``open`` (one per member) and changed or dropped only by the turn
    machine's ``step``."""
    roster = Roster()
    roster.add(_session(0))
    assert roster.queues["s0"] == ()
    with pytest.raises(TypeError):
        roster.inflight.clear()
    with pytest.raises(TypeError):
        roster.inflight.update({})
    token = TurnToken(token_id="k", session_id="s0", ticket_id="t", turn=1)
    turn = open_turn(roster, token, T0)
    with pytest.raises(TypeError):
        roster.inflight["s0"] = turn
    with pytest.raises(TypeError):
        del roster.inflight["s0"]
    with pytest.raises(TypeError):
        roster.inflight.pop("s0")
    with pytest.raises(ValueError, match="cannot be opened"):
        roster.inflight.open(turn)  # one open turn per member


def _tracked(members: int) -> tuple[Roster, TaskBook]:
    """A roster of ``members`` and a task book wired as the bridge wires them, keeping one
    ended ticket."""
    roster = Roster()
    tasks = TaskBook(
        on_target=roster.touch,
        on_pruned=roster.pruned,
        retention=lambda: Retention(keep_count=1),
    )
    for n in range(members):
        roster.add(_session(n))
    return roster, tasks


def test_marks_that_no_other_change_stands_in_for() -> None:
    """A queue emptied, a ticket of an open turn forgotten later, a member retired with sends
    still queued: each is marked on its own."""
    roster, tasks = _tracked(3)
    views = MemberViews(roster=roster, tasks=tasks)
    sessions = list(roster.sessions.values())

    def read() -> tuple[MemberView, ...]:
        kept = views.for_tick(sessions, mute_counts={}, backlogs={})
        fresh = MemberViews(roster=roster, tasks=tasks).build(sessions, mute_counts={}, backlogs={})
        assert list(kept) == fresh
        return kept

    ticket = tasks.accept(target="s0", owner="lead", prompt="p", now=T0, nonce="a")
    token = TurnToken(token_id="k", session_id="s0", ticket_id=ticket.ticket_id, turn=1)
    open_turn(roster, token, T0 + timedelta(minutes=1))
    tasks.cancel(ticket.ticket_id, reason="test", now=T0)
    roster.enqueue("s1", ticket)
    roster.enqueue("s2", ticket)
    before = read()
    assert before[1].queued_sends == 1

    roster.clear_queue("s1")
    later = tasks.accept(target="s2", owner="lead", prompt="p", now=T0, nonce="b")
    tasks.cancel(later.ticket_id, reason="test", now=T0)  # the ended ticket of s0 is forgotten
    assert tasks.get(ticket.ticket_id) is None
    roster.retire(roster.sessions["s2"], T0)  # retired with a send still queued
    after = read()
    assert after[0].turn is not None
    assert before[0].turn is not None
    assert before[0].turn.accepted_at == T0  # the ticket's
    assert after[0].turn.accepted_at == T0 + timedelta(minutes=1)  # gone: the delivery's
    assert (after[1].queued_sends, after[2].queued_sends) == (0, 0)


def test_an_ended_ticket_forgotten_marks_only_the_member_whose_open_turn_named_it() -> None:
    """Forgetting an ended ticket past the retention marks its member only when that member's
    open turn still names it: no other view reads an ended ticket, and a busy fleet forgets one
    at almost every reply."""
    roster, tasks = _tracked(3)
    held = tasks.accept(target="s0", owner="lead", prompt="p", now=T0, nonce="a")
    open_turn(
        roster, TurnToken(token_id="k", session_id="s0", ticket_id=held.ticket_id, turn=1), T0
    )
    tasks.cancel(held.ticket_id, reason="test", now=T0)
    old = tasks.accept(target="s1", owner="lead", prompt="p", now=T0, nonce="b")
    tasks.cancel(old.ticket_id, reason="test", now=T0)  # forgets s0's ticket: s0 is marked
    roster.changes.take()
    tasks.cancel(
        tasks.accept(target="s2", owner="lead", prompt="p", now=T0, nonce="c").ticket_id,
        reason="test",
        now=T0,
    )
    assert tasks.get(old.ticket_id) is None  # s1's ended ticket is forgotten
    assert roster.changes.take() == {"s2"}  # the target of the ticket that ended, not s1
    assert tasks.get(held.ticket_id) is None
