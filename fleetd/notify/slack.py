"""The ``slack`` sink kind: an incident event as one Slack incoming-webhook message.

Each ``open``, ``reminder`` and ``resolved`` is one POST to the incoming webhook's URL (read
from ``webhookUrlEnvs``; the URL is the credential, so it is never logged). The body, field by
field (Slack "Sending messages using incoming webhooks"):

* ``text`` — the one-line notification text (the fallback shown where blocks cannot be);
* ``blocks`` — a ``header`` block (``plain_text``: what happened), a ``section`` block
  (``mrkdwn``: the incident's fields) and a ``context`` block (``mrkdwn``: incident id, fleetd
  instance, event revision).

No ``channel``, ``username`` or ``icon`` override (an incoming webhook posts to the channel it
was made for). Every value comes from the closed v1 payload and is escaped for ``mrkdwn``
(``&``, ``<``, ``>``), so nothing in it can mention, link or format.

Verdicts (Slack's documented errors): 200 ``ok`` delivered; 400 (``invalid_payload``,
``no_text``) means fleetd built a message Slack cannot read — **fleetd's bug**, logged at ERROR
and counted as ``payload_bug``, permanent for that event, never a verdict on the receiver;
403 (``action_prohibited``, ``invalid_token``) and 404 (``channel_not_found``, ``no_service``)
are permanent until the receivers change; 410 ``channel_is_archived`` disables that URL as a 410
does for a webhook; 429 (with ``Retry-After``) and 5xx (``rollup_error``) are retried.
Pure: values in, bytes out.
"""

from __future__ import annotations

import json
from typing import Final

from fleetd.model.events import EventType
from fleetd.notify.payload import IncidentEvent

__all__ = ["HEADLINES", "message_body"]

HEADLINES: Final = {
    EventType.OPEN: "fleetd incident opened",
    EventType.REMINDER: "fleetd incident still open",
    EventType.RESOLVED: "fleetd incident resolved",
    EventType.SEVERITY_CHANGED: "fleetd incident changed",
}


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message_body(event: IncidentEvent) -> bytes:
    """The incoming-webhook body of ``event`` (module docstring), compact JSON, UTF-8."""
    incident = event.incident
    headline = HEADLINES[event.event_type]
    what = f"{incident.state} of {incident.scope.value} {incident.subject}"
    text = _escaped(f"{headline} ({incident.severity.value}): {what}")
    fields = [
        f"*Severity:* {incident.severity.value}",
        f"*State:* {incident.state}",
        f"*Scope:* {incident.scope.value} {incident.subject}",
        f"*Cause:* {incident.cause} ({incident.certainty.value})",
        f"*Opened:* {incident.opened_at.isoformat()}",
    ]
    if event.event_type is EventType.RESOLVED and incident.resolved_at is not None:
        reason = incident.resolve_reason.value if incident.resolve_reason else "cleared"
        fields.append(f"*Resolved:* {incident.resolved_at.isoformat()} ({reason})")
    fields.append(f"*Duration:* {incident.duration_seconds} s")
    context = (
        f"incident {incident.id} · instance {event.fleetd_instance} · "
        f"{event.event_type.value} #{event.event_revision}"
    )
    document = {
        "text": text,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": headline}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _escaped("\n".join(fields))}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _escaped(context)}]},
        ],
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")
