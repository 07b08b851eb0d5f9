"""Incidents reach the journal and a person's events follow the §10.1–§10.3 rules, through the
monitor that ``fleetd serve`` runs (a test fleet on fakes, with an in-memory journal): each health
tick is followed by the webhook loop's escalation step, which records what the tick changed."""

from __future__ import annotations

import base64
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fleetd.bridge.sessions import SessionState
from fleetd.errors import InboxUnavailableError, JournalUnavailableError
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.records import InboxRecord
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventState, EventType
from fleetd.testing import TestFleet, build_test_fleet, sample_document

SCHEMA = json.loads(
    (Path(__file__).parents[3] / "contracts/webhook/incident-event.v1.schema.json").read_text()
)
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
LEASE = timedelta(seconds=30)
ENV = {"HOOK_URL": "http://127.0.0.1:9/hook", "HOOK_SECRET": SECRET}


def _document(tmp_path: Path, *, webhook: bool = True) -> dict[str, Any]:
    """One lead (a sole lead: no peer), health on, the webhook sink on or off."""
    document: dict[str, Any] = sample_document(tmp_path)
    document["leads"] = document["leads"][:1]
    notifications: dict[str, Any] = {"mode": "webhook" if webhook else "disabled"}
    if webhook:
        notifications |= {"webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_SECRET"}
    document["health"] = {
        "enabled": True,
        "snapshotIntervalSeconds": 15,
        "notifications": notifications,
    }
    return document


def _fleet(tmp_path: Path, journal: InMemoryJournal, *, webhook: bool) -> TestFleet:
    document = _document(tmp_path, webhook=webhook)
    return build_test_fleet(tmp_path, document=document, environ=ENV, journal=journal)


async def _tick(fleet: TestFleet) -> None:
    """One health tick, then the webhook loop's journal step (the tick's changes recorded)."""
    await fleet.service.health.tick()
    await fleet.service.health.journal_step(fleet.clock.now())


async def _sole_lead_gone(fleet: TestFleet) -> None:
    """The only lead vanishes: two absences with a working ping make it unreachable, and with no
    peer the lead incident is routed to a person."""
    await fleet.service.own_lead_keys()
    fleet.control.remove("lead")
    for _ in range(3):
        fleet.clock.advance(15)
        await _tick(fleet)


def _lead_incidents(fleet: TestFleet) -> list[Any]:
    return [i for i in fleet.service.health.state.open_incidents() if i.scope == "lead"]


async def test_a_sole_lead_failure_is_journaled_with_one_signed_ready_open_event(
    tmp_path: Path,
) -> None:
    """A sole lead's failure routes to a person and journals one pending open event whose payload
    matches the webhook schema; coverage reads full."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(fleet)
    [incident] = _lead_incidents(fleet)
    assert incident.route == "human"
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.revision, e.state) for e in stored.events] == [
        (EventType.OPEN, 1, EventState.PENDING)
    ]
    [claim] = await journal.claim_due("t", now=fleet.clock.now(), lease=LEASE)
    jsonschema.validate(dict(claim.payload), SCHEMA)
    assert claim.payload["eventType"] == "open"
    assert claim.payload["eventId"] == claim.idempotency_key
    sent = claim.payload["incident"]
    assert isinstance(sent, dict)
    assert sent["state"] == "LEAD_UNREACHABLE"
    covered = fleet.service.health.coverage()
    assert (covered.status, covered.human_escalation) == ("full", "webhook")
    assert fleet.service.health.routing[incident.id].outcome == "webhook"


async def test_without_a_sink_incidents_are_journaled_but_no_event_is_built(
    tmp_path: Path,
) -> None:
    """Without a notification sink the incident is journaled with no event, and coverage reads
    partial for a single lead."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=False)
    await _sole_lead_gone(fleet)
    [incident] = _lead_incidents(fleet)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.events == ()
    covered = fleet.service.health.coverage()
    assert covered.status == "partial"
    assert "single lead" in str(covered.reason)


