"""Inbox decode failures: one routed, redacted INBOX_DECODE_FAILED incident per key and reason."""

from __future__ import annotations

from datetime import datetime, timedelta

from fleetd.health import (
    InboxFailureView,
    InboxState,
    LeadState,
    MemberState,
    OpenIncident,
    PublishHealthRecord,
    ResolveIncident,
    RouteToHuman,
    RoutingReason,
    Scope,
)
from fleetd.health.inboxes import DECODE_FAILURE_HOLD, MESSAGE_IDS_SHOWN
from tests.unit.health.health_fleet import T0, Run, failed_list, inbox, live


def failure(
    reason: str = "unsupported_version",
    *,
    key: str = "lead-a",
    message_id: str = "m-1",
    unsettled: bool = True,
    seen: datetime = T0,
) -> InboxFailureView:
    return InboxFailureView(
        key=key,
        reason=reason,
        message_id=message_id,
        unsettled=unsettled,
        occurrences=1,
        last_seen_at=seen,
    )


def test_a_held_entry_opens_one_incident_and_tells_the_owning_lead_once() -> None:
    """An unsupported-version entry on lead-a's queue: one incident, one health record to lead-a."""
    run = Run()
    bad = (failure(message_id="m-1"), failure(message_id="m-2"))
    run.tick(live(), inbox_failures=bad)
    [opened] = run.effects(OpenIncident)
    incident = opened.incident
    assert (incident.scope, incident.subject, incident.state, incident.key.cause) == (
        Scope.INBOX,
        "lead-a",
        InboxState.INBOX_DECODE_FAILED,
        "unsupported_version",
    )
    assert dict(incident.evidence) == {
        "reason": "unsupported_version",
        "entries": "2",
        "unsettled": "2",
        "messageIds": "m-1,m-2",
    }
    assert [
        (e.recipient_lead, e.incident.id, e.reason) for e in run.effects(PublishHealthRecord)
    ] == [("lead-a", incident.id, RoutingReason.OWNER)]
    assert run.effects(RouteToHuman) == []
    for _ in range(3):
        run.tick(live(), inbox_failures=bad, advance=DECODE_FAILURE_HOLD)
        assert run.effects(OpenIncident) == []
        assert run.effects(PublishHealthRecord) == []
        assert run.effects(ResolveIncident) == []  # still on the queue: still open


def test_a_quarantined_entry_resolves_after_the_hold_and_a_new_one_tells_the_lead_again() -> None:
    """A settled failure keeps its incident for the hold window; a later one opens anew."""
    run = Run()
    first = failure("malformed_json", unsettled=False, seen=T0)
    run.tick(live(), inbox_failures=(first,))
    [opened] = run.effects(OpenIncident)
    run.tick(live(), inbox_failures=(first,), advance=DECODE_FAILURE_HOLD - timedelta(seconds=31))
    assert run.effects(ResolveIncident) == []
    run.tick(live(), inbox_failures=(first,))
    [resolved] = run.effects(ResolveIncident)
    assert resolved.incident.id == opened.incident.id
    second = failure("malformed_json", message_id="m-9", unsettled=False, seen=run.now)
    run.tick(live(), inbox_failures=(first, second), advance=timedelta(seconds=1))
    [again] = run.effects(OpenIncident)
    assert again.incident.generation == 2
    assert dict(again.incident.evidence)["messageIds"] == "m-9"
    assert len(run.effects(PublishHealthRecord)) == 1


def test_reasons_and_keys_are_separate_incidents_with_bounded_evidence() -> None:
    """Each (key, reason) is its own incident; evidence lists at most a few message ids."""
    run = Run()
    many = tuple(failure("missing_field", message_id=f"m-{n:02}") for n in range(9))
    run.tick(live(), inbox_failures=(*many, failure(), failure(key="lead-a", message_id="x")))
    causes = sorted(e.incident.key.cause for e in run.effects(OpenIncident))
    assert causes == ["missing_field", "unsupported_version"]
    [missing] = [e for e in run.effects(OpenIncident) if e.incident.key.cause == "missing_field"]
    ids = dict(missing.incident.evidence)["messageIds"].split(",")
    assert ids == [f"m-{n:02}" for n in range(MESSAGE_IDS_SHOWN)]


def test_a_key_no_lead_owns_goes_to_a_healthy_peer() -> None:
    """A failure on a key that is no expected lead's goes to a healthy lead, owned by none."""
    run = Run()
    run.tick(live(), inbox_failures=(failure(key="retired-lead"),))
    [routed] = run.effects(PublishHealthRecord)
    assert (routed.recipient_lead, routed.reason, routed.incident.owner_lead) == (
        "lead-a",
        RoutingReason.PEER_NO_OWNER,
        None,
    )
    assert run.effects(RouteToHuman) == []


def test_an_unreachable_sole_owner_leaves_the_incident_to_a_person() -> None:
    """When the only lead, which owns the key, is in a fault state, a person gets the incident."""
    run = Run()
    for _ in range(2):
        run.tick(live(with_lead=False))
    assert run.lead() is LeadState.LEAD_UNREACHABLE
    run.tick(live(with_lead=False), inbox_failures=(failure(),))
    [routed] = [e for e in run.effects(RouteToHuman) if e.incident.scope is Scope.INBOX]
    assert (routed.reason, routed.on_behalf_of, routed.incident.owner_lead) == (
        RoutingReason.HUMAN_NO_HEALTHY_LEAD,
        "lead-a",
        "lead-a",
    )
    assert run.effects(PublishHealthRecord) == []


def test_decode_failures_are_judged_on_a_blind_tick_and_leave_stranded_inboxes_alone() -> None:
    """A failed herdr list does not hide a decode failure, and the orphan-inbox rule does not
    close it (nor does it close the orphan's REPLY_STRANDED)."""
    run = Run()
    run.tick(live(), inboxes=(inbox("gone-member", capped=True),), inbox_failures=(failure(),))
    opened = sorted(str(e.incident.state) for e in run.effects(OpenIncident))
    assert opened == [InboxState.INBOX_DECODE_FAILED, MemberState.REPLY_STRANDED]
    run.tick(failed_list(ping=True), inbox_failures=(failure(),))
    assert run.effects(ResolveIncident) == []
    run.tick(live(), inboxes=(inbox("gone-member", capped=True),))
    [resolved] = run.effects(ResolveIncident)
    assert resolved.incident.state is InboxState.INBOX_DECODE_FAILED
