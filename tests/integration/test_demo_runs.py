"""``fleetd demo`` end to end: a lead delegates to three members and gets replies, then a member
of it fails, the lead dies, and the incident moves to the second lead; then that lead dies too,
a person is told by signed webhook, and told again when the lead is back."""

from __future__ import annotations

import io
import re

import pytest

from fleetd.demo import alertmanager as demo_alertmanager
from fleetd.demo.show import run_demo
from tests.integration.alertmanager_process import alertmanager_binary


async def test_demo_delegates_then_reroutes_an_incident_to_the_peer_when_the_owner_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three tickets end done via fleet_reply; the failed member's incident goes from its owning
    lead (generation 1) to lead-b (generation 2, on behalf of lead), and lead-b collects it; the
    live page's URL is printed first. Without an Alertmanager binary one line says how to see
    that sink kind, and the demo ends with the signed webhook's resolved event."""
    monkeypatch.setattr(demo_alertmanager, "alertmanager_binary", lambda: None)
    out = io.StringIO()
    view = await run_demo(port=0, once=True, out=out)
    text = out.getvalue()
    [terminal] = [line for line in text.splitlines() if line.startswith("  terminal:")]
    assert terminal.startswith("  terminal:    FLEETD_URL=http://127.0.0.1:")
    assert terminal.endswith(" top")  # the live screen to try, with the operator token
    assert text.count("done via reply") == 3
    assert re.search(r"^  live page:   http://127\.0\.0\.1:\d+/  \(sign in with", text, re.M)
    assert "  alertmanager: none on PATH; with Debian's prometheus-alertmanager installed" in text
    assert "alertmanager reports" not in text
    assert "inbox held 3 message(s)" in text
    assert "  incidents: 0; coverage: full" in text  # the healthy fleet of the first act
    profiles = {m["name"]: (m["profile"], m["state"]) for m in view["members"]}
    assert profiles == {
        "sonnet-1": ("sonnet", "done"),
        "codex-1": ("codex", "done"),
        "opencode-1": ("opencode", "done"),
        "sonnet-usage": ("sonnet", "done"),
    }
    [sid] = [m["sessionId"] for m in view["members"] if m["name"] == "sonnet-usage"]
    member = {i["state"]: i for i in view["incidents"] if i["subject"] == sid}
    error = member["ERROR_ON_SCREEN"]
    assert (error["owner"], error["recipient"]) == ("lead", "lead-b")
    assert error["routing"] == {
        "route": "lead",
        "reason": "peer_owner_unhealthy",
        "generation": 4,  # lead, lead-b, a person while lead-b was down, lead-b again
        "onBehalfOf": "lead",
    }
    leads = {row["name"]: row["health"] for row in view["leads"]}
    assert leads["lead"]["state"] == "LEAD_UNREACHABLE"
    assert leads["lead-b"]["assignedForeignIncidents"] == 3  # back, it holds them again
    assert "ERROR_ON_SCREEN -> lead (owner, generation 1)" in text
    assert (
        "ERROR_ON_SCREEN -> lead-b (peer_owner_unhealthy, generation 2, on behalf of lead)" in text
    )
    assert "health incidents of lead lead, which cannot act" in text  # the nudge lead-b got
    assert 'lead-b: fleet_poll(target="lead-b") -> 3 message(s)' in text
    assert (
        f"  health ERROR_ON_SCREEN of {sid}: peer_owner_unhealthy, generation 2, "
        "on behalf of lead" in text
    )
    assert "  incidents: 3; coverage: full" in text
    # act three: with both leads gone every open incident reaches a person, signed and verified
    opened = [line for line in text.splitlines() if line.startswith("webhook receiver: open ")]
    assert len(opened) == 4  # lead's and lead-b's own incidents, the member's two
    assert "refused" not in text  # every request's signature verified
    [resolved] = [
        line for line in text.splitlines() if line.startswith("webhook receiver: resolved ")
    ]
    lead_b_incident = resolved.split()[3]
    assert any(lead_b_incident in line for line in opened)  # resolved follows its own open
    assert all(i["id"] != lead_b_incident for i in view["incidents"])
    assert text.splitlines()[-2].startswith("  webhook resolved: ")


async def test_with_alertmanager_the_demo_switches_sink_kind_and_shows_firing_then_resolved() -> (
    None
):
    """An Alertmanager on the PATH (fails under CI=true without it): after the webhook act the
    config file switches to alertmanager mode, lead-b dies again and Alertmanager reports its
    incident firing, then resolved once lead-b is back."""
    alertmanager_binary()
    out = io.StringIO()
    await run_demo(port=0, once=True, out=out)
    lines = out.getvalue().splitlines()
    assert any(re.match(r"  alertmanager: http://127\.0\.0\.1:\d+ takes", line) for line in lines)
    switched = lines.index(
        "  config: health.notifications.mode: alertmanager (a hot key: no restart)"
    )
    assert any(line.startswith("  webhook resolved: ") for line in lines[:switched])
    reports = [line for line in lines[switched:] if line.startswith("alertmanager reports: ")]
    firing = next(
        i for i, line in enumerate(reports) if "LEAD_UNREACHABLE of lead-b (firing)" in line
    )
    resolved = next(
        i for i, line in enumerate(reports) if "LEAD_UNREACHABLE of lead-b (resolved)" in line
    )
    assert firing < resolved
