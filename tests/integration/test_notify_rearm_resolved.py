"""Re-arming a permanently failed event of a *resolved* incident, on the fake, SQLite and
PostgreSQL journals, through the delivery worker and the operator's replay route.

Issue 20 (1b): a person must never get ``open`` for an incident that resolved before its ``open``
was delivered, and a person who got ``open`` gets ``resolved``. So after a receiver config change
or a replay, a resolved incident's failed ``open`` stays unsent, while its failed ``resolved`` is
sent again. Which events come back is the human-leg policy's decision, carried out by the
webhook loop (escalation step, then worker) as ``fleetd serve`` runs it.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import httpx

from fleetd.api.app import create_app
from fleetd.clock import FakeClock
from fleetd.health.incidents import Incident, ResolveReason
from fleetd.journal.port import Journal
from fleetd.journal.values import EventState, EventType, IncidentChange, NewEvent
from fleetd.notify.core.retry import PostResult
from fleetd.notify.core.signing import HEADER_ID
from fleetd.testing import OPERATOR_TOKEN, build_test_fleet, sample_document
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import (
    SECRET_TEXT,
    ScriptedSender,
    body_of,
    human_incident,
    make_leg,
    make_worker,
    open_incident,
    payload,
    target,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tests.contract.journal_fixtures import JournalKit

pytest_plugins = ["tests.contract.journal_fixtures"]

MOVED = "http://127.0.0.1:9/moved"


async def _resolve(
    journal: Journal, change: IncidentChange, *, at: datetime, resolved_event: bool
) -> None:
    """Record the resolution as the escalation does: a ``resolved`` event only when a person got
    an earlier one, and an ``open`` nobody got cancelled."""
    closed = dataclasses.replace(
        change,
        resolved_at=at,
        resolve_reason=ResolveReason.CLEARED,
        cancel=() if resolved_event else (1,),
    )
    incident: Incident = change.incident
    closing = payload(incident, EventType.RESOLVED, 2, at=at)
    events = [NewEvent(type=EventType.RESOLVED, payload=closing)] if resolved_event else []
    await journal.record(closed, events, now=at)


async def _open_failed_then_resolved(journal: Journal) -> tuple[Incident, ScriptedSender]:
    """A person's ``open`` refused for good (404), then the incident resolved: nobody was told."""
    incident = human_incident()
    change = await open_incident(journal, incident, at=T0)
    sender = ScriptedSender(PostResult(status=404))
    worker = make_worker(journal, sender, _clock())
    assert (await worker.step()).failed == 1
    await _resolve(journal, change, at=T0 + timedelta(minutes=1), resolved_event=False)
    return incident, sender


async def _resolved_failed(journal: Journal) -> tuple[Incident, ScriptedSender]:
    """A person got ``open``; the incident resolved; its ``resolved`` was refused for good."""
    incident = human_incident()
    change = await open_incident(journal, incident, at=T0)
    sender = ScriptedSender(PostResult(status=200), PostResult(status=404))
    worker = make_worker(journal, sender, _clock())
    assert (await worker.step()).delivered == 1
    await _resolve(journal, change, at=T0 + timedelta(minutes=1), resolved_event=True)
    assert (await worker.step()).failed == 1
    return incident, sender


def _clock() -> FakeClock:
    """A clock past the resolution, for a worker that starts now."""
    return FakeClock(T0 + timedelta(minutes=2))


async def test_a_target_change_does_not_send_a_resolved_incident_s_failed_open(
    journal_kit: JournalKit,
) -> None:
    """The person never got ``open`` and the incident is over: the new target gets nothing."""
    journal = journal_kit.build()
    incident, sender = await _open_failed_then_resolved(journal)
    moved = make_leg(journal, sender, _clock(), sink=target(MOVED))
    report = await moved.step()
    assert (report.claimed, report.delivered) == (0, 0)
    assert len(sender.requests) == 1
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events[0].state is not EventState.DELIVERED


async def test_a_target_change_sends_a_resolved_incident_s_failed_resolved_once(
    journal_kit: JournalKit,
) -> None:
    """The person got ``open``: its refused ``resolved`` goes to the new target, same id."""
    journal = journal_kit.build()
    incident, sender = await _resolved_failed(journal)
    moved = make_leg(journal, sender, _clock(), sink=target(MOVED))
    report = await moved.step()
    assert report.delivered == 1
    assert [body_of(r)["eventType"] for r in sender.requests] == ["open", "resolved", "resolved"]
    assert sender.requests[1].headers[HEADER_ID] == sender.requests[2].headers[HEADER_ID]
    assert sender.requests[2].url == MOVED
    assert (await moved.step()).claimed == 0
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [
        (EventType.OPEN, EventState.DELIVERED),
        (EventType.RESOLVED, EventState.DELIVERED),
    ]


async def _replay(tmp_path: Path, journal: Journal, incident: Incident) -> httpx.Response:
    """The operator's ``POST /v1/incidents/{id}/replay`` on the service ``fleetd serve`` builds."""
    document = sample_document(tmp_path)
    document["health"] = {
        "enabled": True,
        "notifications": {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_KEY"},
    }
    env = {"HOOK_URL": MOVED, "HOOK_KEY": SECRET_TEXT}
    fleet = build_test_fleet(tmp_path, document=document, environ=env, journal=journal)
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
        return await http.post(
            f"/v1/incidents/{incident.id}/replay",
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )


async def test_a_replay_does_not_send_a_resolved_incident_s_failed_open(
    journal_kit: JournalKit, tmp_path: Path
) -> None:
    """Replaying an incident that resolved before anyone was told has nothing to send."""
    journal = journal_kit.build()
    incident, sender = await _open_failed_then_resolved(journal)
    answer = await _replay(tmp_path, journal, incident)
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "nothing_to_replay"
    assert (await make_leg(journal, sender, _clock()).step()).claimed == 0
    assert len(sender.requests) == 1


async def test_a_replay_sends_a_resolved_incident_s_failed_resolved(
    journal_kit: JournalKit, tmp_path: Path
) -> None:
    """Replaying an incident whose ``resolved`` was refused sends that event, and only it."""
    journal = journal_kit.build()
    incident, sender = await _resolved_failed(journal)
    answer = await _replay(tmp_path, journal, incident)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"incidentId": incident.id, "rearmed": 1}
    report = await make_leg(journal, sender, _clock()).step()
    assert (report.claimed, report.delivered) == (1, 1)
    assert body_of(sender.requests[-1])["eventType"] == "resolved"
