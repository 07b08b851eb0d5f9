"""Incident → lead inbox record, as a pure function.

A health record is what the owning lead reads about one incident (§7.3): codes, names and
evidence ids, never pane text. The ``msg_id`` carries the run id (``health-<incident>-<run>``) so
a restarted service publishes afresh instead of colliding with a record the last run left queued.
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
    return InboxRecord(
        msg_id=f"health-{incident.id}-{run}",  # unique per run
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
        recovery_tried=False,
        suggested_tool_calls=suggested_tool_calls(incident),
    )


def health_summary(incident: Incident) -> str:
    """The lead-visible line of a health record: codes and names only."""
    return (
        f"fleetd health: {incident.scope.value} {incident.subject} is {incident.state} "
        f"({incident.certainty.value}, cause {incident.key.cause}). No task was replayed."
    )
