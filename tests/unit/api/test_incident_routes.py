"""``GET /v1/incidents`` and ``POST /v1/incidents/{id}/replay`` over the app, on the journal fake:
who sees what, the delivery state shown, replay's answers, and a journal that cannot answer."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.incident_routes import IncidentListAnswer, ReplayAnswerEnvelope
from fleetd.errors import JournalUnavailableError
from fleetd.health.incidents import Assignment, ResolveReason, Route, RoutingReason
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import IncidentChange, Routing
from fleetd.notify.core.retry import PostResult
from fleetd.testing import (
    LEAD_TOKEN,
    OPERATOR_TOKEN,
    TestFleet,
    build_test_fleet,
    sample_document,
)
from tests.unit.notify.sink_kit import (
    SECRET_TEXT,
    ScriptedSender,
    human_incident,
    make_worker,
    open_incident,
)

DAY = timedelta(hours=24)
ENV = {"HOOK_URL": "http://127.0.0.1:9/hooks", "HOOK_SECRET": SECRET_TEXT}  # the kit's target


@pytest.fixture
def journal() -> InMemoryJournal:
    return InMemoryJournal()


@pytest.fixture
def fleet(tmp_path: Path, journal: InMemoryJournal) -> TestFleet:
    """The service as ``fleetd serve`` builds it, notifications on (the kit's target is its
    receiver list), its journal the fake."""
    document = sample_document(tmp_path)
    document["health"] = {
        "notifications": {
            "mode": "webhook",
            "webhookUrlEnv": "HOOK_URL",
            "secretEnv": "HOOK_SECRET",
        }
    }
    return build_test_fleet(tmp_path, document=document, environ=ENV, journal=journal)


def client(fleet: TestFleet) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    return httpx.AsyncClient(transport=transport, base_url="http://fleetd")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def seed(fleet: TestFleet, journal: InMemoryJournal) -> dict[str, str]:
    """A person's incident that failed permanently, one the lead owns, one lead-b received, one
    resolved an hour ago and one resolved two days ago; their ids by name."""
    now = fleet.clock.now()
    person = human_incident("sess_person")
    await open_incident(journal, person, at=now)
    sender = ScriptedSender(PostResult(status=404))
    await make_worker(journal, sender, fleet.clock).step()
    owned = human_incident("sess_owned").routed(
        Assignment(route=Route.LEAD, recipient="lead", reason=RoutingReason.OWNER, generation=1)
    )
    await journal.record(IncidentChange(incident=owned), now=now)
    received = IncidentChange(
        incident=human_incident("sess_received"),
        routing=Routing(owner="lead", recipient="lead-b", reason="peer_owner_unhealthy"),
    )
    await journal.record(received, now=now)
    ids = {"person": person.id, "owned": owned.id, "received": received.incident.id}
    for name, ago in (("recent", timedelta(hours=1)), ("old", 2 * DAY)):
        incident = human_incident(f"sess_{name}", opened_at=now - ago - timedelta(minutes=5))
        change = IncidentChange(incident=incident)
        await journal.record(change, now=now)
        closed = dataclasses.replace(
            change, resolved_at=now - ago, resolve_reason=ResolveReason.CLEARED
        )
        await journal.record(closed, now=now)
        ids[name] = incident.id
    return ids


async def test_the_operator_sees_open_and_recently_resolved_incidents(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """Open ones and the one resolved within a day, with routing and delivery state; the
    answer matches its documented schema."""
    ids = await seed(fleet, journal)
    async with client(fleet) as http:
        answer = await http.get("/v1/incidents", headers=bearer(OPERATOR_TOKEN))
    assert answer.status_code == 200
    IncidentListAnswer.model_validate(answer.json())
    rows = {row["id"]: row for row in answer.json()["result"]["incidents"]}
    assert set(rows) == {ids["person"], ids["owned"], ids["received"], ids["recent"]}
    person = rows[ids["person"]]
    assert (person["status"], person["delivery"]) == ("open", "failed")
    assert person["routing"] == {
        "route": "human",
        "owner": None,
        "recipient": None,
        "reason": "human_no_owner",
        "generation": 1,
    }
    (event,) = person["events"]
    assert (event["type"], event["state"], event["attempts"]) == ("open", "failed", 1)
    assert (event["lastFailure"], event["lastHttpStatus"]) == ("http_4xx", 404)
    assert event["eventId"].startswith("evt_")
    assert rows[ids["recent"]]["status"] == "resolved"
    assert rows[ids["owned"]]["delivery"] == "none"
    assert answer.json()["result"]["truncated"] is False


async def test_a_lead_sees_what_it_owns_or_receives(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """GET /v1/incidents shows a lead the incidents it owns or receives, and another lead only
    the one it receives."""
    ids = await seed(fleet, journal)
    async with client(fleet) as http:
        lead = await http.get("/v1/incidents", headers=bearer(LEAD_TOKEN))
        other = await http.get("/v1/incidents", headers=bearer(LEAD_TOKEN + "-b"))
    assert {row["id"] for row in lead.json()["result"]["incidents"]} == {
        ids["owned"],
        ids["received"],
    }
    assert [row["id"] for row in other.json()["result"]["incidents"]] == [ids["received"]]


async def test_members_and_strangers_are_refused(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """A member token gets 403 and no token 401 with a Bearer challenge on /v1/incidents; a lead
    may not replay (403)."""
    member = fleet.service.authenticator.mint_member_token("sess-m", "m1")
    async with client(fleet) as http:
        as_member = await http.get("/v1/incidents", headers=bearer(member))
        nobody = await http.get("/v1/incidents")
        lead_replays = await http.post(
            f"/v1/incidents/inc_{'0' * 24}/replay", headers=bearer(LEAD_TOKEN)
        )
    assert (as_member.status_code, as_member.json()["error"]["code"]) == (403, "forbidden")
    assert (nobody.status_code, nobody.json()["error"]["code"]) == (401, "unauthenticated")
    assert nobody.headers["www-authenticate"].startswith("Bearer")
    assert (lead_replays.status_code, lead_replays.json()["error"]["code"]) == (403, "forbidden")


async def test_replay_re_arms_a_failed_event_which_the_next_pass_sends(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """200 with the count; the worker sends the event again under the same id; a second replay
    has nothing to do."""
    ids = await seed(fleet, journal)
    path = f"/v1/incidents/{ids['person']}/replay"
    async with client(fleet) as http:
        first = await http.post(path, headers=bearer(OPERATOR_TOKEN))
        assert first.status_code == 200
        ReplayAnswerEnvelope.model_validate(first.json())
        assert first.json()["result"] == {"incidentId": ids["person"], "rearmed": 1}
        sender = ScriptedSender()
        assert (await make_worker(journal, sender, fleet.clock).step()).delivered == 1
        again = await http.post(path, headers=bearer(OPERATOR_TOKEN))
    assert (again.status_code, again.json()["error"]["code"]) == (409, "nothing_to_replay")
    stored = await journal.get(ids["person"])
    assert stored is not None
    assert sender.requests[0].event_id == stored.events[0].idempotency_key


async def test_replay_of_a_resolved_incident_never_sends_its_failed_open(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """Issue 20 1b: once the person's incident resolved, its refused ``open`` is cancelled,
    not re-armed: 409, and the next pass sends nothing."""
    ids = await seed(fleet, journal)
    stored = await journal.get(ids["person"])
    assert stored is not None
    escalation = fleet.service.health.escalation
    assert escalation is not None
    escalation.note_resolved(
        stored.incident, reason=ResolveReason.CLEARED, resolved_at=fleet.clock.now()
    )
    await escalation.step(fleet.clock.now())
    path = f"/v1/incidents/{ids['person']}/replay"
    async with client(fleet) as http:
        answer = await http.post(path, headers=bearer(OPERATOR_TOKEN))
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "nothing_to_replay")
    sender = ScriptedSender()
    assert (await make_worker(journal, sender, fleet.clock).step()).claimed == 0
    stored = await journal.get(ids["person"])
    assert stored is not None
    assert [(e.type.value, e.state.value) for e in stored.events] == [("open", "cancelled")]


async def test_a_replay_with_nothing_to_send_says_it_enabled_receivers_again(
    fleet: TestFleet, journal: InMemoryJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's replay gives back the receivers a 410 disabled even when the incident has
    nothing to re-arm: the 409 says so, instead of a bare refusal for a call that acted."""
    ids = await seed(fleet, journal)
    monkeypatch.setattr(fleet.service.sink, "enable_receivers", lambda: 1)
    path = f"/v1/incidents/{ids['person']}/replay"
    async with client(fleet) as http:
        await http.post(path, headers=bearer(OPERATOR_TOKEN))  # re-arms its one failed event
        answer = await http.post(path, headers=bearer(OPERATOR_TOKEN))
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "nothing_to_replay")
    message = answer.json()["error"]["message"]
    assert message.endswith("webhook receivers a 410 had disabled, enabled again: 1")


