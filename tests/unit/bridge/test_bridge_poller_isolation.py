"""One agent whose lookup herdr answers with an error never stalls the poller for the others."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from fleetd.bridge.delivery import LOOKUP_WAIT
from fleetd.errors import ControlLinkError, HerdrError, InvalidResponseError
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.testing import TestFleet, build_test_fleet


@pytest.mark.parametrize(
    "error",
    [
        HerdrError("internal_error", "boom"),
        InvalidResponseError("invalid_response", "{}"),
        # an answer line that is not JSON, or not the answer to this request: it stalled the
        # poller for every member behind this one (while the link's own ping answered)
        ControlLinkError("invalid_response", "answer is not JSON"),
        ControlLinkError("invalid_response", "answer id mismatch"),
    ],
)
async def test_an_unreadable_agent_is_skipped_and_the_others_are_served(
    tmp_path: Path, error: HerdrError, caplog: pytest.LogCaptureFixture
) -> None:
    """The bad agent's lookup fails every pass; the next member still gets its queued send, the
    bad one is judged again once herdr answers for it, and the warning is said once."""
    fleet = build_test_fleet(tmp_path)
    bad = await fleet.spawn_ready()
    good = await fleet.spawn_ready()
    bad_name = fleet.bridge.reads.session(bad).name  # type: ignore[union-attr]
    good_name = fleet.bridge.reads.session(good).name  # type: ignore[union-attr]
    await fleet.ok("fleet_send", target=bad, prompt="first")
    await fleet.ok("fleet_send", target=good, prompt="one")
    fleet.set_status(good, AgentStatus.WORKING)
    await fleet.poll()
    await fleet.ok("fleet_reply", fleet.member(good), content="one done")
    await fleet.ok("fleet_send", target=good, prompt="two")
    fleet.control.fail("get_agent", error, target=bad_name)
    fleet.set_status(good, AgentStatus.IDLE)
    with caplog.at_level(logging.WARNING, logger="fleetd.bridge"):
        for _ in range(8):
            await fleet.poll()
    typed = [
        c.args["text"] for c in fleet.control.calls_to("prompt") if c.args["target"] == good_name
    ]
    assert typed == ["one", "two"]
    skipped = [r for r in caplog.records if "skipped until it reads again" in r.getMessage()]
    assert len(skipped) == 1
    fleet.control.fail("get_agent", None, target=bad_name)
    fleet.set_status(bad, AgentStatus.WORKING)
    await fleet.poll()
    turn = fleet.bridge.reads.open_turn(bad)
    assert turn is not None
    assert turn.saw_working


async def test_an_agent_herdr_never_answers_for_holds_up_no_other(tmp_path: Path) -> None:
    """herdr hangs on one agent's lookup (every lookup of it, up to the request deadline). The
    poller asked one member at a time, so each pass waited out that deadline and the others were
    read every few seconds instead of four times a second: a member's short turn went by unseen
    and its ticket stayed pending. The others are now read every pass, and the hung lookup is
    taken up when herdr answers it."""
    fleet = build_test_fleet(tmp_path)
    hung = await fleet.spawn_ready()
    other = await fleet.spawn_ready()
    hung_name = fleet.bridge.reads.session(hung).name  # type: ignore[union-attr]
    await fleet.ok("fleet_send", target=hung, prompt="first")
    release = asyncio.Event()
    asked = fleet.control.get_agent

    async def hangs(target: str) -> AgentInfo:
        if target == hung_name:
            await release.wait()  # herdr never answers for it (until the test lets it)
        return await asked(target)

    fleet.control.get_agent = hangs  # type: ignore[method-assign]
    await fleet.ok("fleet_send", target=other, prompt="short task")
    fleet.set_status(other, AgentStatus.WORKING)
    for _ in range(2):
        await _pass(fleet)
    turn = fleet.bridge.reads.open_turn(other)
    assert turn is not None
    assert turn.saw_working  # seen within a pass, though herdr never answered for the other
    fleet.set_status(other, AgentStatus.IDLE)
    await fleet.ok("fleet_reply", fleet.member(other), content="short done")
    fleet.set_status(hung, AgentStatus.WORKING)
    release.set()
    await _pass(fleet)
    await _pass(fleet)
    seen = fleet.bridge.reads.open_turn(hung)
    assert seen is not None
    assert seen.saw_working  # its answers came: judged again


async def _pass(fleet: TestFleet) -> None:
    """One poller pass, its wait for herdr's answers run out on the test's clock."""
    polling = asyncio.ensure_future(fleet.poll())
    for _ in range(50):
        await asyncio.sleep(0)
        if polling.done():
            break
        fleet.clock.advance(LOOKUP_WAIT)
    await asyncio.wait_for(polling, 5)
