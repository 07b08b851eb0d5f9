"""One delivery path, several destination kinds: each kind's request and its reading of a status.

The worker (:mod:`fleetd.notify.worker`) claims, sweeps, retries, fails over and journals the
same way for every ``health.notifications.mode``; only two things depend on the kind:

* **the request** (:func:`build_request`): ``webhook`` signs the v1 event (Standard Webhooks,
  byte for byte as always); ``alertmanager``, ``pagerduty`` and ``slack`` encode it in their
  receiver's documented shape (:mod:`~fleetd.notify.alertmanager`,
  :mod:`~fleetd.notify.pagerduty`, :mod:`~fleetd.notify.slack`);
* **"our bug"** (:func:`our_bug`): a status by which the receiver says the *request* was
  malformed — Alertmanager's, PagerDuty's and Slack's 400 (``invalid_payload``). fleetd built
  that body, so the event fails permanently as ``payload_bug`` with an ERROR, and the receiver
  keeps its standing (no breaker strike, no failover, never disabled). A webhook's 400 stays a
  receiver's verdict (``http_4xx``), as it always was.

Every other status reads the same everywhere (:mod:`fleetd.notify.core.retry`,
:mod:`fleetd.notify.core.failover`): 2xx delivered; 429, 5xx and link failures retried (with
``Retry-After``) and failed over; 410 disables that receiver; other 4xx permanent.

Pure: values in, a request out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from fleetd.config import NotificationMode
from fleetd.notify.alertmanager import alerts_url, encode_alerts
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.pagerduty import enqueue_body
from fleetd.notify.payload import IncidentEvent, encode_event
from fleetd.notify.request import CONTENT_TYPE, USER_AGENT, WebhookRequest, signed_request
from fleetd.notify.slack import message_body

__all__ = ["BUG_STATUSES", "build_request", "our_bug"]

BUG_STATUSES: Final = {
    NotificationMode.ALERTMANAGER: frozenset({400}),
    NotificationMode.PAGERDUTY: frozenset({400}),
    NotificationMode.SLACK: frozenset({400}),
}
"""The statuses by which a kind's receiver says fleetd's request was malformed."""


def our_bug(kind: NotificationMode, status: int | None) -> bool:
    """Whether ``status`` from a ``kind`` receiver means fleetd built a bad request."""
    return status is not None and status in BUG_STATUSES.get(kind, frozenset())


def build_request(
    event: IncidentEvent,
    *,
    kind: NotificationMode,
    url: str,
    now: datetime,
    secret: WebhookSecret | None = None,
    routing_key: str | None = None,
) -> WebhookRequest:
    """The request that tells ``event`` to the receiver at ``url`` in ``kind``'s shape, for an
    attempt at ``now`` (``secret``: webhook only; ``routing_key``: pagerduty only)."""
    if kind is NotificationMode.WEBHOOK:
        if secret is None:
            raise ValueError("a webhook request needs its signing secret")
        return signed_request(
            encode_event(event), event_id=event.event_id, url=url, secret=secret, now=now
        )
    if kind is NotificationMode.ALERTMANAGER:
        body, url = encode_alerts(event), alerts_url(url)
    elif kind is NotificationMode.PAGERDUTY:
        if routing_key is None:
            raise ValueError("a pagerduty request needs its routing key")
        body = enqueue_body(event, routing_key=routing_key)
    elif kind is NotificationMode.SLACK:
        body = message_body(event)
    else:
        raise ValueError(f"mode {kind.value} sends nothing")
    headers = {"content-type": CONTENT_TYPE, "user-agent": USER_AGENT}
    return WebhookRequest(event_id=event.event_id, url=url, body=body, headers=headers)
