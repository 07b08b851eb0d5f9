"""A sole lead killed in herdr (M4 §7.6, Unit 4 criterion 16): recorded, shown, never replaced.

One lead and no peer is a normal deployment. When its agent dies fleetd has no safe recovery:
it must not start, replace or close anything, its member incidents stay open, and — with no
human sink in this build — every coverage surface says that nobody is told.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.e2e.e2e_fleet import start_e2e
from tests.e2e.lead_fleet import (
    HEALTH,
    fleet,
    healthz,
    incidents,
    lead_row,
    lifecycle_since,
    member_incident,
    metrics,
    poll,
    routing,
    sample,
    ticks,
)

SOLE = "with a single lead, a lead failure has no active notification or recovery"


async def test_a_sole_lead_killed_is_never_replaced_and_every_coverage_surface_says_partial(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The only lead's agent exits: its member incidents stay open on the passive human leg for
    as long as it is gone, no herdr request starts, replaces or closes anything, and fleet_list,
    /healthz, /metrics and the one startup WARN all say human escalation is unavailable."""
    caplog.set_level(logging.WARNING, logger="fleetd")
    async with start_e2e(tmp_path, HEALTH) as e2e, e2e.as_lead("lead") as lead:
        sid = await member_incident(e2e, lead)
        await ticks(e2e, 1)
        assert {m["state"] for m in await poll(e2e, lead, "lead") if m["kind"] == "health"} == {
            "ERROR_ON_SCREEN",
            "MUTE",
        }
        killed = len(e2e.requests)
        e2e.simulator.agent("lead").exit()
        await ticks(e2e, 40)  # ten minutes without a lead
        listed = await fleet(e2e)
        member = incidents(listed, subject=sid)
        assert set(member) == {"ERROR_ON_SCREEN", "MUTE"}  # kept open, nobody resolved them
        human = (None, "human", "human_no_healthy_lead")
        assert {routing(row) for row in member.values()} == {(*human, 2, "lead")}
        [dead] = incidents(listed, subject="lead").values()
        assert (dead["state"], routing(dead)) == ("LEAD_UNREACHABLE", (*human, 1, "lead"))
        assert {i["routing"]["outcome"] for i in listed["incidents"]} == {"passive_no_sink"}
        assert lead_row(listed, "lead")["health"]["state"] == "LEAD_UNREACHABLE"
        assert lead_row(listed, "lead")["liveStatus"] is None  # herdr lists no such agent
        assert lifecycle_since(e2e, killed) == []
        assert [r for r in e2e.requests[killed:] if r["method"] == "agent.prompt"] == []
        assert [s.name for s in e2e.service.bridge.reads.live_members()] == ["m-usage-1"]

        coverage = listed["healthCoverage"]
        assert coverage == {
            "detection": "enabled",
            "peerRouting": "no_peer",
            "humanEscalation": "unavailable",
            "status": "partial",
            "reason": "notifications disabled: no person is told when no lead can act; " + SOLE,
        }
        component = (await healthz(e2e))["components"]["fleetHealth"]
        assert (component["status"], component["coverage"]) == ("partial", coverage)
        assert component["openIncidents"] == 3
        text = await metrics(e2e)
        assert (
            sample(text, "fleet_health_notification_capability", mode="disabled", status="partial")
            == 1
        )
        assert sample(text, "fleet_lead_health", lead="lead", state="LEAD_UNREACHABLE") == 1
    coverage_warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "coverage is partial" in r.getMessage()
    ]
    assert len(coverage_warnings) == 1
    assert "human escalation is unavailable" in coverage_warnings[0]
    assert coverage_warnings[0].endswith(SOLE)
