"""The webhook payload boundary (M4 §10.5): nothing forbidden reaches an outbound body."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from fleetd.health.incidents import IncidentBook, IncidentKey, ResolveReason, RoutingReason
from fleetd.health.states import Certainty, LeadState, MemberState, Scope, Severity
from fleetd.model.events import EventType, idempotency_key
from fleetd.notify.payload import (
    NAME_PATTERN,
    REDACTED,
    CoverageStatus,
    IncidentEvent,
    build_event,
    encode_event,
    event_from_incident,
)

SCHEMA = json.loads(
    (
        Path(__file__).resolve().parents[3] / "contracts/webhook/incident-event.v1.schema.json"
    ).read_text()
)
VALIDATOR = jsonschema.Draft202012Validator(
    SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)
T0 = datetime(2026, 8, 15, 9, 30, tzinfo=UTC)
INCIDENT = "inc_0123456789abcdef01234567"

FORBIDDEN: dict[str, str] = {
    "pane text": "⏺ Running the test suite…\n  ✓ 412 passed in 81s\n> ",
    "pane excerpt": '│ > Try "fix lint errors"                                   │',
    "pane digest": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "task brief": "Refactor the delivery module and keep the tests green",
    "prompt": "You are a member of the fleet. Implement issue 11 in your worktree.",
    "reply": "Done. Changed 3 files; all 812 tests pass.",
    "diff": "--- a/fleetd/x.py\n+++ b/fleetd/x.py\n@@ -1 +1 @@\n-old\n+new",
    "worktree path": "/srv/fleet/worktrees/s-1a2b3c4d",
    "relative path": "fleetd/notify/http.py",
    "windows path": "C:\\Users\\dev\\wt",
    "env value (dsn)": "postgresql://fleet:s3cr3t@db.internal:5432/fleet",
    "env value (assignment)": "FLEETD_WEBHOOK_SECRET=whsec_c2VjcmV0",
    "env value (access key)": "AKIAIOSFODNN7EXAMPLE",
    "token (github)": "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "token (member)": "r0f1e2d3c.Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5",
    "token (jwt)": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "webhook secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "credential": "fleet:hunter2",
    "header": "Authorization: Bearer 6f1c2a9d",
    "webhook url": "https://hooks.example.com/services/T000/B000/XXXX",
    "exception text": "ConnectionResetError: [Errno 104] Connection reset by peer",
    "stack trace": 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>',
    "model output": "I'll fix the failing test by updating the assertion.",
}
"""One realistic sample of every content kind §10.5 forbids."""


def event(**changes: Any) -> IncidentEvent:
    fields: dict[str, Any] = {
        "incident_id": INCIDENT,
        "event_type": EventType.OPEN,
        "revision": 1,
        "occurred_at": T0 + timedelta(seconds=90),
        "instance": "fleetd-a",
        "scope": Scope.MEMBER,
        "subject": "s-1a2b3c4d",
        "state": "GONE",
        "severity": Severity.CRITICAL,
        "certainty": Certainty.CERTAIN,
        "cause": "agent_not_found",
        "opened_at": T0,
        "coverage": CoverageStatus.PARTIAL,
        "profile": "claude-sonnet-4-5",
        "owner_lead": "lead-a",
        "recipient_lead": None,
        "routing_reason": RoutingReason.PEER_OWNER_UNHEALTHY,
        "evidence": (("consecutive_list_failures", "2"),),
        "tool_calls": ('fleet_status(sessionId="s-1a2b3c4d")', "fleet_list()"),
    }
    return build_event(**(fields | changes))


def body_of(built: IncidentEvent) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(encode_event(built))
    return document


def test_a_built_event_matches_the_contract_file() -> None:
    """The builder's body validates against contracts/webhook and carries the allowed facts."""
    document = body_of(event())
    VALIDATOR.validate(document)
    assert document["eventId"] == idempotency_key(INCIDENT, "open", 1)
    assert document["incident"]["durationSeconds"] == 90
    assert document["incident"]["evidence"] == [{"type": "consecutive_list_failures", "count": 2}]
    assert document["occurredAt"] == "2026-08-15T09:31:30Z"
    assert document["routing"] == {
        "reason": "peer_owner_unhealthy",
        "owner": "lead-a",
        "recipient": None,
    }