async def test_resolved_follows_only_a_delivered_event(tmp_path: Path) -> None:
    """Once the open event was delivered and the lead came back, the incident resolves and journals
    a resolved event after the open."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(fleet)
    [incident] = _lead_incidents(fleet)
    [claim] = await journal.claim_due("t", now=fleet.clock.now(), lease=LEASE)
    assert await journal.complete(claim, now=fleet.clock.now(), http_status=200)
    fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
    for _ in range(2):
        fleet.clock.advance(15)
        await _tick(fleet)
    assert _lead_incidents(fleet) == []
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.resolved_at is not None
    assert [e.type for e in stored.events] == [EventType.OPEN, EventType.RESOLVED]


async def test_an_incident_resolved_before_delivery_cancels_its_open_and_says_nothing(
    tmp_path: Path,
) -> None:
    """An incident that resolves before its open event was delivered cancels that event and queues
    nothing else."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(fleet)
    [incident] = _lead_incidents(fleet)
    fleet.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
    for _ in range(2):
        fleet.clock.advance(15)
        await _tick(fleet)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [(EventType.OPEN, EventState.CANCELLED)]
    assert await journal.claim_due("t", now=fleet.clock.now(), lease=LEASE) == ()


async def test_a_failing_journal_degrades_coverage_and_detection_goes_on(tmp_path: Path) -> None:
    """While the journal refuses every call the lead still becomes unreachable and goes to a
    person (ticks go on) and coverage says degraded, also once the journal answers again while
    the incident is still owed; the next step records it with its ``open``, and only then is
    coverage full again (issue 20, 1a)."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    journal.fail_with = JournalUnavailableError("record", "unreachable")
    await _sole_lead_gone(fleet)
    [incident] = _lead_incidents(fleet)  # detection went on
    assert incident.route == "human"
    assert fleet.service.health.ticks == 3
    covered = fleet.service.health.coverage()
    assert covered.status == "degraded"
    assert "incident journal failing" in str(covered.reason)
    journal.fail_with = None
    observed = fleet.service.health.journal
    assert observed is not None
    assert await observed.get(incident.id) is None  # it answers; nothing was recorded yet
    covered = fleet.service.health.coverage()
    assert covered.status == "degraded"  # the incident is still owed
    assert "1 incidents owed" in str(covered.reason)
    fleet.clock.advance(15)
    await _tick(fleet)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [(EventType.OPEN, EventState.PENDING)]
    assert fleet.service.health.coverage().status == "full"


async def test_while_the_journal_fails_a_vanished_member_is_reported_and_resolved(
    tmp_path: Path,
) -> None:
    """While every journal call fails, each tick still runs to its end: a member that vanishes
    opens GONE, its owning lead gets the record, the incident resolves once the bridge released
    the member, and the sole lead's own failure opens too; coverage says degraded meanwhile."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    await fleet.service.own_lead_keys()
    session = fleet.bridge.reads.session(await fleet.spawn_ready())
    assert session is not None
    journal.fail_with = JournalUnavailableError("record", "unreachable")
    health = fleet.service.health
    fleet.control.remove(session.name)
    ticks = health.ticks
    for _ in range(2):
        fleet.clock.advance(15)
        await _tick(fleet)
    assert health.ticks == ticks + 2
    [gone] = _member_incidents(fleet)
    assert (gone.state, gone.subject, gone.recipient_lead) == ("GONE", session.session_id, "lead")
    polled = await fleet.ok("fleet_poll")
    records = [m for m in polled["messages"] if m["kind"] == "health"]
    assert [(m["state"], m["subjectTerminal"]) for m in records] == [("GONE", session.session_id)]
    assert fleet.session(session.session_id).state is SessionState.RELEASED  # failed too
    for _ in range(2):
        fleet.clock.advance(15)
        await _tick(fleet)
    assert _member_incidents(fleet) == []  # reported once, then resolved
    covered = health.coverage()
    assert covered.status == "degraded"
    assert "incident journal failing" in str(covered.reason)

    await _sole_lead_gone(fleet)
    [lead_incident] = _lead_incidents(fleet)
    assert (lead_incident.state, lead_incident.route) == ("LEAD_UNREACHABLE", "human")
    journal.fail_with = None
    await _tick(fleet)  # the owed changes are recorded, and only then is coverage full
    assert health.coverage().status == "full"


async def test_a_restart_resumes_the_journal_incidents_without_opening_them_again(
    tmp_path: Path,
) -> None:
    """A restarted service resumes the journal's open incident and keeps its id and generation, with
    no second open event."""
    journal = InMemoryJournal()
    first = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(first)
    [incident] = _lead_incidents(first)
    second = build_test_fleet(
        tmp_path, document=_document(tmp_path), environ=ENV, journal=journal, control=first.control
    )
    assert await second.service.health.resume() == 1
    for _ in range(3):
        second.clock.advance(15)
        await _tick(second)
    [again] = _lead_incidents(second)
    assert (again.id, again.generation) == (incident.id, incident.generation)
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [e.type for e in stored.events] == [EventType.OPEN]  # no second open


