"""One signed webhook request, ready for a sender: URL, exact body bytes and headers.

A request is signed per attempt: a retry keeps the body and the ``webhook-id`` but takes a new
``webhook-timestamp`` (a receiver refuses timestamps older than five minutes, and retries wait up
to fifteen). So the dispatcher keeps the event (or its body) and calls :func:`signed_request` at
each attempt with the clock's ``now``. Nothing here prints the URL, the body or the headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from fleetd.notify.payload import IncidentEvent, encode_event
from fleetd.notify.signing import WebhookSecret, signature_headers

__all__ = ["CONTENT_TYPE", "USER_AGENT", "WebhookRequest", "prepare_request", "signed_request"]

CONTENT_TYPE: Final = "application/json"
USER_AGENT: Final = "fleetd-webhook/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookRequest:
    """What one POST sends. Only ``event_id`` shows in ``repr``: the URL is a secret too."""

    event_id: str
    url: str = field(repr=False)
    body: bytes = field(repr=False)
    headers: Mapping[str, str] = field(repr=False)


def signed_request(
    body: bytes, *, event_id: str, url: str, secret: WebhookSecret, now: datetime
) -> WebhookRequest:
    """Sign ``body`` for an attempt at ``now`` under ``event_id`` (the idempotency key)."""
    headers = {
        "content-type": CONTENT_TYPE,
        "user-agent": USER_AGENT,
        **signature_headers(secret, msg_id=event_id, now=now, body=body),
    }
    return WebhookRequest(event_id=event_id, url=url, body=body, headers=headers)


def prepare_request(
    event: IncidentEvent, *, url: str, secret: WebhookSecret, now: datetime
) -> WebhookRequest:
    """Encode ``event`` and sign it for an attempt at ``now``."""
    return signed_request(
        encode_event(event), event_id=event.event_id, url=url, secret=secret, now=now
    )
