"""One agent whose lookup herdr answers with an error never stalls the poller for the others."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from fleetd.errors import ControlLinkError, HerdrError, InvalidResponseError
from fleetd.herdr.model import AgentStatus
from fleetd.testing import build_test_fleet


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