async def _restarted_while_away(
    tmp_path: Path, journal: InMemoryJournal, first: TestFleet
) -> TestFleet:
    """A restart of ``first`` whose resume finds the journal away (it stays away until the
    caller clears ``fail_with``)."""
    second = build_test_fleet(
        tmp_path, document=_document(tmp_path), environ=ENV, journal=journal, control=first.control
    )
    journal.fail_with = JournalUnavailableError("load", "unreachable")
    assert await second.service.health.resume() == 0
    return second


async def test_a_start_the_journal_missed_takes_up_its_incidents_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """fleetd restarts while the journal is away: the journal's open incident (its person told of
    it) is taken up once the journal answers, and resolves when its lead is back — recorded, with
    the ``resolved`` the person is owed — instead of staying open in the journal for good."""
    journal = InMemoryJournal()
    first = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(first)
    [incident] = _lead_incidents(first)
    second = await _restarted_while_away(tmp_path, journal, first)
    second.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
    second.clock.advance(15)
    await _tick(second)
    journal.fail_with = None
    with caplog.at_level(logging.ERROR, logger="fleetd"):
        for _ in range(3):
            second.clock.advance(15)
            await _tick(second)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    stored = await journal.get(incident.id)
    assert stored is not None
    assert stored.resolved_at is not None
    assert _lead_incidents(second) == []


async def test_a_key_opened_again_while_the_journal_was_away_supersedes_the_journals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lead is still gone after a restart the journal missed, so this run opens the same key
    anew: once the journal answers, its old incident is closed as superseded and this run's is
    recorded (no generation conflict), one incident open for the key."""
    journal = InMemoryJournal()
    first = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(first)
    [old] = _lead_incidents(first)
    second = await _restarted_while_away(tmp_path, journal, first)
    await second.service.own_lead_keys()
    for _ in range(3):  # the lead is still gone: this run opens the key anew
        second.clock.advance(15)
        await _tick(second)
    [fresh] = _lead_incidents(second)
    assert fresh.id != old.id
    journal.fail_with = None
    with caplog.at_level(logging.ERROR, logger="fleetd"):
        second.clock.advance(15)
        await _tick(second)
        await _tick(second)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    superseded = await journal.get(old.id)
    assert superseded is not None
    assert (superseded.resolved_at is not None, superseded.resolve_reason) == (True, "superseded")
    [held] = _lead_incidents(second)
    assert held.id == fresh.id
    assert held.generation > old.generation
    recorded = await journal.get(fresh.id)
    assert recorded is not None
    assert recorded.resolved_at is None


async def test_a_key_the_journal_holds_resolved_is_recorded_above_it_after_a_late_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The journal holds a key's generation 1 resolved; a restart it missed opens the key again
    from generation 1 and resolves an incident before the journal answers: once it does, both
    are recorded above the journal's generation (no ``generation_conflict``), the open one with
    the ``open`` a person is owed."""
    journal = InMemoryJournal()
    first = _fleet(tmp_path, journal, webhook=True)
    await _sole_lead_gone(first)
    [old] = _lead_incidents(first)
    first.control.add_agent("lead", kind="claude", status=AgentStatus.IDLE)
    for _ in range(2):
        first.clock.advance(15)
        await _tick(first)
    assert _lead_incidents(first) == []
    second = await _restarted_while_away(tmp_path, journal, first)
    await _sole_lead_gone(second)
    [fresh] = _lead_incidents(second)
    assert fresh.generation == old.generation  # numbered from nothing while the journal was away
    journal.fail_with = None
    with caplog.at_level(logging.ERROR, logger="fleetd"):
        second.clock.advance(15)
        await _tick(second)
        await _tick(second)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    recorded = await journal.get(fresh.id)
    assert recorded is not None
    assert recorded.incident.generation > old.generation
    assert [e.type for e in recorded.events] == [EventType.OPEN]
    [held] = _lead_incidents(second)
    assert (held.id, held.generation) == (fresh.id, recorded.incident.generation)


async def test_incident_ids_differ_between_runs_so_receivers_never_merge_them(
    tmp_path: Path,
) -> None:
    """The same failure in two deployments (each with its own journal) is two incidents with
    two ids, so their webhook ids differ too."""
    first = _fleet(tmp_path / "a", InMemoryJournal(), webhook=True)
    second = _fleet(tmp_path / "b", InMemoryJournal(), webhook=True)
    for fleet in (first, second):
        await _sole_lead_gone(fleet)
    [one], [two] = _lead_incidents(first), _lead_incidents(second)
    assert (one.key, one.generation) == (two.key, two.generation)
    assert one.id != two.id


