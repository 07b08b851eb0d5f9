"""The ``pagerduty`` sink kind: an incident event as one PagerDuty Events API v2 ``enqueue``.

Each event is a POST to the Events API (``https://events.pagerduty.com/v2/enqueue`` unless
``webhookUrlEnvs`` names other URLs, e.g. a regional endpoint or a relay). The body, field by
field (PagerDuty "Send an Alert Event" / "Send a Resolve Event"):

* ``routing_key`` — the integration's key, read from ``health.notifications.routingKeyEnv``; it
  is in the body only, never in a log, a ``repr`` or an error;
* ``event_action`` — ``trigger`` for ``open`` and every ``reminder`` (PagerDuty folds them into
  the one alert by ``dedup_key``), ``resolve`` for ``resolved``;
* ``dedup_key`` — the incident id (so a reminder, a retry or a second receiver never opens a
  second PagerDuty incident, and the resolve closes the right one);
* ``payload`` (trigger only) — ``summary`` (one line, under the 1024-character limit),
  ``source`` (the fleetd instance), ``severity`` (``critical`` → ``critical``, ``warning`` →
  ``warning``, ``info`` → ``info``), ``timestamp`` (when the incident opened), ``component``
  (the subject), ``group`` (the scope), ``class`` (the state) and ``custom_details`` (cause,
  certainty, routing reason, event type and revision);
* ``client`` — ``fleetd``.

Verdicts (PagerDuty's documented responses): 202 delivered; 400 "Invalid event" is fleetd's bug
(or a routing key PagerDuty refuses), permanent for the event; 429 and 5xx are retried with the
webhook's backoff, honouring ``Retry-After``. Pure: values in, bytes out.
"""

from __future__ import annotations

import json
from typing import Final

from fleetd.health.states import Severity
from fleetd.model.events import EventType
from fleetd.notify.alertmanager import rfc3339
from fleetd.notify.payload import IncidentEvent

__all__ = ["CLIENT", "SEVERITIES", "enqueue_body"]

CLIENT: Final = "fleetd"
SEVERITIES: Final = {
    Severity.CRITICAL: "critical",
    Severity.WARNING: "warning",
    Severity.INFO: "info",
}
"""fleetd's severity → PagerDuty's (``critical``, ``error``, ``warning``, ``info``)."""


def enqueue_body(event: IncidentEvent, *, routing_key: str) -> bytes:
    """The ``enqueue`` request body of ``event`` (module docstring), compact JSON, UTF-8."""
    incident = event.incident
    document: dict[str, object] = {"routing_key": routing_key}
    if event.event_type is EventType.RESOLVED:
        document |= {"event_action": "resolve", "dedup_key": incident.id}
    else:
        summary = (
            f"fleetd {incident.severity.value}: {incident.state} of {incident.scope.value} "
            f"{incident.subject} ({incident.cause})"
        )
        document |= {
            "event_action": "trigger",
            "dedup_key": incident.id,
            "payload": {
                "summary": summary[:1024],
                "source": event.fleetd_instance,
                "severity": SEVERITIES[incident.severity],
                "timestamp": rfc3339(incident.opened_at),
                "component": incident.subject,
                "group": incident.scope.value,
                "class": incident.state,
                "custom_details": {
                    "cause": incident.cause,
                    "certainty": incident.certainty.value,
                    "routing": event.routing.reason.value if event.routing.reason else "none",
                    "eventType": event.event_type.value,
                    "eventRevision": event.event_revision,
                },
            },
        }
    document["client"] = CLIENT
    return json.dumps(document, separators=(",", ":")).encode("utf-8")