ENTRY_POINTS: dict[str, Callable[[str], dict[str, Any]]] = {
    "subject": lambda text: {"subject": text},
    "cause": lambda text: {"cause": text},
    "profile": lambda text: {"profile": text},
    "owner": lambda text: {"owner_lead": text},
    "recipient": lambda text: {"recipient_lead": text},
    "instance": lambda text: {"instance": text},
    "evidence type": lambda text: {"evidence": ((text, "3"),)},
    "evidence value": lambda text: {"evidence": (("entries", text),)},
    "tool call": lambda text: {"tool_calls": (text,)},
    "tool call argument": lambda text: {"tool_calls": (f'fleet_status(sessionId="{text}")',)},
}


def _fragments(text: str) -> set[str]:
    """The sample's distinctive pieces: every 12-character window of it."""
    return {text[i : i + 12] for i in range(max(1, len(text) - 11))}


@pytest.mark.parametrize("kind", sorted(FORBIDDEN))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_forbidden_content_never_reaches_a_body(kind: str, entry: str) -> None:
    """Every forbidden kind, fed through every free-text input, is absent from the sent bytes."""
    sample = FORBIDDEN[kind]
    built = event(**ENTRY_POINTS[entry](sample))
    body = encode_event(built).decode()
    VALIDATOR.validate(json.loads(body))
    leaked = {piece for piece in _fragments(sample) if piece in body}
    assert not leaked, (kind, entry, leaked)
    assert json.dumps(sample)[1:-1] not in body


def test_a_refused_name_or_cause_is_sent_as_redacted() -> None:
    """Identity fields keep their place with the literal marker instead of the value."""
    document = body_of(event(subject=FORBIDDEN["worktree path"], cause=FORBIDDEN["prompt"]))
    assert document["incident"]["subject"] == REDACTED
    assert document["incident"]["cause"] == REDACTED


def test_evidence_keeps_only_codes_with_counts() -> None:
    """Ids, words and text are dropped from evidence; codes with counts stay, sixteen at most."""
    pairs = [("entries", "2"), ("ping", "failed"), ("messageIds", "m-1,m-2"), ("unsettled", "-1")]
    pairs += [(f"kind_{i}", str(i)) for i in range(20)]
    evidence = body_of(event(evidence=pairs))["incident"]["evidence"]
    assert evidence[0] == {"type": "entries", "count": 2}
    assert {item["type"] for item in evidence}.isdisjoint({"ping", "messageIds", "unsettled"})
    assert len(evidence) == 16


def test_tool_calls_keep_only_literal_read_only_calls() -> None:
    """fleet_list/status/poll with at most one plain id argument; stop and the rest are dropped."""
    calls = (
        "fleet_list()",
        'fleet_poll(ticket="t3-a1b2c3-r0f1e2d3c")',
        'fleet_stop(sessionId="s-1")',
        'fleet_send(target="s-1", prompt="hi")',
        "fleet_list(); rm -rf /",
    )
    assert body_of(event(tool_calls=calls))["suggestedToolCalls"] == [
        "fleet_list()",
        'fleet_poll(ticket="t3-a1b2c3-r0f1e2d3c")',
    ]


@given(text=st.text(max_size=80))
def test_any_text_is_either_a_valid_name_or_redacted(text: str) -> None:
    """Property: a subject reaches the body verbatim only if it matches the name grammar."""
    subject = body_of(event(subject=text))["incident"]["subject"]
    if re.fullmatch(NAME_PATTERN, text):
        assert subject == text
    else:
        assert subject == REDACTED


@pytest.mark.parametrize("where", ["top", "incident", "routing", "evidence"])
def test_the_model_and_the_schema_refuse_extra_keys(where: str) -> None:
    """An added key such as paneText is refused at every level, by the model and by the schema."""
    document = body_of(event())
    target = {
        "top": document,
        "incident": document["incident"],
        "routing": document["routing"],
        "evidence": document["incident"]["evidence"][0],
    }[where]
    target["paneText"] = FORBIDDEN["pane text"]
    assert not VALIDATOR.is_valid(document)
    with pytest.raises(ValidationError) as caught:
        IncidentEvent.model_validate(document)
    assert FORBIDDEN["pane text"] not in str(caught.value)


@pytest.mark.parametrize("kind", sorted(FORBIDDEN))
@pytest.mark.parametrize(
    "path",
    [
        ("fleetdInstance",),
        ("incident", "subject"),
        ("incident", "cause"),
        ("incident", "profile"),
        ("routing", "owner"),
        ("suggestedToolCalls", 0),
        ("incident", "evidence", 0, "type"),
    ],
)
def test_the_model_and_the_schema_refuse_forbidden_strings(
    kind: str, path: tuple[str | int, ...]
) -> None:
    """Placed directly into a body, a forbidden sample fails validation without being echoed."""
    document = body_of(event())
    *parents, last = path
    target: Any = document
    for step in parents:
        target = target[step]
    target[last] = FORBIDDEN[kind]
    assert not VALIDATOR.is_valid(document)
    with pytest.raises(ValidationError) as caught:
        IncidentEvent.model_validate(document)
    assert FORBIDDEN[kind] not in str(caught.value)


