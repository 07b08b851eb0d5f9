"""Incident → lead inbox record, as a pure function.

A health record is what the recipient lead reads about one incident (§7.3, §7.4): codes, names
and evidence ids, never pane text. The recipient is the owning lead or a peer standing in for a
failed one; the record goes under the recipient's key, and its evidence says why it holds it
(``routingReason``), which routing generation this is (``routingGeneration``) and for which lead
(``onBehalfOf``, peers only). The ``msg_id`` carries the routing generation and the run id
(``health-<incident>-r<generation>-<run>``): a reassigned incident is a new record, and a
restarted service publishes afresh instead of colliding with a record the last run left queued.
A lost-boundary repair answer republishes its TURN_BOUNDARY_LOST incident under
``health-<incident>-r<generation>-repair<attempt>-<run>``, saying what repair answered and that
no reply was reconstructed and no task replayed (M4 §8.4).
Values and ``now`` in, a record out: no clock, no bridge.
"""

from __future__ import annotations

from datetime import datetime

from fleetd.health.incidents import Assignment, Incident, suggested_tool_calls
from fleetd.inbox.records import EvidenceValue, InboxRecord, MessageKind, Severity

__all__ = ["health_record", "health_summary", "superseded_record"]


def health_record(incident: Incident, *, lead: str, now: datetime, run: str) -> InboxRecord:
    """The inbox record telling ``lead`` about ``incident`` at ``now`` in service run ``run``."""
    now_ms = int(now.timestamp() * 1000)
    opened_ms = int(incident.opened_at.timestamp() * 1000)
    evidence: dict[str, EvidenceValue] = dict(incident.evidence)
    assignment = incident.assignment
    if assignment is not None:
        evidence["routingReason"] = assignment.reason.value
        evidence["routingGeneration"] = assignment.generation
        if assignment.on_behalf_of is not None:
            evidence["onBehalfOf"] = assignment.on_behalf_of
    attempt = dict(incident.evidence).get("repair_attempts")
    revision = f"-repair{attempt}" if attempt is not None else ""
    return InboxRecord(
        msg_id=f"health-{incident.id}-r{incident.routing_generation}{revision}-{run}",
        kind=MessageKind.HEALTH,
        target=incident.target or incident.subject,
        recipient_lead=lead,
        content=health_summary(incident),
        created_at_epoch_millis=now_ms,
        subject_terminal=incident.subject,
        severity=Severity(incident.severity.value),
        state=str(incident.state),
        evidence=evidence,
        first_seen_epoch_millis=opened_ms,
        last_seen_epoch_millis=max(opened_ms, now_ms),
        recovery_tried=attempt is not None,
        suggested_tool_calls=suggested_tool_calls(incident),
    )


def superseded_record(
    incident: Incident, previous: Assignment, *, now: datetime, run: str
) -> InboxRecord:
    """The record telling ``previous.recipient`` that its assignment of ``incident`` is over.

    A lead that was handed an incident and then lost it to a reassignment (it became unhealthy,
    or the owner recovered) is told so, with the generation it held and where the incident went,
    so it never acts on a stale assignment unknowingly. ``previous`` must be a lead route.
    """
    assert previous.recipient is not None
    now_ms = int(now.timestamp() * 1000)
    opened_ms = int(incident.opened_at.timestamp() * 1000)
    current = incident.assignment
    went_to = (
        f"lead {current.recipient}"
        if current is not None and current.recipient is not None
        else "a person"
    )
    evidence: dict[str, EvidenceValue] = {
        "supersededGeneration": previous.generation,
        "routingGeneration": incident.routing_generation,
    }
    if current is not None:
        evidence["routingReason"] = current.reason.value
        if current.recipient is not None:
            evidence["newRecipient"] = current.recipient
    return InboxRecord(
        msg_id=f"health-{incident.id}-r{previous.generation}-superseded-{run}",
        kind=MessageKind.HEALTH,
        target=incident.target or incident.subject,
        recipient_lead=previous.recipient,
        content=(
            f"fleetd health: incident {incident.id} ({incident.scope.value} {incident.subject}, "
            f"{incident.state}) is no longer yours: routing generation {previous.generation} "
            f"is superseded by {incident.routing_generation}, now with {went_to}. "
            "Do not act on the earlier record. No task was replayed."
        ),
        created_at_epoch_millis=now_ms,
        subject_terminal=incident.subject,
        severity=Severity(incident.severity.value),
        state="SUPERSEDED",
        evidence=evidence,
        first_seen_epoch_millis=opened_ms,
        last_seen_epoch_millis=max(opened_ms, now_ms),
        recovery_tried=False,
        suggested_tool_calls=(),
    )


def health_summary(incident: Incident) -> str:
    """The lead-visible line of a health record: codes and names only."""
    head = (
        f"fleetd health: {incident.scope.value} {incident.subject} is {incident.state} "
        f"({incident.certainty.value}, cause {incident.key.cause})."
    )
    evidence = dict(incident.evidence)
    result = evidence.get("repair_result")
    if result is None:
        line = f"{head} No task was replayed."
    else:
        later = (
            "one delayed retry is scheduled"
            if evidence.get("repair_retry") == "scheduled"
            else "repair will not try this turn again"
        )
        line = (
            f"{head} Lost-boundary repair refused: {result} ({evidence.get('repair_detail')}, "
            f"attempt {evidence.get('repair_attempts')}); {later}. No reply was reconstructed and "
            "no task was replayed: the ticket stays pending."
        )
    assignment = incident.assignment
    if assignment is not None and assignment.on_behalf_of is not None:
        line += f" You receive it on behalf of lead {assignment.on_behalf_of}, which cannot act."
    return line
