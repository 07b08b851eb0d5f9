"""Incident → lead inbox record, as a pure function.

A health record is what the owning lead reads about one incident (§7.3): codes, names and
evidence ids, never pane text. The ``msg_id`` carries the run id (``health-<incident>-<run>``) so
a restarted service publishes afresh instead of colliding with a record the last run left queued.
A lost-boundary repair answer republishes its TURN_BOUNDARY_LOST incident under
``health-<incident>-repair<attempt>-<run>``, saying what repair answered and that no reply was
reconstructed and no task replayed (M4 §8.4).
Values and ``now`` in, a record out: no clock, no bridge.
"""

from __future__ import annotations

from datetime import datetime

from fleetd.health.incidents import Incident, suggested_tool_calls
from fleetd.inbox.records import InboxRecord, MessageKind, Severity

__all__ = ["health_record", "health_summary"]


def health_record(incident: Incident, *, lead: str, now: datetime, run: str) -> InboxRecord:
    """The inbox record telling ``lead`` about ``incident`` at ``now`` in service run ``run``."""
    now_ms = int(now.timestamp() * 1000)
    opened_ms = int(incident.opened_at.timestamp() * 1000)
    attempt = dict(incident.evidence).get("repair_attempts")
    revision = f"-repair{attempt}" if attempt is not None else ""
    return InboxRecord(
        msg_id=f"health-{incident.id}{revision}-{run}",  # unique per run (and repair answer)
        kind=MessageKind.HEALTH,
        target=incident.target or incident.subject,
        recipient_lead=lead,
        content=health_summary(incident),
        created_at_epoch_millis=now_ms,
        subject_terminal=incident.subject,
        severity=Severity(incident.severity.value),
        state=str(incident.state),
        evidence=dict(incident.evidence),
        first_seen_epoch_millis=opened_ms,
        last_seen_epoch_millis=max(opened_ms, now_ms),
        recovery_tried=attempt is not None,
        suggested_tool_calls=suggested_tool_calls(incident),
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
        return f"{head} No task was replayed."
    later = (
        "one delayed retry is scheduled"
        if evidence.get("repair_retry") == "scheduled"
        else "repair will not try this turn again"
    )
    return (
        f"{head} Lost-boundary repair refused: {result} ({evidence.get('repair_detail')}, "
        f"attempt {evidence.get('repair_attempts')}); {later}. No reply was reconstructed and "
        "no task was replayed: the ticket stays pending."
    )
