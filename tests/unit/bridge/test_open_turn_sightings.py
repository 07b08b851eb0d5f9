"""The health tick's sighting of open turns, fed by what moved, records what a full pass would.

``fleetd serve`` hands each successful ``agent.list`` to the bridge through
:class:`~fleetd.runtime.snapshot.SeenAgents` with the agents that moved since the previous
list; the bridge then sights only the turns that could record something new. Whatever happened
in between (statuses moved, turns opened and closed, the poller found an agent unreadable, an
agent vanished), every open turn must end up with the watch a sighting of every open turn
would give it: the lost-boundary stable gate reads nothing else.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetd.bridge.turn_machine import BoundaryWatch
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.runtime.snapshot import SeenAgents
from fleetd.testing import TestFleet, build_test_fleet, sample_document

MEMBERS = 2
_STATUSES = (AgentStatus.WORKING, AgentStatus.IDLE, AgentStatus.DONE, AgentStatus.BLOCKED)

_ACTIONS = ("status", "status", "send", "reply", "list", "unreadable", "vanish")
_steps = st.lists(
    st.tuples(st.sampled_from(_ACTIONS), st.integers(0, MEMBERS - 1), st.sampled_from(_STATUSES)),
    min_size=1,
    max_size=25,
)


def _expected(fleet: TestFleet, listed: tuple[AgentInfo, ...]) -> dict[str, BoundaryWatch]:
    """Each open turn's watch after one sighting of ``listed``, as a full pass records it."""
    by_terminal = {agent.terminal_id: agent for agent in listed}
    expected = {}
    for session in fleet.bridge.reads.live_members():
        turn = fleet.bridge.reads.open_turn(session.session_id)
        if turn is None:
            continue
        assert session.terminal_id is not None
        agent = by_terminal.get(session.terminal_id)
        status, seq = (agent.agent_status, agent.state_change_seq) if agent else (None, None)
        expected[session.session_id] = turn.watch.observe(status, seq)
    return expected


async def _run(steps: list[tuple[str, int, AgentStatus]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        fleet = build_test_fleet(Path(root), document=sample_document(Path(root)))
        await fleet.service.own_lead_keys()
        sids = [await fleet.spawn_ready(profile) for profile in ("sonnet", "codex")]
        seen = SeenAgents()
        gone: set[str] = set()

        async def sight() -> None:
            listed = await fleet.control.list_agents()
            expected = _expected(fleet, listed)
            seen.health_view(listed)  # the two calls take_snapshot makes with the list
            fleet.bridge.repair.observe(seen.listed, moved=seen.moved)
            reads = fleet.bridge.reads
            watches = {
                s.session_id: t.watch
                for s in reads.live_members()
                if (t := reads.open_turn(s.session_id)) is not None
            }
            assert watches == expected

        for what, n, status in steps:
            await sight()  # a health tick between any two steps
            sid = sids[n]
            session = fleet.bridge.reads.session(sid)
            if what == "list":
                await sight()
            elif session is None or sid in gone or not session.live:
                continue
            elif what == "status":
                fleet.set_status(sid, status)
            elif what == "send" and fleet.bridge.reads.open_turn(sid) is None:
                fleet.set_status(sid, AgentStatus.IDLE)
                await fleet.ok("fleet_send", target=sid, prompt="a task")
            elif what == "reply" and fleet.bridge.reads.open_turn(sid) is not None:
                await fleet.ok("fleet_reply", fleet.member(sid), content="done")
            elif what == "unreadable":  # the poller's lookup fails: the turn is sighted unread
                failure = HerdrError("internal_error", "agent unreadable")
                fleet.control.fail("get_agent", failure, target=session.name)
                await fleet.bridge.deliverer.poll_once()
                fleet.control.fail("get_agent", None, target=session.name)
            elif what == "vanish":
                fleet.control.remove(session.name)
                gone.add(sid)
        await sight()


@settings(max_examples=100, deadline=None)
@given(_steps)
def test_sighting_what_moved_leaves_every_open_turn_as_a_full_pass_would(
    steps: list[tuple[str, int, AgentStatus]],
) -> None:
    """After any sequence of status changes, sends, replies, unreadable lookups and vanished
    agents, the sighting ``fleetd serve`` runs (only turns whose agent moved, opened or whose
    watch moved) leaves every open turn's boundary watch exactly as sighting all of them does."""
    asyncio.run(_run(steps))


def test_a_turn_at_the_prompt_is_sighted_again_until_its_watch_is_stable() -> None:
    """A member idle at its prompt and never moving again still reaches a stable watch (two
    sightings of one sequence number): the turn whose watch moved is sighted at the next list
    although its agent is the previous list's very object."""

    async def run() -> None:
        with tempfile.TemporaryDirectory() as root:
            fleet = build_test_fleet(Path(root), document=sample_document(Path(root)))
            await fleet.service.own_lead_keys()
            sid = await fleet.spawn_ready()
            await fleet.ok("fleet_send", target=sid, prompt="a task")
            fleet.set_status(sid, AgentStatus.WORKING)
            seen = SeenAgents()
            for _ in range(2):
                seen.health_view(await fleet.control.list_agents())
                fleet.bridge.repair.observe(seen.listed, moved=seen.moved)
            fleet.set_status(sid, AgentStatus.IDLE)
            stable = []
            for _ in range(3):
                seen.health_view(await fleet.control.list_agents())
                fleet.bridge.repair.observe(seen.listed, moved=seen.moved)
                turn = fleet.bridge.reads.open_turn(sid)
                assert turn is not None
                stable.append(turn.watch.stable)
            assert seen.moved == []  # the last lists moved nothing at all
            assert stable == [False, True, True]

    asyncio.run(run())


async def test_turns_waiting_for_a_sighting_are_only_open_ones_with_health_off() -> None:
    """With health off no list ever sights the open turns, so what waits for a sighting must not
    outlive them: members that each ran a turn and were released leave nothing behind (it used
    to keep every session id that ever had a turn)."""
    with tempfile.TemporaryDirectory() as root:
        document = sample_document(Path(root))
        assert not document.get("health", {}).get("enabled", False)
        fleet = build_test_fleet(Path(root), document=document)
        await fleet.service.own_lead_keys()
        waiting = fleet.bridge.roster.inflight.fresh
        for _ in range(20):
            sid = await fleet.spawn_ready("codex")
            await fleet.ok("fleet_send", target=sid, prompt="a task")
            assert sid in waiting  # the open turn waits for the next list's sighting
            await fleet.ok("fleet_reply", fleet.member(sid), content="done")
            assert waiting == set()
            await fleet.ok("fleet_stop", sessionId=sid)
        assert fleet.bridge.reads.live_members() == []
        assert waiting == set()
