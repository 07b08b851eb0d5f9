"""The ``alertmanager`` sink kind: an incident event as one Alertmanager v2 ``postableAlert``.

Each event is a POST of a one-element JSON array to ``<receiver URL>/api/v2/alerts`` (the
receiver URL is the Alertmanager's base URL, e.g. ``http://alertmanager:9093``; a trailing
``/api/v2/alerts`` is accepted too). The alert, field by field (Alertmanager's OpenAPI
``postableAlert``):

* ``labels`` — the alert's identity, bounded and stable for the life of an incident (its state,
  scope and severity are fixed when it opens): ``alertname`` (``FleetdIncident``), ``scope``,
  ``state``, ``severity``, ``fleetdInstance`` and ``incident`` (the incident id);
* ``annotations`` — ``summary`` (one line: severity, state, scope, subject, cause), ``subject``,
  ``cause``, ``certainty`` and ``routing`` (why it came to a person);
* ``startsAt`` — when the incident opened;
* ``endsAt`` — only on ``resolved``: when it resolved (Alertmanager then reports it resolved).
  An open alert has none: Alertmanager keeps it firing for its ``resolve_timeout`` (default five
  minutes) after each post, so the human-leg policy records a ``reminder`` — a re-post of the
  same alert — every ``health.notifications.alertmanagerRepostSeconds`` (default 60) while the
  incident is open (:func:`fleetd.notify.core.policy.plan`'s ``refresh``).

Every value comes from the closed v1 payload (:mod:`fleetd.notify.payload`): ids, enum values
and names in a narrow grammar, never free text. The same event gives the same bytes at every
attempt. No signature header: Alertmanager does not check one (put it behind a proxy that
authenticates if it needs to be).

Verdicts: 200 delivered; 400 is Alertmanager refusing the alert as invalid — fleetd's bug
(:func:`fleetd.notify.kinds.our_bug`); 5xx, 429 and the link are retried and failed over as for
a webhook.

Pure: values in, bytes out.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Final

from fleetd.model.events import EventType
from fleetd.notify.payload import IncidentEvent

__all__ = ["ALERTNAME", "ALERTS_PATH", "alerts_url", "encode_alerts", "postable_alert"]

ALERTNAME: Final = "FleetdIncident"
ALERTS_PATH: Final = "/api/v2/alerts"


def alerts_url(base: str) -> str:
    """The v2 alerts endpoint of the Alertmanager at ``base``."""
    base = base.strip().rstrip("/")
    return base if base.endswith(ALERTS_PATH) else base + ALERTS_PATH


def rfc3339(moment: datetime) -> str:
    """``moment`` in UTC as RFC 3339 with a ``Z`` (what Go's ``time.Time`` reads)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def postable_alert(event: IncidentEvent) -> dict[str, object]:
    """The ``postableAlert`` of ``event`` (module docstring)."""
    incident = event.incident
    summary = (
        f"fleetd {incident.severity.value}: {incident.state} of {incident.scope.value} "
        f"{incident.subject} ({incident.cause})"
    )
    alert: dict[str, object] = {
        "labels": {
            "alertname": ALERTNAME,
            "scope": incident.scope.value,
            "state": incident.state,
            "severity": incident.severity.value,
            "fleetdInstance": event.fleetd_instance,
            "incident": incident.id,
        },
        "annotations": {
            "summary": summary,
            "subject": incident.subject,
            "cause": incident.cause,
            "certainty": incident.certainty.value,
            "routing": event.routing.reason.value if event.routing.reason else "none",
        },
        "startsAt": rfc3339(incident.opened_at),
    }
    if event.event_type is EventType.RESOLVED:
        alert["endsAt"] = rfc3339(incident.resolved_at or event.occurred_at)
    return alert


def encode_alerts(event: IncidentEvent) -> bytes:
    """The request body: a JSON array holding the one alert, compact, UTF-8."""
    return json.dumps([postable_alert(event)], separators=(",", ":")).encode("utf-8")
