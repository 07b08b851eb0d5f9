"""The terminal's screens drawn from recorded fleetd answers (``make demo``'s fleet at its end):
what each shows, and that every screen fits its size, cutting sections with ``+N more``."""

from __future__ import annotations

import copy
import io
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from fleetd.runtime.fleet_summary import summarize
from fleetd.term.view import age, fleet_all_screen, fleet_screen, identity, incident_screen

PAYLOADS = Path(__file__).parent / "payloads"
SOURCE = "http://127.0.0.1:8765"


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((PAYLOADS / name).read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def fleet() -> dict[str, Any]:
    return _load("fleet_demo.json")


@pytest.fixture
def listing() -> dict[str, Any]:
    return _load("incidents_demo.json")


def _plain(lines: list[Text]) -> list[str]:
    return [line.plain for line in lines]


def _fits(lines: list[Text], width: int = 80, height: int = 24) -> None:
    assert len(lines) <= height
    assert max(len(line) for line in _plain(lines)) <= width


def _crowded(fleet: dict[str, Any], members: int, incidents: int) -> dict[str, Any]:
    """``fleet`` with ``members`` members (over two leads) and ``incidents`` open incidents."""
    crowded = copy.deepcopy(fleet)
    template = fleet["members"][0]
    crowded["members"] = [
        {
            **template,
            "sessionId": f"s-{n:08x}",
            "name": f"m-{n}",
            "owner": ["lead", "lead-b"][n % 2],
        }
        for n in range(members)
    ]
    incident = fleet["incidents"][0]
    crowded["incidents"] = [{**incident, "id": f"inc_{n:024x}"} for n in range(incidents)]
    return crowded


def test_the_status_screen_of_the_demo_fleet_fits_80x24_and_shows_each_part(
    fleet: dict[str, Any],
) -> None:
    """Who is asking, the link/inbox/journal/sink line, each lead with health and inbox, members
    grouped under their lead with state, health, turn and queue, and incidents with routing."""
    lines = fleet_screen(fleet, source=SOURCE, who="operator")
    _fits(lines)
    text = _plain(lines)
    assert text[0].startswith(f"fleetd {SOURCE} as operator · view 114")
    assert text[1] == ("link up · inbox ok · journal ok · webhook 1/1 up · coverage full")
    [lead_b] = [line for line in text if line.startswith("  lead-b ")]
    assert lead_b.split()[:2] == ["lead-b", "LEAD_IDLE"]
    assert lead_b.split()[-5:] == ["inbox", "6", "cap", "holds", "3"]
    members = text[text.index(next(t for t in text if t.startswith("MEMBERS 4"))) + 1 :][:4]
    assert members[0].split()[:4] == ["lead", "codex-1", "done", "IDLE"]
    assert members[3].split()[:4] == ["sonnet-usage", "done", "ERROR_ON_SCREEN", "#1"]
    assert members[3].rstrip().endswith("q0")
    incidents = [line for line in text if line.startswith("  inc_")]
    assert len(incidents) == 3
    assert "sonnet-usage" in incidents[1]  # a member's session id is shown by its name
    assert all(line.rstrip().endswith("→ lead-b") for line in incidents)


def test_an_incident_routed_to_a_person_says_so_with_its_outcome(fleet: dict[str, Any]) -> None:
    """``route: human`` reads ``→ person`` and the human leg's outcome, not a lead's name."""
    fleet["incidents"][0]["routing"] = {"route": "human", "reason": "x", "outcome": "webhook"}
    text = _plain(fleet_screen(fleet, source=SOURCE, who="operator"))
    assert any(line.endswith("→ person (webhook)") for line in text)


def test_a_crowded_fleet_is_cut_to_24_lines_with_counts_of_what_is_left_out(
    fleet: dict[str, Any],
) -> None:
    """40 members and 15 incidents: the screen keeps 24 lines of 80 columns; the sections say
    how many rows they left out, and every lead still shows."""
    lines = fleet_screen(_crowded(fleet, 40, 15), source=SOURCE, who="operator")
    _fits(lines)
    assert len(lines) == 24
    text = _plain(lines)
    more = [line.strip() for line in text if line.strip().startswith("+")]
    assert len(more) == 2
    shown_members = sum(1 for line in text if " m-" in line)
    shown_incidents = sum(1 for line in text if line.startswith("  inc_"))
    assert more == [f"+{40 - shown_members} more", f"+{15 - shown_incidents} more"]
    assert sum(1 for line in text if " herdr " in line) == 2


@pytest.mark.parametrize(("width", "height"), [(80, 24), (60, 12), (120, 40), (30, 8)])
def test_every_screen_fits_its_size(
    fleet: dict[str, Any], listing: dict[str, Any], width: int, height: int
) -> None:
    """No line is wider than the screen, and there are never more lines than it has."""
    crowded = _crowded(fleet, 70, 30)
    now = datetime.fromisoformat(fleet["generatedAt"])
    many = {**listing, "incidents": listing["incidents"] * 20}
    for lines in (
        fleet_screen(crowded, source=SOURCE, who="operator", width=width, height=height),
        fleet_screen(
            crowded, source=SOURCE, who="operator", lead="lead-b", width=width, height=height
        ),
        incident_screen(many, source=SOURCE, who="operator", now=now, width=width, height=height),
    ):
        _fits(lines, width, height)


def test_a_lead_filter_keeps_that_leads_members_and_incidents(fleet: dict[str, Any]) -> None:
    """Filtered to lead-b: no member of lead, and the incidents lead-b receives."""
    text = _plain(fleet_screen(fleet, source=SOURCE, who="operator", lead="lead-b"))
    assert any(line.startswith("MEMBERS 0 of lead-b") for line in text)
    assert sum(1 for line in text if line.startswith("  inc_")) == 3
    assert any(line.startswith("  ▸ lead-b") for line in text)
    only_lead = _plain(
        fleet_screen(_crowded(fleet, 6, 0), source=SOURCE, who="operator", lead="lead")
    )
    assert any(line.startswith("MEMBERS 3 of lead") for line in only_lead)


def test_who_is_asking_is_what_whoami_answered(fleet: dict[str, Any]) -> None:
    """``GET /v1/whoami``'s result names the operator or the lead, and the header says it."""
    assert identity({"role": "operator", "lead": None}) == "operator"
    assert identity({"role": "lead", "lead": "lead-b"}) == "lead lead-b"
    header = _plain(fleet_screen(fleet, source=SOURCE, who="lead lead-b"))[0]
    assert header.startswith(f"fleetd {SOURCE} as lead lead-b · view 114")


def test_a_failing_journal_and_sink_and_a_down_link_show_on_the_coverage_line(
    fleet: dict[str, Any],
) -> None:
    """Degraded coverage names what fails: the journal, the webhook sink; a down link and an
    unreachable inbox say so."""
    fleet["controlLink"]["state"] = "down"
    fleet["inbox"]["reachable"] = False
    fleet["healthCoverage"] = {
        "detection": "enabled",
        "status": "degraded",
        "reason": "incident journal failing (timeout); webhook sink failing (attempts_failing)",
    }
    fleet["dependencies"]["webhook"]["endpoints"][0]["reachable"] = False
    line = _plain(fleet_screen(fleet, source=SOURCE, who="operator"))[1]
    assert line == ("link down · inbox down · journal failing · webhook 0/1 up · coverage degraded")


def test_the_incident_screen_lists_open_then_resolved_with_delivery(
    listing: dict[str, Any],
) -> None:
    """Open incidents first, then those resolved, each with its age, routing and delivery."""
    now = datetime.fromisoformat("2026-12-05T05:08:11+00:00")
    text = _plain(incident_screen(listing, source=SOURCE, who="operator", now=now))
    assert text[0] == f"fleetd {SOURCE} as operator"
    assert text[1].startswith("OPEN 3")
    resolved = text.index(next(line for line in text if line.startswith("RESOLVED 1")))
    assert resolved == 5
    first = text[2].split()
    assert first == [
        "inc_04f68409",
        "LEAD_UNREACHABLE",
        "lead",
        "1m40s",
        "→",
        "lead-b",
        "delivered",
    ]
    assert text[6].split()[-3:] == ["→", "person", "delivered"]


def test_ages_read_in_the_largest_useful_units() -> None:
    """Seconds, then minutes and seconds, hours and minutes, days and hours; none is ``-``."""
    assert [age(s) for s in (None, 0, 59.9, 61, 3599, 3660, 90000)] == [
        "-",
        "0s",
        "59s",
        "1m01s",
        "59m59s",
        "1h01m",
        "1d01h",
    ]


def test_a_member_shows_its_open_turns_age_and_an_orphan_says_so(fleet: dict[str, Any]) -> None:
    """A member in a turn shows the turn number and how long ago its prompt was delivered, and
    its queue; an orphan of an earlier run shows ``orphaned`` and no turn."""
    busy = {
        **fleet["members"][0],
        "name": "busy-1",
        "state": "busy",
        "turn": 2,
        "queued": 3,
        "openTurn": {"ticket": "t", "turn": 2, "delivery": None, "deliveredAgeSeconds": 75.0},
    }
    orphan = {
        "sessionId": "s-0rphan00",
        "name": "orphan-1",
        "owner": "lead-b",
        "state": "orphaned",
        "liveStatus": "idle",
    }
    fleet["members"] = [busy, orphan]
    text = _plain(fleet_screen(fleet, source=SOURCE, who="operator"))
    [busy_row] = [line for line in text if "busy-1" in line]
    assert busy_row.split()[1:] == ["busy-1", "busy", "IDLE", "#2", "1m15s", "q3"]
    [orphan_row] = [line for line in text if "orphan-1" in line]
    assert orphan_row.split() == ["lead-b", "orphan-1", "orphaned", "-", "-", "q0"]


def _all_document(fleet: dict[str, Any]) -> dict[str, Any]:
    """``scope=all`` as ``a`` answers it: its own view, ``b`` up (its summary of the same fleet)
    and ``c`` down with its last summary."""

    def peer(name: str, seconds: float, down: bool) -> dict[str, Any]:
        summary = summarize(fleet, instance=name).model_dump(mode="json", by_alias=True)
        return {
            "instance": name,
            "answering": False,
            "host": f"host-{name}",
            "ageSeconds": seconds,
            "down": down,
            "summary": summary,
        }

    return {
        "version": 1,
        "scope": "all",
        "instance": "a",
        "live": 2,
        "down": 1,
        "instances": [
            {
                "instance": "a",
                "answering": True,
                "host": "host-a",
                "ageSeconds": 3.0,
                "down": False,
                "view": fleet,
            },
            peer("b", 12.0, False),
            peer("c", 95.0, True),
        ],
    }


def test_the_fleet_of_every_instance_is_one_block_each_a_down_one_marked(
    fleet: dict[str, Any],
) -> None:
    """``fleetd status --all``: a header counting instances up and down, then one block per
    instance — the answering one first — titled with its host and the age of its renewal, a
    silent one ``DOWN``; each block counts members by lead from its view or its summary, and
    shows its leads; everything fits 80×24 (cut sections say ``+N more``)."""
    lines = fleet_all_screen(
        _all_document(fleet), source=SOURCE, who="operator", width=120, height=60
    )
    text = _plain(lines)
    assert "3 instances · 2 up · 1 down" in text[0]
    titles = [line for line in text if line.startswith("INSTANCE")]
    assert titles == [
        "INSTANCE a (answering)  host-a · renewed 3s ago · up",
        "INSTANCE b  host-b · renewed 12s ago · up",
        "INSTANCE c  host-c · renewed 1m35s ago · DOWN (stopped renewing: its last summary)",
    ]
    owners = sorted({str(m["owner"]) for m in fleet["members"]})
    counted = [line for line in text if "· members " in line]
    assert len(counted) == 3
    assert len({line.split("· members ")[1] for line in counted}) == 1  # view and summary agree
    assert all(owner in counted[0] for owner in owners)
    small = fleet_all_screen(_all_document(fleet), source=SOURCE, who="operator")
    _fits(small)
    assert sum(line.plain.startswith("INSTANCE") for line in small) == 3


def test_an_instance_without_a_summary_and_the_single_instance_note_are_said(
    fleet: dict[str, Any],
) -> None:
    """A peer whose summary could not be read says why instead of showing nothing; an SQLite
    fleetd's note (scope=all shows this instance only) is shown under the header."""
    document = _all_document(fleet)
    document["instances"][1].update(summary=None, summaryProblem="unknown_version: 2")
    document["note"] = "an SQLite journal serves one fleetd: scope=all shows this instance only"
    text = _plain(fleet_all_screen(document, source=SOURCE, who="operator", width=120, height=60))
    assert "  no summary to show (unknown_version: 2)" in text
    assert text[1].startswith("an SQLite journal serves one fleetd")


def _poisoned(value: Any) -> Any:
    """``value`` with an escape sequence, a bell, a C1 control, a bidi override and a line
    separator in every string in it."""
    if isinstance(value, str):
        return value + "\x1b]0;owned\x07\x1b[2J\x9b\u202e\u2028"
    if isinstance(value, list):
        return [_poisoned(item) for item in value]
    if isinstance(value, dict):
        return {key: _poisoned(item) for key, item in value.items()}
    return value


def test_text_from_the_service_never_reaches_the_terminal_as_control_codes(
    fleet: dict[str, Any], listing: dict[str, Any]
) -> None:
    """Every string of the answers (a role a lead chose, a name, a message) carrying escape
    sequences and control characters is drawn with each control shown as ``?``: rendered to a
    terminal, the only escapes are the screen's own colours."""
    fleet["members"] = _poisoned(fleet["members"])
    fleet["incidents"] = _poisoned(fleet["incidents"])
    listing["incidents"] = _poisoned(listing["incidents"])
    now = datetime.fromisoformat("2026-12-05T05:08:11+00:00")
    screens = [
        fleet_screen(fleet, source=SOURCE, who="operator"),
        incident_screen(listing, source=SOURCE, who="operator", now=now),
    ]
    for lines in screens:
        assert any("?" in line for line in _plain(lines))
        out = io.StringIO()
        Console(file=out, force_terminal=True, color_system="standard", width=200).print(
            Text("\n").join(lines)
        )
        escapes = re.findall(r"\x1b.{0,12}", out.getvalue())
        assert escapes
        assert all(re.match(r"\x1b\[[0-9;]*m", escape) for escape in escapes), escapes[:3]
        assert not re.search("[\x00-\x09\x0b-\x1a\x1c-\x1f\x7f-\x9f\u202e\u2028]", out.getvalue())
