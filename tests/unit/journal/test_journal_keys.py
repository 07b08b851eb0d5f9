"""The journal stores the same idempotency key a sender puts on the wire and the payload names."""

from __future__ import annotations

import dataclasses

import pytest

from fleetd.errors import JournalRefusedError
from fleetd.health.states import Certainty, Scope, Severity
from fleetd.journal import values as records
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from fleetd.model import events as keys
from fleetd.notify.payload import CoverageStatus, build_event
from tests.contract.journal_cases import T0, make_incident


def test_the_journal_reuses_the_notify_key_and_event_types() -> None:
    """One recipe: the journal's names are the shared event module's own objects."""
    assert records.idempotency_key is keys.idempotency_key
    assert records.EventType is keys.EventType


async def test_a_recorded_key_is_the_payload_event_id_of_the_same_revision() -> None:
    """The key the journal assigns equals ``eventId`` of a payload built for that revision."""
    journal = InMemoryJournal()
    incident = make_incident()
    first, second = await journal.record(
        IncidentChange(incident=incident),
        [NewEvent(type=EventType.OPEN, payload={}), NewEvent(type=EventType.REMINDER, payload={})],
        now=T0,
    )
    for recorded in (first, second):
        payload = build_event(
            incident_id=incident.id,
            event_type=recorded.type,
            revision=recorded.revision,
            occurred_at=T0,
            instance="fleetd-a",
            scope=Scope.MEMBER,
            subject="sess_1",
            state="GONE",
            severity=Severity.CRITICAL,
            certainty=Certainty.CERTAIN,
            cause="agent_not_found",
            opened_at=T0,
            coverage=CoverageStatus.FULL,
        )
        assert recorded.idempotency_key == payload.event_id
    assert first.idempotency_key != second.idempotency_key


async def test_an_incident_id_the_key_cannot_name_is_refused() -> None:
    """An id with a space or a slash never reaches the key recipe: the record is refused whole."""
    journal = InMemoryJournal()
    for bad in ("inc 1", "inc/1", "x" * 129):
        incident = dataclasses.replace(make_incident(), id=bad)
        with pytest.raises(JournalRefusedError, match="field_out_of_bounds"):
            await journal.record(IncidentChange(incident=incident), now=T0)
    assert (await journal.load_open()).open_incidents == ()
