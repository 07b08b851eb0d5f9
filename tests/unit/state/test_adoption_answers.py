"""A restarted fleet matches its stored members against herdr's list whatever herdr answers: an
answer it cannot read decides nothing, a moved pane is the same member, and a member the link
could not confirm as gone is asked about again (the bridge on fakes, the in-memory store)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from fleetd.errors import ControlLinkError
from fleetd.herdr.control import HerdrAgentControl
from fleetd.herdr.model import AgentInfo
from fleetd.herdr.protocol import Call
from fleetd.state.memory import MemoryStateStore
from fleetd.testing import TestFleet, build_test_fleet


@pytest.fixture
def store() -> MemoryStateStore:
    return MemoryStateStore()


@pytest.fixture
async def fleet(tmp_path: Path, store: MemoryStateStore) -> TestFleet:
    built = build_test_fleet(tmp_path, state=store)
    await built.service.own_lead_keys()
    return built


async def _restarted(tmp_path: Path, first: TestFleet, store: MemoryStateStore) -> TestFleet:
    second = build_test_fleet(tmp_path, control=first.control, state=store)
    await second.service.restore()
    await second.service.own_lead_keys()
    return second


async def _member_at_work(fleet: TestFleet) -> tuple[str, str]:
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="work"))["ticket"]
    return sid, ticket


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"id":"r","result":{"type":"agent_list"}}', id="no agents"),
        pytest.param(b'{"id":"r","result":{}}', id="an empty result"),
        pytest.param(b'{"id":"r","result":{"agents":[]}}', id="no type"),
        pytest.param(b'{"id":"r","result":{"type":"pane_list","panes":[]}}', id="another type"),
    ],
)
async def test_a_list_answer_fleetd_cannot_read_releases_nobody(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore, line: bytes
) -> None:
    """herdr's answer to ``agent.list`` goes through the client's own reading; one without its
    list of agents is refused, not read as an empty fleet: the member stays, its pane open, its
    task pending, and it is matched once herdr answers properly."""
    sid, ticket = await _member_at_work(fleet)
    second = await _restarted(tmp_path, fleet, store)

    async def answer(call: Call[Any]) -> Any:
        return call.parse_response(line, "r")

    unreadable = HerdrAgentControl(answer)
    listed = second.control.list_agents
    second.control.list_agents = unreadable.list_agents  # type: ignore[method-assign]
    await second.bridge.confirm_restored()
    session = second.bridge.reads.session(sid)
    assert session is not None
    assert session.live
    assert fleet.control.calls_to("close_pane") == []
    assert (await second.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    assert second.bridge.restored.unconfirmed == {sid}
    second.control.list_agents = listed  # type: ignore[method-assign]
    await second.bridge.confirm_restored()
    assert second.bridge.restored.unconfirmed == set()


async def test_a_member_whose_pane_moved_is_adopted_under_its_new_pane(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore
) -> None:
    """herdr moved the member's pane while fleetd was down (a new pane id, the same terminal id
    and name): the member is found by its terminal id and takes the new pane id; nothing is
    closed and its task stays pending."""
    sid, ticket = await _member_at_work(fleet)
    second = await _restarted(tmp_path, fleet, store)
    moved: tuple[AgentInfo, ...] = tuple(
        dataclasses.replace(agent, pane_id="w9:p1", workspace_id="w9", tab_id="w9:t1")
        for agent in await fleet.control.list_agents()
    )

    async def list_moved() -> tuple[AgentInfo, ...]:
        return moved

    second.control.list_agents = list_moved  # type: ignore[method-assign]
    await second.bridge.confirm_restored()
    session = second.bridge.reads.session(sid)
    assert session is not None
    assert session.live
    assert session.pane_id == "w9:p1"
    assert fleet.control.calls_to("close_pane") == []
    assert (await second.ok("fleet_poll", ticket=ticket))["status"] == "pending"


async def test_a_gone_member_the_link_could_not_confirm_is_released_at_the_next_check(
    tmp_path: Path, fleet: TestFleet, store: MemoryStateStore
) -> None:
    """A member's pane went while fleetd was down; at the start herdr lists the fleet without
    it, but the ping that tells a lost pane from a link in doubt fails. Nothing is decided then,
    and the next check, with herdr answering, releases it as gone and fails its task once."""
    sid, ticket = await _member_at_work(fleet)
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    fleet.control.remove(session.name)
    second = await _restarted(tmp_path, fleet, store)
    fleet.control.fail("ping", ControlLinkError("request_timeout"))
    await second.bridge.confirm_restored()
    held = second.bridge.reads.session(sid)
    assert held is not None
    assert held.live
    assert second.bridge.restored.unconfirmed == {sid}
    fleet.control.fail("ping", None)
    await second.bridge.confirm_restored()
    released = second.bridge.reads.session(sid)
    assert released is None or not released.live
    polled = await second.ok("fleet_poll", ticket=ticket)
    assert (polled["status"], polled["reason"]) == ("failed", "gone")
