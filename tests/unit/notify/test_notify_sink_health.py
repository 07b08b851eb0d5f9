"""The sink's status table, the stored body a journal row becomes, and the reminder rule."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict

import pytest

from fleetd.journal.values import EventType
from fleetd.model.events import idempotency_key
from fleetd.notify.request import stored_body
from fleetd.notify.sink_status import (
    FAILING_AFTER,
    SinkFacts,
    SinkHealth,
    SinkReason,
    SinkStatus,
    judge,
)
from fleetd.resilience.breaker import BreakerState
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import REPEAT, human_incident, payload


class _Enabled(TypedDict):
    enabled: bool


ON: _Enabled = {"enabled": True}
FIRST = frozenset({0})


@pytest.mark.parametrize(
    ("facts", "status", "reason"),
    [
        (SinkFacts(enabled=False), SinkStatus.DISABLED, None),
        (SinkFacts(enabled=False, journal_ok=False), SinkStatus.DISABLED, None),
        (SinkFacts(**ON), SinkStatus.OK, None),
        (
            SinkFacts(**ON, resolved=False, journal_ok=False),
            SinkStatus.DEGRADED,
            SinkReason.SINK_UNRESOLVED,
        ),
        (
            SinkFacts(**ON, journal_ok=False, receivers=(BreakerState.OPEN,)),
            SinkStatus.DEGRADED,
            SinkReason.JOURNAL_FAILING,
        ),
        (
            SinkFacts(**ON, receivers=(BreakerState.HALF_OPEN,), consecutive_failures=9),
            SinkStatus.DEGRADED,
            SinkReason.ALL_RECEIVERS_DOWN,
        ),
        (
            SinkFacts(**ON, receivers=(BreakerState.OPEN, BreakerState.HALF_OPEN)),
            SinkStatus.DEGRADED,
            SinkReason.ALL_RECEIVERS_DOWN,
        ),
        (SinkFacts(**ON, receivers=(BreakerState.OPEN, BreakerState.CLOSED)), SinkStatus.OK, None),
        (
            SinkFacts(**ON, receivers=(BreakerState.CLOSED,) * 2, disabled=frozenset({0, 1})),
            SinkStatus.DEGRADED,
            SinkReason.RECEIVERS_DISABLED,
        ),
        (
            SinkFacts(
                **ON, receivers=(BreakerState.CLOSED, BreakerState.OPEN), disabled=frozenset({0})
            ),
            SinkStatus.DEGRADED,
            SinkReason.ALL_RECEIVERS_DOWN,
        ),
        (
            SinkFacts(
                **ON, receivers=(BreakerState.OPEN, BreakerState.CLOSED), disabled=frozenset({0})
            ),
            SinkStatus.OK,
            None,
        ),
        (SinkFacts(**ON, receivers=(BreakerState.CLOSED,)), SinkStatus.OK, None),
        (
            SinkFacts(**ON, consecutive_failures=FAILING_AFTER, permanent_since_delivery=True),
            SinkStatus.DEGRADED,
            SinkReason.ATTEMPTS_FAILING,
        ),
        (SinkFacts(**ON, consecutive_failures=FAILING_AFTER - 1), SinkStatus.OK, None),
        (
            SinkFacts(**ON, permanent_since_delivery=True),
            SinkStatus.DEGRADED,
            SinkReason.PERMANENT_FAILURE,
        ),
    ],
)
def test_the_first_matching_row_decides(
    facts: SinkFacts, status: SinkStatus, reason: SinkReason | None
) -> None:
    """The sink's status and reason come from the first row of the table that the facts match."""
    health = judge(
        SinkHealth(), facts, now=T0, last_outcome=None, last_attempt_at=None, last_delivered_at=None
    )
    assert (health.status, health.reason) == (status, reason)
    assert health.mode == ("disabled" if status is SinkStatus.DISABLED else "webhook")


def test_since_is_kept_while_status_and_reason_stay() -> None:
    """since keeps its time while status and reason stay, and moves when either changes."""
    failing = SinkFacts(**ON, consecutive_failures=FAILING_AFTER)
    args = {"last_outcome": None, "last_attempt_at": None, "last_delivered_at": None}
    first = judge(SinkHealth(), failing, now=T0, **args)
    later = judge(first, failing, now=T0 + timedelta(minutes=5), **args)
    assert later.since == T0
    moved = judge(later, SinkFacts(**ON, receivers=(BreakerState.OPEN,)), now=T0 + REPEAT, **args)
    assert moved.since == T0 + REPEAT


def test_a_stored_body_takes_the_journal_row_s_identity() -> None:
    """eventId, eventType and eventRevision come from the row; another incident's payload, a key
    that is not the row's, or a payload outside the model is refused."""
    incident = human_incident()
    stored = payload(incident, EventType.OPEN, revision=1, at=T0)
    key = idempotency_key(incident.id, EventType.REMINDER, 4)
    body = stored_body(
        stored, incident_id=incident.id, event_type=EventType.REMINDER, revision=4, event_id=key
    )
    assert b'"eventRevision":4' in body
    assert key.encode() in body
    assert body == stored_body(
        stored, incident_id=incident.id, event_type=EventType.REMINDER, revision=4, event_id=key
    )
    other = human_incident("sess_2")
    with pytest.raises(ValueError, match="idempotency key"):
        stored_body(
            stored,
            incident_id=other.id,
            event_type=EventType.OPEN,
            revision=1,
            event_id=idempotency_key(other.id, EventType.OPEN, 1),
        )
    with pytest.raises(ValueError, match="idempotency key"):
        stored_body(
            stored, incident_id=incident.id, event_type=EventType.OPEN, revision=1, event_id=key
        )
    with pytest.raises(ValueError, match="another incident"):
        stored_body(
            stored,
            incident_id=other.id,
            event_type=EventType.OPEN,
            revision=1,
            event_id=idempotency_key(incident.id, EventType.OPEN, 1),
        )
    with pytest.raises(ValueError, match="Extra inputs"):
        stored_body(
            {**stored, "pane": "x"},
            incident_id=incident.id,
            event_type=EventType.OPEN,
            revision=1,
            event_id=idempotency_key(incident.id, EventType.OPEN, 1),
        )
