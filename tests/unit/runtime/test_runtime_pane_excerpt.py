"""``health.includePaneExcerpt`` through the service ``fleetd serve`` builds (fakes under it): the
owning lead's health record ends with a redacted excerpt of the pane the health probe read; the
incident, the journal, a person's webhook event, the fleet view, metrics and the log never carry
it."""

from __future__ import annotations

import base64
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.journal.memory import InMemoryJournal
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet, sample_document

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
HOOK = "https://hooks.example.com/services/T0/B0/hooktokenvalue"
ENV = {"HOOK_URL": HOOK, "HOOK_SECRET": SECRET}
SCREEN = (
    "$ env | grep FLEETD\n"
    f"FLEETD_LEAD_TOKEN_COPY {LEAD_TOKEN}\n"
    f"posting to {HOOK}\n"
    "● Working on it\n\n"
    '  ⎿  API Error: 529 {"type":"error","error":{"type":'
    '"overloaded_error","message":"Overloaded"}}\n'
)
PANE_WORDS = "overloaded_error"  # on the screen, in no code fleetd writes


def _document(tmp_path: Path, *, excerpt: bool) -> dict[str, Any]:
    """One lead (no peer), health on with the key as given, the webhook sink on."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    document["health"] = {
        "enabled": True,
        "includePaneExcerpt": excerpt,
        "notifications": {
            "mode": "webhook",
            "webhookUrlEnv": "HOOK_URL",
            "secretEnv": "HOOK_SECRET",
        },
    }
    return document


async def _error_on_screen(tmp_path: Path, *, excerpt: bool) -> tuple[TestFleet, str]:
    """A member's open turn stops at an error screen; the probe reads it; ERROR_ON_SCREEN opens."""
    journal = InMemoryJournal()
    document = _document(tmp_path, excerpt=excerpt)
    fleet = build_test_fleet(tmp_path, document=document, environ=ENV, journal=journal)
    await fleet.service.own_lead_keys()
    sid = await fleet.spawn_ready("sonnet")
    await fleet.ok("fleet_send", target=sid, prompt="x")
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert session.pane_id is not None
    fleet.set_status(sid, AgentStatus.BLOCKED)
    fleet.control.set_screen(session.pane_id, SCREEN)
    for _ in range(6):
        fleet.clock.advance(30)
        await fleet.service.health.tick()
        if str(fleet.service.health.state.members[sid].state) == "ERROR_ON_SCREEN":
            break
    assert str(fleet.service.health.state.members[sid].state) == "ERROR_ON_SCREEN"
    return fleet, sid


async def _health_records(fleet: TestFleet) -> list[dict[str, Any]]:
    messages = (await fleet.ok("fleet_poll"))["messages"]
    return [m for m in messages if m["kind"] == "health" and m["state"] == "ERROR_ON_SCREEN"]


async def test_with_the_key_on_the_lead_s_record_ends_with_the_redacted_excerpt(
    tmp_path: Path,
) -> None:
    """The owning lead reads the screen's tail under a marker; tokens and URLs are redacted."""
    fleet, sid = await _error_on_screen(tmp_path, excerpt=True)
    [record] = await _health_records(fleet)
    content: str = record["content"]
    summary, _, rest = content.partition("\n\n[pane excerpt - ")
    assert PANE_WORDS not in summary
    session = fleet.bridge.reads.session(sid)
    assert session is not None
    assert rest.startswith(f"{session.name}'s screen as fleetd's health check read it ")
    assert "never to a person" in rest
    assert PANE_WORDS in rest
    assert "API Error: 529" in rest
    assert LEAD_TOKEN not in content
    assert HOOK not in content
    assert "hooktokenvalue" not in content
    assert "FLEETD_LEAD_TOKEN_COPY [redacted]" in rest
    assert "posting to [redacted]" in rest
    assert PANE_WORDS not in json.dumps(record["evidence"])


async def test_the_excerpt_reaches_no_person_journal_view_metric_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the key on, the incident goes on to a person when the sole lead vanishes: the
    journal row and every webhook payload, the fleet view, /metrics and the log hold no pane
    text (M4 §10.5); only the lead's inbox record had it."""
    with caplog.at_level(logging.DEBUG):
        fleet, sid = await _error_on_screen(tmp_path, excerpt=True)
        assert [r for r in await _health_records(fleet) if PANE_WORDS in r["content"]]
        fleet.control.remove("lead")
        escalation = fleet.service.health.escalation
        assert escalation is not None
        for _ in range(3):
            fleet.clock.advance(30)
            await fleet.service.health.tick()
            await escalation.step(fleet.clock.now())  # the webhook loop records the changes
    journal = fleet.service.health.journal
    assert journal is not None
    [incident] = [i for i in fleet.service.health.state.open_incidents() if i.subject == sid]
    assert incident.route == "human"
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events  # a person's open event was recorded
    assert PANE_WORDS not in repr(stored)
    claims = await journal.claim_due("t", now=fleet.clock.now(), lease=timedelta(seconds=30))
    assert claims  # what the webhook worker would send a person
    assert all(PANE_WORDS not in json.dumps(dict(c.payload)) for c in claims)
    assert PANE_WORDS not in repr(incident)
    listed = await fleet.ok("fleet_list", caller=None)
    assert PANE_WORDS not in json.dumps(listed)
    assert PANE_WORDS.encode() not in fleet.service.metrics.exposition()
    assert PANE_WORDS not in caplog.text
    assert LEAD_TOKEN not in caplog.text


async def test_with_the_key_off_no_record_carries_pane_text(tmp_path: Path) -> None:
    """The default: the lead's record holds codes and names only."""
    fleet, _ = await _error_on_screen(tmp_path, excerpt=False)
    [record] = await _health_records(fleet)
    assert "[pane excerpt" not in record["content"]
    assert PANE_WORDS not in json.dumps(record)
