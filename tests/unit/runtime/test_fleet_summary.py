"""The summary an instance publishes with its journal row: a bounded projection of its operator
``fleet_list`` view, in the view's own field names (issue 24 item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetd.api.tools import Caller, Role
from fleetd.runtime.fleet_summary import (
    MAX_SUMMARY_MEMBERS,
    SUMMARY_VERSION,
    InstanceSummary,
    summarize,
)
from fleetd.testing import build_test_fleet

OPERATOR = Caller(role=Role.OPERATOR, name="operator")


def _member(name: str, owner: str, health: str | None, state: str = "idle") -> dict[str, Any]:
    row: dict[str, Any] = {
        "sessionId": f"s-{name}",
        "name": name,
        "owner": owner,
        "profile": "sonnet",
        "state": state,
        "turn": 3,
        "queued": 1,
        "stateAgeSeconds": 12.5,
        "liveStatus": "idle",
        "prompt": "never published",
    }
    if health is not None:
        row["health"] = {"state": health, "certainty": "high", "cause": "x", "ageSeconds": 4.0}
    return row


def _incident(number: int, severity: str) -> dict[str, Any]:
    return {
        "id": f"inc_{number:08x}",
        "scope": "member",
        "subject": f"s-m{number}",
        "state": "MEMBER_STUCK",
        "severity": severity,
        "certainty": "high",
        "ageSeconds": 30.0,
        "owner": "lead",
        "recipient": "lead-b",
        "routing": {
            "route": "lead",
            "reason": "peer_healthy",
            "generation": 2,
            "onBehalfOf": "lead",
        },
    }


def _view(members: list[dict[str, Any]], incidents: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "generatedAt": "2026-12-06T03:00:00+00:00",
        "controlLink": {"state": "up", "lastCall": "ok"},
        "healthCoverage": {"status": "full", "reason": "a person is notified", "detection": "x"},
        "leads": [
            {
                "name": "lead",
                "agent": "lead",
                "liveStatus": "idle",
                "inboxDepth": 3,
                "health": {
                    "state": "LEAD_IDLE",
                    "ageSeconds": 9.0,
                    "assignedForeignIncidents": 1,
                    "foreignIncidents": [],
                },
            },
            {"name": "lead-b", "agent": "lead-b", "liveStatus": None, "health": None},
        ],
        "members": members,
        "incidents": incidents,
        "capacity": [
            {"profile": "sonnet", "maxLoad": 2, "live": 1, "free": 1, "reclaimable": 0},
            {"profile": "codex", "maxLoad": None, "live": 0, "free": None, "reclaimable": 0},
        ],
    }


def test_a_summary_keeps_the_view_field_names_and_nothing_of_the_content() -> None:
    """Members with their lead, state, health and turn; leads with their health and herdr
    status; incidents with routing; coverage, link and capacity — under the names fleet_list
    uses, so one reader reads both; no push counts, certainty or anything a row did not name."""
    view = _view([_member("m1", "lead", "MEMBER_STUCK"), _member("m2", "lead-b", None)], [])
    view["incidents"] = [_incident(1, "warning")]
    published = summarize(view, instance="host-a").model_dump(mode="json", by_alias=True)
    assert published["version"] == SUMMARY_VERSION
    assert (published["instance"], published["generatedAt"]) == ("host-a", view["generatedAt"])
    assert published["controlLink"] == {"state": "up"}
    assert published["healthCoverage"] == {"status": "full", "reason": "a person is notified"}
    assert published["leads"] == [
        {
            "name": "lead",
            "agent": "lead",
            "liveStatus": "idle",
            "health": {"state": "LEAD_IDLE", "ageSeconds": 9.0, "assignedForeignIncidents": 1},
        },
        {"name": "lead-b", "agent": "lead-b", "liveStatus": None, "health": None},
    ]
    assert published["members"][0] == {
        "sessionId": "s-m1",
        "name": "m1",
        "owner": "lead",
        "profile": "sonnet",
        "state": "idle",
        "liveStatus": "idle",
        "turn": 3,
        "queued": 1,
        "stateAgeSeconds": 12.5,
        "health": {"state": "MEMBER_STUCK", "ageSeconds": 4.0},
    }
    assert published["membersByLead"] == {"lead": 1, "lead-b": 1}
    assert published["incidents"][0]["routing"] == {
        "route": "lead",
        "reason": "peer_healthy",
        "generation": 2,
        "onBehalfOf": "lead",
        "outcome": None,
    }
    assert published["capacity"][1] == {
        "profile": "codex",
        "maxLoad": None,
        "live": 0,
        "free": None,
    }
    assert "never published" not in json.dumps(published)
    assert InstanceSummary.model_validate(published) == summarize(view, instance="host-a")


def test_a_summary_is_bounded_and_says_how_many_rows_it_left_out() -> None:
    """Past the caps the members in trouble (a troubled health, a failed or orphaned member)
    and the most severe incidents are kept first; each list counts what it left out, and
    ``membersByLead`` still counts every member."""
    members = [_member(f"q{i}", "lead", "IDLE") for i in range(6)]
    members += [_member("stuck", "lead-b", "MEMBER_STUCK"), _member("gone", "lead", None, "failed")]
    members += [_member("orphan", "lead", None, "orphaned")]
    incidents = [_incident(1, "info"), _incident(2, "critical"), _incident(3, "warning")]
    summary = summarize(_view(members, incidents), instance="a", max_members=4, max_incidents=2)
    assert [m.name for m in summary.members] == ["stuck", "gone", "orphan", "q0"]
    assert (summary.members_total, summary.members_left_out) == (9, 5)
    assert summary.members_by_lead == {"lead": 8, "lead-b": 1}
    assert [i.severity for i in summary.incidents] == ["critical", "warning"]
    assert (summary.incidents_total, summary.incidents_left_out) == (3, 1)
    few = summarize(_view(members, incidents), instance="a", max_leads=1)
    assert ([lead.name for lead in few.leads], few.leads_left_out) == (["lead"], 1)
    assert MAX_SUMMARY_MEMBERS >= 5_000


def test_a_view_before_any_health_tick_summarizes_too() -> None:
    """A view without health (no incidents list, no coverage) gives an empty incident list and
    no coverage rather than failing: an instance publishes from its first renewal."""
    view = _view([_member("m1", "lead", None)], [])
    del view["incidents"], view["healthCoverage"]
    summary = summarize(view, instance="a")
    assert (summary.incidents, summary.incidents_total, summary.health_coverage) == ([], 0, None)
    assert summary.members[0].health is None


async def test_the_summary_of_a_real_view_validates_and_holds_no_prompt(tmp_path: Path) -> None:
    """The operator view a test fleet builds (two members, one with a task sent) summarizes into
    a valid summary: its members by lead, no prompt text anywhere in it."""
    fleet = build_test_fleet(tmp_path)
    first = await fleet.spawn_ready()
    await fleet.spawn_ready(profile="codex")
    await fleet.ok("fleet_send", target=first, prompt="SECRET-PROMPT-TEXT")
    view = await fleet.service.views.view(OPERATOR)
    published = summarize(view, instance="here").model_dump(mode="json", by_alias=True)
    assert published["membersByLead"] == {"lead": 2}
    assert {m["sessionId"] for m in published["members"]} == {
        m["sessionId"] for m in view["members"]
    }
    assert "SECRET-PROMPT-TEXT" not in json.dumps(published)
    assert [lead["name"] for lead in published["leads"]] == ["lead", "lead-b"]
