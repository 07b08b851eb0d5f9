"""``fleetd status`` and ``fleetd incidents`` against fleetd's own app on uvicorn (built by the
composition root on fakes): what they print, ``--json``'s shape, and the plain words and exit
codes for a refused token (4), a role that may not read (4), an unreachable fleetd (3) and a
missing token (2). No output ever holds the token."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from fleetd.api.app import create_app
from fleetd.api.incident_routes import IncidentList
from fleetd.term.commands import incidents_main, status_main
from fleetd.testing import LEAD_TOKEN, OPERATOR_TOKEN, TestFleet
from tests.integration.term_server import serve
from tests.unit.core.test_metrics_from_start import _fleet


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[TestFleet, str]]:
    """A fleet with a member and a control-link incident routed to a person, served."""
    fleet = _fleet(tmp_path)
    await fleet.spawn_ready()
    await fleet.service.health.tick()
    fleet.control.link_down()
    for _ in range(3):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
    await fleet.service.scheduler.run_once("webhook")  # the journal records it, a send is tried
    async with serve(create_app(fleet.service)) as base:
        yield fleet, base


@pytest.fixture(autouse=True)
def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")


async def _run(
    main: Callable[..., int], argv: list[str], env: dict[str, str], capsys: Any
) -> tuple[int, str, str]:
    """A command as the CLI runs it (its own event loop, here in a thread beside the server)."""
    code = await asyncio.to_thread(main, argv, env)
    out, err = capsys.readouterr()
    return code, out, err


async def test_status_as_the_operator_shows_one_screen_with_the_incident_routed_to_a_person(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator's screen: who is asking, the down link, both leads, the member under its
    lead, the link incident routed to a person; 80×24 at most."""
    _, base = served
    env = {"FLEETD_URL": base, "FLEETD_TOKEN": OPERATOR_TOKEN}
    code, out, err = await _run(status_main, [], env, capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) <= 24
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith(f"fleetd {base} as operator")
    assert lines[1].startswith("link down")
    assert any(line.startswith("MEMBERS 1 by lead") for line in lines)
    [incident] = [line for line in lines if line.startswith("  inc_")]
    assert "CONTROL_LINK_DOWN" in incident
    assert "→ person" in incident


async def test_status_with_a_lead_token_says_which_lead_is_asking(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A lead's token (from a variable named by --token-env) shows that lead's view."""
    _, base = served
    env = {"FLEETD_URL": base, "MY_LEAD_TOKEN": LEAD_TOKEN}
    code, out, _ = await _run(status_main, ["--token-env", "MY_LEAD_TOKEN"], env, capsys)
    assert code == 0
    assert out.splitlines()[0].startswith(f"fleetd {base} as lead lead ")


async def test_status_all_shows_this_instance_as_its_block_and_says_sqlite_serves_one(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``fleetd status --all`` on an SQLite fleetd: the header counts one instance up, the note
    says SQLite serves one fleetd, and this instance is one block with its member counted by
    lead and its incident; a lead's token is refused (exit 4) with fleetd's reason."""
    fleet, base = served
    env = {"FLEETD_URL": base, "FLEETD_TOKEN": OPERATOR_TOKEN}
    code, out, err = await _run(status_main, ["--all"], env, capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) <= 24
    assert lines[0].startswith(f"fleetd {base} as operator · 1 instances · 1 up · 0 down")
    assert lines[1].startswith("an SQLite journal serves one fleetd")
    name = fleet.service.instances.instance
    assert any(line.startswith(f"INSTANCE {name} (answering)") for line in lines)
    assert any("members 1: lead 1" in line for line in lines)
    assert any("CONTROL_LINK_DOWN" in line for line in lines)
    code, out, err = await _run(status_main, ["--all"], {**env, "FLEETD_TOKEN": LEAD_TOKEN}, capsys)
    assert (code, out) == (4, "")
    assert "403 forbidden" in err
    assert "scope=all is the operator's" in err


async def test_incidents_json_prints_the_listing_as_fleetd_gives_it(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json``: the ``GET /v1/incidents`` result, valid against its wire model, with each
    incident's routing and delivery state."""
    _, base = served
    env = {"FLEETD_URL": base, "FLEETD_TOKEN": OPERATOR_TOKEN}
    code, out, _ = await _run(incidents_main, ["--json"], env, capsys)
    assert code == 0
    printed = json.loads(out)
    listing = IncidentList.model_validate(printed)
    assert set(printed) == {"incidents", "resolvedSince", "limit", "truncated"}
    [incident] = listing.incidents
    assert (incident.status, incident.state, incident.routing.route) == (
        "open",
        "CONTROL_LINK_DOWN",
        "human",
    )
    assert incident.delivery == "pending"  # the receiver at 127.0.0.1:9 never answers
    assert incident.events[0].last_failure == "network"
    code, out, _ = await _run(incidents_main, [], env, capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("OPEN 1")
    assert lines[2].startswith(f"  {incident.id[:12]} CONTROL_LINK_DOWN")


async def test_a_refused_token_exits_4_and_never_echoes_the_token(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """401: 'the token was refused' with fleetd's code; nothing printed holds the token."""
    _, base = served
    wrong = "not-a-token-of-this-fleetd-42"
    for main in (status_main, incidents_main):
        code, out, err = await _run(main, [], {"FLEETD_URL": base, "FLEETD_TOKEN": wrong}, capsys)
        assert code == 4
        assert out == ""
        assert err == (
            "fleetd: the token was refused (401 unauthenticated): "
            "the bearer token is not recognised\n"
        )
        assert wrong not in err


async def test_a_role_that_may_not_list_incidents_exits_4_naming_the_403(
    served: tuple[TestFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A member's token is known but may not list incidents: 403, said as such."""
    fleet, base = served
    token = fleet.service.authenticator.mint_member_token("s-term", "term-member")
    env = {"FLEETD_URL": base, "FLEETD_TOKEN": token}
    code, _, err = await _run(incidents_main, [], env, capsys)
    assert code == 4
    assert err.startswith("fleetd: the token may not read /v1/incidents (403 forbidden)")
    assert token not in err


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_fleetd_exits_3_and_a_missing_token_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing listens: exit 3 naming the URL; no token in the environment: exit 2 naming the
    variable to set."""
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = await _run(status_main, [], {"FLEETD_URL": url, "FLEETD_TOKEN": "t"}, capsys)
    assert (code, out) == (3, "")
    assert err == f"fleetd: fleetd is unreachable at {url} (connection refused or host not found)\n"
    code, _, err = await _run(incidents_main, ["--json"], {"FLEETD_URL": url}, capsys)
    assert code == 2
    assert err.startswith("fleetd: FLEETD_TOKEN is not set")
