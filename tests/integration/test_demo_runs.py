"""``fleetd demo`` end to end: a scripted lead delegates to three members and gets replies."""

from __future__ import annotations

import io

from fleetd.demo import run_demo


async def test_demo_lead_delegates_to_three_members_and_collects_replies() -> None:
    """The demo's lead spawns three members, each ticket ends done via fleet_reply."""
    out = io.StringIO()
    view = await run_demo(port=0, once=True, out=out)
    text = out.getvalue()
    assert text.count("done via reply") == 3
    assert "inbox held 3 message(s)" in text
    assert sorted(m["profile"] for m in view["members"]) == ["codex", "opencode", "sonnet"]
    assert all(m["state"] == "done" for m in view["members"])