def _member_incidents(fleet: TestFleet) -> list[Any]:
    return [i for i in fleet.service.health.state.open_incidents() if i.scope == "member"]


class _DownInbox(InMemoryInbox):
    """The leads' inbox, whose publishing can be down (a broker outage, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    async def publish(self, record: InboxRecord) -> bool:
        if self.down:
            raise InboxUnavailableError("broker down")
        return await super().publish(record)


async def test_a_record_the_inbox_keeps_refusing_takes_the_incident_to_a_person_and_back(
    tmp_path: Path,
) -> None:
    """§10.1 "incident publication itself fails": the owning lead is healthy but its record
    cannot be published. Two snapshot intervals after the refused record was made, a person
    holds the incident (one open event); once the inbox takes the held records again, the lead
    takes it back and the person's undelivered event is cancelled."""
    inbox, journal = _DownInbox(), InMemoryJournal()
    document = _document(tmp_path)
    fleet = build_test_fleet(tmp_path, document=document, environ=ENV, journal=journal, inbox=inbox)
    await fleet.service.own_lead_keys()
    session = fleet.bridge.reads.session(await fleet.spawn_ready())
    assert session is not None
    assert session.worktree is not None
    fleet.worktrees.add_commits(session.worktree, 2)  # a preserved branch ahead of its base:
    fleet.worktrees.mark_dirty(session.worktree.path)  # WORK_PRODUCT_AT_RISK, for the owner
    await fleet.ok("fleet_stop", sessionId=session.session_id)
    inbox.down = True
    for _ in range(100):
        fleet.clock.advance(15)
        await _tick(fleet)
        if _member_incidents(fleet):
            break
    [incident] = _member_incidents(fleet)
    assert (incident.recipient_lead, incident.routing_reason) == ("lead", "owner")
    assert fleet.bridge.reads.unpublished  # its record waits in memory
    fleet.clock.advance(15)
    await _tick(fleet)
    [incident] = _member_incidents(fleet)
    assert incident.routing_reason == "owner"  # one interval: the push may still get it through
    fleet.clock.advance(15)
    await _tick(fleet)
    [incident] = _member_incidents(fleet)
    assert (incident.route, incident.routing_reason) == ("human", "human_publication_failed")
    assert incident.assignment is not None
    assert incident.assignment.on_behalf_of == "lead"
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [(EventType.OPEN, EventState.PENDING)]

    inbox.down = False
    await fleet.bridge.outbox.flush()  # what the push loop does on its next pass
    assert not fleet.bridge.reads.unpublished
    fleet.clock.advance(15)
    await _tick(fleet)
    [incident] = _member_incidents(fleet)
    assert (incident.recipient_lead, incident.routing_reason) == ("lead", "owner")
    stored = await journal.get(incident.id)
    assert stored is not None
    assert [(e.type, e.state) for e in stored.events] == [(EventType.OPEN, EventState.CANCELLED)]
    polled = await fleet.ok("fleet_poll")
    states = [m["state"] for m in polled["messages"] if m["kind"] == "health"]
    assert "WORK_PRODUCT_AT_RISK" in states  # the held record reached the lead after all


async def test_the_journal_is_said_to_record_again_only_once_it_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A journal call fails with nothing owed (a delivered event's reconcile): the steps after it
    ask the journal again — while it still refuses, coverage stays degraded and nothing says it
    records again; once it answers, one INFO says so and coverage is full."""
    journal = InMemoryJournal()
    fleet = _fleet(tmp_path, journal, webhook=True)
    escalation = fleet.service.health.escalation
    assert escalation is not None
    now = fleet.clock.now()
    await escalation.step(now)  # the first sweep: nothing open
    journal.fail_with = JournalUnavailableError("get", "unreachable")
    escalation.settled("inc_" + "0" * 24)
    await escalation.step(now)
    assert escalation.problem is not None
    caplog.set_level(logging.INFO, logger="fleetd")
    for _ in range(3):
        fleet.clock.advance(0.5)
        await escalation.step(fleet.clock.now())
    assert escalation.problem is not None
    assert "records again" not in caplog.text
    journal.fail_with = None
    fleet.clock.advance(0.5)
    await escalation.step(fleet.clock.now())
    assert escalation.problem is None
    assert caplog.text.count("records again") == 1