def test_the_event_id_must_be_the_idempotency_key() -> None:
    """A body whose eventId is not hash(incident, type, revision) is refused."""
    document = body_of(event())
    document["eventRevision"] = 2
    with pytest.raises(ValidationError, match="idempotency key"):
        IncidentEvent.model_validate(document)


@pytest.mark.parametrize(
    "changes",
    [
        {"incident_id": "inc_1"},
        {"incident_id": FORBIDDEN["worktree path"]},
        {"revision": 0},
        {"event_type": "opened"},
        {"state": "ON_FIRE"},
        {"occurred_at": datetime(2026, 8, 15, 9, 30)},  # naive on purpose
        {"opened_at": datetime(2026, 8, 15, 9, 30)},  # naive on purpose
    ],
)
def test_an_impossible_event_has_no_payload(changes: dict[str, Any]) -> None:
    """A bad id, revision, type, state or a naive time raises instead of building a body."""
    with pytest.raises(ValueError, match=r"\w"):
        event(**changes)


def test_a_resolved_event_measures_to_its_resolution() -> None:
    """Duration runs from open to resolution; times are sent in UTC."""
    resolved = T0 + timedelta(hours=2)
    document = body_of(
        event(
            event_type=EventType.RESOLVED,
            revision=3,
            occurred_at=resolved.astimezone(UTC) + timedelta(seconds=30),
            resolved_at=resolved,
            resolve_reason=ResolveReason.CLEARED,
        )
    )
    VALIDATOR.validate(document)
    assert document["incident"]["durationSeconds"] == 7200
    assert document["incident"]["resolvedAt"] == "2026-08-15T11:30:00Z"
    assert document["incident"]["resolveReason"] == "cleared"
    assert document["eventId"] == idempotency_key(INCIDENT, "resolved", 3)


def test_an_event_from_a_health_incident() -> None:
    """A health Incident becomes a body with its id, key, owner, evidence and safe tool calls."""
    book = IncidentBook({}, {})
    incident = book.open_new(
        IncidentKey(
            scope=Scope.MEMBER,
            subject="s-1a2b3c4d",
            state=MemberState.STALL_SUSPECTED,
            cause="unchanged_progress_digest",
        ),
        now=T0,
        target="fleet-m1",
        owner_lead="lead-a",
        evidence=(("unchanged_digests", "2"), ("digest", "9f86d081884c7d659a2feaa0c55ad015")),
    )
    built = event_from_incident(
        incident,
        event_type=EventType.OPEN,
        revision=1,
        occurred_at=T0,
        instance="fleetd-a",
        coverage=CoverageStatus.FULL,
        routing_reason=RoutingReason.PEER_OWNER_UNHEALTHY,
        profile="claude",
    )
    document = body_of(built)
    VALIDATOR.validate(document)
    assert document["incident"] | {"evidence": None} == {
        "id": incident.id,
        "scope": "member",
        "subject": "s-1a2b3c4d",
        "state": "STALL_SUSPECTED",
        "severity": "warning",
        "certainty": "suspected",
        "cause": "unchanged_progress_digest",
        "profile": "claude",
        "openedAt": "2026-08-15T09:30:00Z",
        "resolvedAt": None,
        "resolveReason": None,
        "durationSeconds": 0,
        "recoveryAttempted": False,
        "committedWorkAtRisk": False,
        "evidence": None,
    }
    assert document["incident"]["evidence"] == [{"type": "unchanged_digests", "count": 2}]
    assert document["suggestedToolCalls"] == [
        'fleet_status(sessionId="s-1a2b3c4d")',
        "fleet_list()",
    ]
    assert "9f86d081" not in encode_event(built).decode()


def test_a_lead_incident_names_the_lead_as_subject() -> None:
    """A lead's state and name are allowed facts."""
    document = body_of(event(scope=Scope.LEAD, subject="lead-a", state=LeadState.LEAD_UNREACHABLE))
    assert document["incident"]["state"] == "LEAD_UNREACHABLE"
    assert document["incident"]["subject"] == "lead-a"
