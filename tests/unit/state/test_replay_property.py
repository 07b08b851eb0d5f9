"""After any sequence of operations, a fleet restarted on the state store answers as the running
one does: the store holds, at every prefix, what the bridge holds (issue 21: "the state after any
prefix is what replaying the store gives").

Two members take sends, turns, replies, refused prompts, poller passes and stops in an order
hypothesis picks. After every operation a second fleet is started on a copy of the store (the
running one goes on, as if it had been killed there) and asked, through the tools, about every
ticket and every member the running fleet knows: each ticket's answer (status, delivery, times,
refusals, result or reason) and each live member's state, turn, queue and pending tickets must
be the same, ages included (a released member's record is dropped: a restart has nothing to do
for it). What a restart drops on purpose — what an open turn has seen of its pane — is left out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetd.herdr.model import AgentStatus
from fleetd.state.memory import MemoryStateStore
from fleetd.testing import TestFleet, build_test_fleet

MEMBERS = 2

_OPERATION = st.one_of(
    st.tuples(st.just("send"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("working"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("idle"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("blocked"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("reply"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("stop"), st.integers(0, MEMBERS - 1)),
    st.tuples(st.just("poll"), st.integers(0, 20)),
)


def _live(fleet: TestFleet, sid: str) -> bool:
    session = fleet.bridge.reads.session(sid)
    return session is not None and session.live


async def _apply(
    fleet: TestFleet, sids: list[str], tickets: list[str], op: tuple[str, int]
) -> None:
    """One operation through the tools and the fakes, as a lead, a member or herdr would."""
    kind, n = op
    if kind == "poll":
        await fleet.poll(n / 4)  # up to five seconds: past the submit window and the grace
        return
    sid = sids[n]
    if not _live(fleet, sid):
        return  # a stopped member takes nothing more
    if kind == "send":
        answer = await fleet.call("fleet_send", target=sid, prompt=f"task {len(tickets)}")
        if answer.ok and answer.result is not None:
            tickets.append(answer.result["ticket"])
    elif kind == "reply":
        await fleet.call("fleet_reply", fleet.member(sid), content=f"answer {len(tickets)}")
    elif kind == "stop":
        await fleet.call("fleet_stop", sessionId=sid)
    else:
        status = {
            "working": AgentStatus.WORKING,
            "idle": AgentStatus.IDLE,
            "blocked": AgentStatus.BLOCKED,
        }[kind]
        fleet.set_status(sid, status)


def _kept(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A member's status without what a restart drops by design: what the open turn has seen —
    its delivery baseline and ``sawWorking``. A turn that spans a restart ends only by its
    member's reply, so neither is stored (M4 §8: a baseline of before a restart never authorises
    repair)."""
    kept = dict(answer)
    if isinstance(turn := kept.get("openTurn"), dict):
        kept["openTurn"] = {k: v for k, v in turn.items() if k not in ("baseline", "sawWorking")}
    return kept


async def _answers(fleet: TestFleet, sids: list[str], tickets: list[str]) -> dict[str, Any]:
    """What the tools say of every ticket and of every member still live (the lead's view)."""
    seen: dict[str, Any] = {}
    for ticket in tickets:
        seen[ticket] = (await fleet.call("fleet_poll", ticket=ticket)).to_json()
    for sid in sids:
        status = await fleet.call("fleet_status", sessionId=sid)
        seen[sid] = _kept(status.result or {}) if status.ok else status.to_json()
    return seen


async def _restarted(root: Path, first: TestFleet, store: MemoryStateStore) -> TestFleet:
    """A second fleetd on a copy of the store, with the herdr and the reply inbox that outlived
    the first (a broker's inbox does: ``inbox.backend: amqp``; the in-memory one does not)."""
    second = build_test_fleet(
        root, control=first.control, inbox=first.inbox, state=copy.deepcopy(store)
    )
    second.clock.advance((first.clock.now() - second.clock.now()).total_seconds())  # its time
    await second.service.restore()
    await second.service.own_lead_keys()
    await second.bridge.confirm_restored()
    return second


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(_OPERATION, min_size=1, max_size=12))
@example([("send", 0), ("reply", 0), ("poll", 8)])  # DONE since its turn ended, not the restart
@example([("send", 0), ("working", 0), ("poll", 8), ("poll", 8)])  # BUSY since its delivery
async def test_a_restart_after_any_prefix_answers_as_the_running_fleet(
    tmp_path: Path, operations: list[tuple[str, int]]
) -> None:
    """Every ticket's poll and every member's status, after each operation, are the same from
    the running fleet and from one restarted on its store at that moment."""
    store = MemoryStateStore()
    fleet = build_test_fleet(tmp_path, state=store)
    await fleet.service.own_lead_keys()
    sids = [await fleet.spawn_ready() for _ in range(MEMBERS)]
    tickets: list[str] = []
    for n, op in enumerate(operations):
        await _apply(fleet, sids, tickets, op)
        second = await _restarted(tmp_path, fleet, store)
        live = [sid for sid in sids if _live(fleet, sid)]  # a release drops the member's record
        prefix = operations[: n + 1]
        assert await _answers(second, live, tickets) == await _answers(fleet, live, tickets), prefix
