"""A soak on the fake clock: 100,000 tasks through 200 members leave no more behind than 10,000.

The service is the one ``fleetd serve`` builds (:func:`~fleetd.testing.build_test_fleet`, fake
herdr, in-memory inbox), health on. Each round sends one task to each of 200 members; members
answer with ``fleet_reply``, except every fifth round, whose turns end without a reply and are
read from the pane by the completion fallback (the mute path: MUTE incidents open); the lead
drains its inbox every round, ``fleet_list`` is read and the monitor ticks every fifth round, and
every tenth round the 100 youngest members are stopped and 100 new ones spawned (released
sessions, retired health evidence and incidents, revoked tokens) while the first 100 serve the
whole run. After the first 10,000 tasks and again after all
100,000, what is held is counted: the objects reachable from the service (by type), every object
the garbage collector tracks, the interpreter's allocated memory blocks, and the bridge's own
books (tickets, sessions, mutes, held records, health evidence and incidents). Each count after
the run must be within 10 % of its count after the first 10,000 — a structure that grows with
the tasks served fails here, whatever its size. fleetd's log is quieted to errors meanwhile (the
test runner keeps every record it captures).

Bounds in play (each reached within the first 10,000 tasks): ended tickets (``bridge.ticketsKept``
is set to 2,000, its default is 10,000), released sessions (256) with their health evidence and
open incidents, mute events (1,000), a session's history (32 changes), and the inbox's dedup
memory (4,096 ids here, 65,536 by default).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import types
from collections import Counter
from pathlib import Path
from typing import Any

from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus
from fleetd.identity import Caller
from fleetd.inbox.memory import InMemoryInbox
from fleetd.testing import TestFleet, build_test_fleet, sample_document

MEMBERS = 200
TASKS = 100_000
BASELINE_TASKS = 10_000
CHURN = 100  # members stopped and spawned every ten rounds: 500 released in the first 10,000
TOLERANCE = 1.10
SCREEN = "● All tests pass; the change is committed on the member branch.\n> "


class Soak:
    """The fleet, its members and the rounds."""

    def __init__(self, root: Path) -> None:
        document = sample_document(root)
        document["worktrees"]["defaultRepo"] = None  # no worktree: nothing accumulates on disk
        document["profiles"]["sonnet"]["maxLoad"] = MEMBERS
        document["health"] = {"enabled": True}
        document["bridge"] = {"ticketsKept": 2_000}
        control = FakeAgentControl(keep_calls=False)
        control.add_agent("lead", status=AgentStatus.IDLE)
        control.add_agent("lead-b", status=AgentStatus.IDLE)
        self.fleet: TestFleet = build_test_fleet(
            root, document=document, control=control, inbox=InMemoryInbox(seen_capacity=4_096)
        )
        self.members: dict[str, Caller] = {}
        self.done = 0

    async def spawn(self, count: int) -> None:
        for _ in range(count):
            sid = await self.fleet.spawn_ready()
            self.members[sid] = self.fleet.member(sid)
            session = self.fleet.bridge.reads.session(sid)
            assert session is not None
            assert session.pane_id is not None
            self.fleet.control.set_screen(session.pane_id, SCREEN)

    async def round(self, number: int) -> None:
        fleet = self.fleet
        for sid in self.members:
            await fleet.ok("fleet_send", target=sid, prompt=f"task {number}")
        if number % 5 == 0:
            await self.end_turns_on_screen()
        else:
            for member in self.members.values():
                await fleet.ok("fleet_reply", member, content="done")
        self.done += len(self.members)
        drained = (await fleet.ok("fleet_poll"))["messages"]
        assert sum(m["kind"] == "reply" for m in drained) == len(self.members)
        if number % 5 == 0:
            await fleet.ok("fleet_list")
            await fleet.service.health.tick()
        if number % 10 == 5:
            for sid in list(self.members)[-CHURN:]:  # the first hundred serve the whole run
                await fleet.ok("fleet_stop", sessionId=sid)
                del self.members[sid]
            await self.spawn(CHURN)
        fleet.clock.advance(3)  # past the late-reply window of a turn read from the pane

    async def end_turns_on_screen(self) -> None:
        """Working, then idle without a reply: the poller reads each turn from the pane."""
        for sid in self.members:
            self.fleet.set_status(sid, AgentStatus.WORKING)
        await self.fleet.poll()
        for sid in self.members:
            self.fleet.set_status(sid, AgentStatus.IDLE)
        await self.fleet.poll()
        await self.fleet.poll(1.5)

    def held(self) -> dict[str, int]:
        """What the service holds, counted."""
        gc.collect()
        service = self.fleet.service
        bridge, state = service.bridge, service.health.state
        books = {
            "tickets": len(bridge.reads.tickets()),
            "sessions": len(bridge.reads.sessions()),
            "mute events": len(bridge.reads.mutes_since(0)[0]),
            "held records": len(bridge.reads.unpublished),
            "health members": len(state.members),
            "open incidents": len(state.incidents),
            "incident generations": len(state.generations),
        }
        reachable = _reachable(service)
        objects = Counter(type(o).__name__ for o in gc.get_objects())
        return {
            **books,
            "reachable objects": sum(reachable.values()),
            **{f"reachable {name}": count for name, count in reachable.most_common(20)},
            "gc objects": sum(objects.values()),
            "allocated blocks": sys.getallocatedblocks(),
        }


_SHARED = (
    types.ModuleType,
    type,
    types.CodeType,
    types.BuiltinFunctionType,
    asyncio.AbstractEventLoop,
)


def _reachable(root: object) -> Counter[str]:
    """Every object reachable from ``root``, by type; modules, classes, code and the event loop
    are shared by everything and not followed, nor a function's globals. Numbers are values, not
    holdings (a counter at 500 is one object, as it was at 50), and are not counted."""
    seen: set[int] = set()
    counts: Counter[str] = Counter()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _SHARED):
            continue
        seen.add(id(item))
        if not isinstance(item, int | float):
            counts[type(item).__name__] += 1
        if isinstance(item, types.FunctionType):
            stack.extend(item.__closure__ or ())
            stack.extend(item.__defaults__ or ())
        else:
            stack.extend(gc.get_referents(item))
    return counts


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Counts after the run above 110 % of their count after the first 10,000 tasks."""
    return {
        name: (before.get(name, 0), count)
        for name, count in after.items()
        if count > max(before.get(name, 0) * TOLERANCE, before.get(name, 0) + 10)
    }


async def test_a_hundred_thousand_tasks_hold_no_more_than_ten_thousand(tmp_path: Path) -> None:
    """100,000 tasks through 200 members: everything held stays within 10 % of what was held
    after the first 10,000 (ended tickets, sessions, mutes, health evidence, objects, memory)."""
    soak = Soak(tmp_path)
    log = logging.getLogger("fleetd")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        await _run(soak)
    finally:
        log.setLevel(level)


async def _run(soak: Soak) -> None:
    await soak.fleet.service.own_lead_keys()
    await soak.spawn(MEMBERS)
    number = 0
    while soak.done < BASELINE_TASKS:
        number += 1
        await soak.round(number)
    baseline = soak.held()
    while soak.done < TASKS:
        number += 1
        await soak.round(number)
    after = soak.held()
    assert soak.done == TASKS
    assert soak.fleet.bridge.reads.ticket_expired("t1-000000-" + soak.fleet.service.run) is True
    assert _grown(baseline, after) == {}, (baseline, after)