@pytest.mark.parametrize(
    ("incident_id", "status", "code"),
    [
        ("inc_" + "f" * 24, 404, "unknown_incident"),
        ("inc_XYZ", 400, "invalid_incident_id"),
        ("inc_" + "0" * 25, 400, "invalid_incident_id"),
        ("inc_%20" + "0" * 23, 400, "invalid_incident_id"),
    ],
)
async def test_replay_of_a_bad_or_unknown_id_says_which(
    fleet: TestFleet, journal: InMemoryJournal, incident_id: str, status: int, code: str
) -> None:
    """Replay of a well-formed unknown id answers 404 unknown_incident; a malformed id answers
    400 invalid_incident_id."""
    async with client(fleet) as http:
        answer = await http.post(
            f"/v1/incidents/{incident_id}/replay", headers=bearer(OPERATOR_TOKEN)
        )
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)


async def test_a_journal_that_cannot_answer_is_503(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """journal_unavailable with the bounded reason only; the journal's health says degraded."""
    journal.fail_with = JournalUnavailableError("recent", "unreachable")
    async with client(fleet) as http:
        down = await http.get("/v1/incidents", headers=bearer(OPERATOR_TOKEN))
        replay = await http.post(
            f"/v1/incidents/inc_{'0' * 24}/replay", headers=bearer(OPERATOR_TOKEN)
        )
    for answer in (down, replay):
        assert (answer.status_code, answer.json()["error"]["code"]) == (503, "journal_unavailable")
    assert down.json()["error"]["message"].endswith("(recent: unreachable)")
    watch = fleet.service.health.journal_watch
    assert watch is not None
    assert not watch.health.ok


async def test_the_replay_path_documents_the_incident_id_pattern(
    fleet: TestFleet, journal: InMemoryJournal
) -> None:
    """/openapi.json gives the replay path parameter the inc_ pattern every real id matches and a
    malformed id breaks, and a malformed id is the documented 400 invalid_incident_id."""
    ids = await seed(fleet, journal)
    async with client(fleet) as http:
        document = (await http.get("/openapi.json")).json()
        malformed = await http.post("/v1/incidents/inc_XYZ/replay", headers=bearer(OPERATOR_TOKEN))
    operation = document["paths"]["/v1/incidents/{incident_id}/replay"]["post"]
    [parameter] = operation["parameters"]
    pattern = re.compile(parameter["schema"]["pattern"])
    assert all(pattern.search(incident_id) for incident_id in ids.values())
    for bad in ("inc_XYZ", "inc_" + "0" * 25, "INC_" + "0" * 24, "x" + ids["person"]):
        assert pattern.search(bad) is None, bad
    assert (malformed.status_code, malformed.json()["error"]["code"]) == (
        400,
        "invalid_incident_id",
    )
    assert "invalid_incident_id" in operation["responses"]["400"]["description"]
