"""One signed webhook request, ready for a sender: URL, exact body bytes and headers.

A journal event becomes a body with :func:`stored_body`: the payload the dispatcher stored, with
``eventId``, ``eventType`` and ``eventRevision`` taken from the journal's row (the journal assigns
revisions, so its row is the authority), checked against the closed v1 model once more and
encoded. The same row gives the same bytes at every attempt and after every restart.

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

from fleetd.model.events import EventType
from fleetd.notify.core.signing import WebhookSecret, signature_headers
from fleetd.notify.payload import IncidentEvent, encode_event

__all__ = [
    "CONTENT_TYPE",
    "USER_AGENT",
    "WebhookRequest",
    "prepare_request",
    "signed_request",
    "stored_body",
    "stored_event",
]

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


def stored_body(
    payload: Mapping[str, object],
    *,
    incident_id: str,
    event_type: EventType,
    revision: int,
    event_id: str,
) -> bytes:
    """The exact body of one journal event (see the module docstring).

    Raises :class:`ValueError` (without the payload's text) when the stored payload is not a v1
    event of ``incident_id`` or ``event_id`` is not that event's idempotency key: such a payload
    is never sent.
    """
    return encode_event(
        stored_event(
            payload,
            incident_id=incident_id,
            event_type=event_type,
            revision=revision,
            event_id=event_id,
        )
    )


def stored_event(
    payload: Mapping[str, object],
    *,
    incident_id: str,
    event_type: EventType,
    revision: int,
    event_id: str,
) -> IncidentEvent:
    """The checked v1 event of one journal row (:func:`stored_body` before encoding); raises
    :class:`ValueError` as it does."""
    document = {
        **payload,
        "eventId": event_id,
        "eventType": event_type.value,
        "eventRevision": revision,
    }
    event = IncidentEvent.model_validate(document)
    if event.incident.id != incident_id:
        raise ValueError("the stored payload names another incident")
    return event
