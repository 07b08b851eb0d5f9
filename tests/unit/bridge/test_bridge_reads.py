"""``bridge.reads``: the one read-only view the rest of fleetd has of the bridge.

These tests hold it to what its callers rely on: it answers from the bridge's live tables (open
turn, queued sends, pending tickets, owned lookups), what it hands out is a copy that cannot change
the bridge, and its surface is pinned, so a new read is a deliberate change here and the
``Bridge`` itself forwards none of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.bridge import Bridge, BridgeReads, SessionState
from fleetd.errors import UnknownTargetError
from fleetd.identity import Caller, Role
from fleetd.testing import TestFleet, build_test_fleet

READS = {
    "drains",
    "find_live",
    "find_owned",
    "held_dropped",
    "live_members",
    "mutes_since",
    "name_taken",
    "open_turn",
    "pending_for",
    "queued",
    "releasing",
    "revision",
    "session",
    "sessions",
    "ticket",
    "ticket_expired",
    "tickets",
    "tickets_kept",
    "unpublished",
}


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


def test_the_surface_is_pinned_and_the_bridge_forwards_none_of_it() -> None:
    """The view offers exactly the pinned reads, and ``Bridge`` has no lookup of the same name."""
    public = {name for name in dir(BridgeReads) if not name.startswith("_")}
    assert public == READS
    assert sorted(name for name in READS if hasattr(Bridge, name)) == []


async def test_it_reads_the_open_turn_the_queue_and_the_pending_tickets(fleet: TestFleet) -> None:
    """A delivered send is the open turn; a second one waits in the queue; both are pending."""
    sid = await fleet.spawn_ready()
    reads = fleet.bridge.reads
    assert (reads.open_turn(sid), reads.queued(sid)) == (None, ())
    first = (await fleet.ok("fleet_send", target=sid, prompt="one"))["ticket"]
    second = (await fleet.ok("fleet_send", target=sid, prompt="two"))["ticket"]
    turn = reads.open_turn(sid)
    assert turn is not None
    assert turn.token.ticket_id == first
    assert [t.ticket_id for t in reads.queued(sid)] == [second]
    assert [t.ticket_id for t in reads.pending_for(sid)] == [first, second]
    assert {t.ticket_id for t in reads.tickets()} == {first, second}
    assert reads.tickets_kept() == 2
    await fleet.ok("fleet_stop", sessionId=sid)
    assert (reads.open_turn(sid), reads.queued(sid), reads.pending_for(sid)) == (None, (), [])


async def test_what_it_hands_out_cannot_change_the_bridge(fleet: TestFleet) -> None:
    """Emptying the lists it returned leaves the bridge's sessions, members and tickets as they
    were."""
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="one")
    reads = fleet.bridge.reads
    for handed in (reads.sessions(), reads.live_members(), reads.pending_for(sid), reads.tickets()):
        handed.clear()
    assert [s.session_id for s in reads.sessions()] == [sid]
    assert [s.session_id for s in reads.live_members()] == [sid]
    assert len(reads.pending_for(sid)) == len(reads.tickets()) == 1


async def test_find_owned_finds_only_the_callers_members(fleet: TestFleet) -> None:
    """A lead finds its member by id or name; another lead is refused with its own (empty) list;
    once released the member is found only when the caller asks for released ones."""
    sid = await fleet.spawn_ready()
    reads = fleet.bridge.reads
    session = reads.session(sid)
    assert session is not None
    assert reads.find_owned("lead", sid) is reads.find_owned("lead", session.name) is session
    assert reads.name_taken(session.name)
    with pytest.raises(UnknownTargetError) as refused:
        reads.find_owned("lead-b", sid)
    assert refused.value.hint == {"liveMembers": []}
    await fleet.call("fleet_spawn", Caller(role=Role.LEAD, name="lead-b"), profile="codex")
    await fleet.ok("fleet_stop", sessionId=sid)
    with pytest.raises(UnknownTargetError):
        reads.find_owned("lead", sid)
    session = reads.find_owned("lead", sid, released=True)
    assert session is reads.session(sid)
    assert session.state is SessionState.RELEASED
    assert reads.find_live(sid) is None
    assert [s.owner for s in reads.live_members()] == ["lead-b"]
