"""What the journal takes and gives back: frozen values, enums, the idempotency key, the bounds.

Pure: no I/O, no clock. Every adapter of :class:`~fleetd.journal.port.Journal` speaks these types
and checks its input with :func:`check_change`, :func:`check_event` and :func:`check_code` before
it writes anything, so the fake and the databases refuse the same records the same way.

An incident is the health core's :class:`~fleetd.health.incidents.Incident` (key, generation,
severity, target...), stored without its evidence. An outbound event belongs to one incident,
has a per-incident ``revision`` the journal assigns (1, 2, ...), and an ``Idempotency-Key`` derived
from ``(incident id, event type, revision)`` (M4 §10.3) that never changes across transport
retries or restarts. The key, the event types and their states are
:mod:`fleetd.model.events`' (re-exported here): the key the journal stores is the ``webhook-id``
and ``Idempotency-Key`` a sender puts on the wire and the ``eventId`` of the payload, one recipe
in one place. Each event has at most one outstanding delivery attempt.

Payload bound (M4 §10.5, defence in depth: the notifier builds payloads from allowed fields only):
a payload is a JSON object of at most :data:`MAX_PAYLOAD_BYTES`, nested at most
:data:`MAX_PAYLOAD_DEPTH` deep, whose keys are plain identifiers and whose strings are single
printable lines of at most :data:`MAX_PAYLOAD_STRING` characters that look like neither a URL nor
a path. Pane text, prompts and replies are multi-line or long; URLs and paths are refused by
shape. A payload outside the bound is refused with
:class:`~fleetd.errors.JournalRefusedError` and nothing is written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from fleetd.errors import JournalRefusedError
from fleetd.health.incidents import (
    Assignment,
    Incident,
    IncidentKey,
    ResolveReason,
    Route,
    RoutingReason,
)
from fleetd.health.states import Scope
from fleetd.model.events import EventState, EventType, idempotency_key, is_plain_id

__all__ = [
    "AFTER_CANCEL",
    "MAX_INSTANCES",
    "MAX_INSTANCE_LEADS",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PAYLOAD_STRING",
    "MAX_RENEW_EVERY",
    "MAX_SUMMARY_BYTES",
    "MAX_TEXT",
    "AttemptOutcome",
    "Claim",
    "EventState",
    "EventType",
    "IncidentChange",
    "InstanceRecord",
    "JournalSnapshot",
    "JournalStats",
    "NewEvent",
    "RecordedEvent",
    "Routing",
    "StoredEvent",
    "StoredIncident",
    "assignment_of",
    "check_change",
    "check_code",
    "check_event",
    "check_instance",
    "check_payload",
    "idempotency_key",
    "key_namespace",
]

MAX_TEXT = 200
"""Longest id, subject, cause fingerprint, target or lead name the journal stores."""
MAX_PAYLOAD_BYTES = 8192
MAX_INSTANCES = 64
"""Most instance rows :meth:`~fleetd.journal.port.Journal.instances` reads (oldest renewal last)."""
MAX_INSTANCE_LEADS = 256
"""Most lead names one instance row lists."""
MAX_RENEW_EVERY = timedelta(days=1)
"""Longest renewal interval a row may state (a snapshot interval is at most an hour)."""
MAX_SUMMARY_BYTES = 4 * 1024 * 1024
"""Largest published summary of one instance, encoded (about 10,000 members)."""
MAX_PAYLOAD_DEPTH = 4
MAX_PAYLOAD_STRING = 256

_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_PATH_OR_URL = re.compile(r"://|^\s*(/|~/|\./|\.\./|[A-Za-z]:\\)")


class AttemptOutcome(StrEnum):
    """How one delivery attempt ended (``None`` in storage while it is outstanding)."""

    DELIVERED = "delivered"
    RETRY = "retry"  # a retryable failure; the next attempt is scheduled
    PERMANENT = "permanent"
    CANCELLED = "cancelled"


#: What a journal still takes from the sender of an attempt cancelled in flight (``None``: the
#: claim given back unsent): its delivery (the request went out), or that it never reached the
#: person — refused for good, or never sent — which ends the doubt its lease left. A retryable
#: failure may have reached the receiver: it is not taken, and the doubt stays.
AFTER_CANCEL: Final = (AttemptOutcome.DELIVERED, AttemptOutcome.PERMANENT, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Routing:
    """Who has an incident (M4 §7.4): the exact owning lead, the pinned recipient lead (``None``
    while a person or nobody has it), why it is not with its owner, and the reassignment
    generation (a reassignment adds one)."""

    owner: str | None = None
    recipient: str | None = None
    reason: str | None = None
    generation: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class IncidentChange:
    """An incident as it now stands: inserted on first record, updated by id afterwards.

    ``routing`` defaults to the incident's own owner and recipient. ``resolved_at`` and
    ``resolve_reason`` go together. ``cancel`` names revisions of this incident's earlier events
    that must never go out: each one still pending or failed is cancelled with its outstanding
    attempt (what the human-leg policy, :mod:`fleetd.notify.core.policy`, decided).
    """

    incident: Incident
    routing: Routing | None = None
    resolved_at: datetime | None = None
    resolve_reason: ResolveReason | None = None
    cancel: tuple[int, ...] = ()
    instance: str | None = None  # the fleetd instance that records it: stored when first inserted

    @property
    def effective_routing(self) -> Routing:
        if self.routing is not None:
            return self.routing
        assignment = self.incident.assignment
        return Routing(
            owner=self.incident.owner_lead,
            recipient=self.incident.recipient_lead,
            reason=assignment.reason.value if assignment is not None else None,
            generation=assignment.generation if assignment is not None else 0,
        )


def assignment_of(incident: Incident, routing: Routing) -> Assignment | None:
    """The routing assignment a stored incident had, rebuilt from its journal row (``None``
    before its first routing, or for a reason this build does not know: routed afresh)."""
    if routing.generation < 1 or routing.reason not in _REASONS:
        return None
    reason = RoutingReason(routing.reason)
    route = Route.HUMAN if routing.recipient is None else Route.LEAD
    # whom the recipient stands in for follows from the incident as routing decides it: the
    # unhealthy owner, else the lead an ownerless lead incident is about
    on_behalf_of: str | None
    if reason is RoutingReason.OWNER or reason is RoutingReason.HUMAN_CONTROL_LINK_DOWN:
        on_behalf_of = None
    elif routing.owner is not None:
        on_behalf_of = routing.owner
    elif incident.key.scope is Scope.LEAD:
        on_behalf_of = incident.key.subject
    else:
        on_behalf_of = None
    return Assignment(
        route=route,
        recipient=routing.recipient,
        reason=reason,
        generation=routing.generation,
        on_behalf_of=on_behalf_of,
    )


_REASONS = frozenset(reason.value for reason in RoutingReason)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    """An outbound event to append; its first attempt is due at ``due_at`` (default: now)."""

    type: EventType
    payload: Mapping[str, object]
    due_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedEvent:
    """An event as :meth:`Journal.record` stored it."""

    id: int
    incident_id: str
    type: EventType
    revision: int
    idempotency_key: str
    due_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A due attempt leased to ``lease_owner`` until ``lease_expires_at`` (by the holder's clock:
    the journal times the lease by its own, see :meth:`~fleetd.journal.port.Journal.claim_due`),
    with what to send.

    ``lease_token`` fences the lease: an outcome is recorded only while the attempt still carries
    this token and no outcome (nobody reclaimed it after expiry, nothing cancelled it).
    """

    attempt_id: int
    attempt: int
    event_id: int
    incident_id: str
    type: EventType
    revision: int
    idempotency_key: str
    payload: Mapping[str, object]
    due_at: datetime
    lease_owner: str
    lease_expires_at: datetime
    lease_token: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """An event and its retry state: attempts made, the outstanding one's due time, the last
    failure class and HTTP status, and (failed) the receiver list that refused it.

    ``in_doubt``: an attempt was leased to a sender and no outcome was recorded under that lease
    — in flight now, its sender gone, or cancelled while in flight (until its sender says the
    request never reached anyone: refused for good, or given back unsent). Its request may have
    reached the receiver (even been answered 2xx), so the person may have been told."""

    id: int
    type: EventType
    revision: int
    idempotency_key: str
    state: EventState
    created_at: datetime
    delivered_at: datetime | None = None
    attempts: int = 0
    due_at: datetime | None = None
    last_failure: str | None = None
    last_http_status: int | None = None
    failed_by: str | None = None
    in_doubt: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredIncident:
    """An incident as stored (evidence is not kept), its routing, resolution and events."""

    incident: Incident
    routing: Routing
    resolved_at: datetime | None = None
    resolve_reason: ResolveReason | None = None
    events: tuple[StoredEvent, ...] = ()
    instance: str | None = None  # the fleetd instance that opened it (None: before issue 24)

    @property
    def delivered_revisions(self) -> tuple[int, ...]:
        return tuple(e.revision for e in self.events if e.state is EventState.DELIVERED)

    @property
    def last_delivered_at(self) -> datetime | None:
        times = [e.delivered_at for e in self.events if e.delivered_at is not None]
        return max(times, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRecord:
    """One fleetd instance's row in a shared journal (issue 24), renewed every snapshot interval.

    ``host`` is the herdr host's label (the host name), ``leads`` the lead names it serves,
    ``coverage`` its notification coverage word, ``summary`` its last published fleet summary
    (ids, names, states and counts: what ``GET /v1/fleet?scope=all`` shows of it), or ``None``.
    ``renew_every`` is the interval it renews at (each instance is judged down by its own), or
    ``None`` in a row a build before it wrote. ``last_seen`` is written by the instance's own
    clock: another host only ever compares it with itself. ``run`` is the run of the process
    that renewed it (two processes renewing one name is a misconfiguration to stop), or
    ``None`` in a row a build before it wrote.
    """

    instance: str
    host: str
    version: str
    started_at: datetime
    last_seen: datetime
    leads: tuple[str, ...] = ()
    coverage: str = "full"
    summary: Mapping[str, Any] | None = None
    renew_every: timedelta | None = None
    run: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalSnapshot:
    """What a restart reloads: open incidents, resolved ones whose human leg is not settled (an
    event pending or failed, or one delivered with no ``resolved`` event yet), and what seeds the
    core's ``IncidentBook``: ``generations``, the latest generation of each key with an incident
    loaded here, and ``generation_floor``, at least the generation of every other incident stored
    (so a key that opens again gets a generation no stored incident of it has, without reading
    every key of the history)."""

    open_incidents: tuple[StoredIncident, ...] = ()
    pending_resolutions: tuple[StoredIncident, ...] = ()
    generations: Mapping[IncidentKey, int] = field(default_factory=dict)
    generation_floor: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalStats:
    """Outstanding attempts (the notification queue depth) and the last successful delivery."""

    queue_depth: int
    last_delivered_at: datetime | None


def _refuse(reason: str) -> JournalRefusedError:
    return JournalRefusedError("record", reason)


def _check_text(value: str | None, *, required: bool = False) -> None:
    if value is None:
        if required:
            raise _refuse("missing_field")
        return
    if not value or len(value) > MAX_TEXT or not value.isprintable():
        raise _refuse("field_out_of_bounds")


def check_code(value: str, *, operation: str) -> str:
    """A lease owner or failure class: a short plain code; anything else is refused."""
    if not _CODE.match(value):
        raise JournalRefusedError(operation, "code_out_of_bounds")
    return value


def _aware(value: datetime | None) -> None:
    if value is not None and value.utcoffset() is None:
        raise _refuse("naive_time")


def check_change(change: IncidentChange) -> None:
    """Refuse an incident change a database could not store the same way everywhere."""
    incident = change.incident
    key = incident.key
    for text in (incident.id, key.subject, key.cause):
        _check_text(text, required=True)
    _check_text(change.instance)
    if not is_plain_id(incident.id):  # the idempotency key is made from it
        raise _refuse("field_out_of_bounds")
    routing = change.effective_routing
    for optional in (incident.target, routing.owner, routing.recipient, routing.reason):
        _check_text(optional)
    if incident.generation < 1 or routing.generation < 0:
        raise _refuse("field_out_of_bounds")
    if (change.resolved_at is None) != (change.resolve_reason is None):
        raise _refuse("resolution_incomplete")
    _aware(incident.opened_at)
    _aware(change.resolved_at)


def check_event(event: NewEvent) -> None:
    """Refuse an event whose payload is out of bounds or whose due time is naive."""
    _aware(event.due_at)
    check_payload(event.payload)


def check_payload(payload: Mapping[str, object]) -> None:
    """Refuse a payload outside the bound described in the module docstring."""
    if not isinstance(payload, Mapping):
        raise _refuse("payload_not_object")
    _check_value(payload, 0)
    if len(json.dumps(payload, separators=(",", ":")).encode()) > MAX_PAYLOAD_BYTES:
        raise _refuse("payload_too_large")


def _check_value(value: object, depth: int) -> None:
    if depth > MAX_PAYLOAD_DEPTH:
        raise _refuse("payload_too_deep")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _refuse("payload_not_json")
        return
    if isinstance(value, str):
        if len(value) > MAX_PAYLOAD_STRING or not value.isprintable():
            raise _refuse("payload_text_refused")
        if _PATH_OR_URL.search(value):
            raise _refuse("payload_path_or_url")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str) or not _KEY.match(key):
                raise _refuse("payload_key_refused")
            _check_value(item, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_value(item, depth + 1)
        return
    raise _refuse("payload_not_json")


def key_namespace(scope: Scope, instance: str | None) -> str:
    """Where an incident's key is unique in a journal several instances share: an instance's own
    (its lead, its herdr link, its profile, its members: another instance may have a lead or a
    profile of the same name, and every instance's herdr link is ``herdr``), or the journal's as
    a whole (``""``) for an instance's own liveness, which every instance judges and the first to
    record owns. An incident recorded without an instance (before several shared a journal) is
    the journal's."""
    return "" if scope is Scope.INSTANCE or instance is None else instance


def check_instance(record: InstanceRecord) -> None:
    """Refuse an instance row a database could not store the same way everywhere."""
    for text in (record.instance, record.host, record.version):
        _check_text(text, required=True)
    check_code(record.coverage, operation="instance")
    if record.run is not None:
        check_code(record.run, operation="instance")
    if len(record.leads) > MAX_INSTANCE_LEADS:
        raise _refuse("field_out_of_bounds")
    for lead in record.leads:
        _check_text(lead, required=True)
    _aware(record.started_at)
    _aware(record.last_seen)
    every = record.renew_every
    if every is not None and not timedelta(milliseconds=1) <= every <= MAX_RENEW_EVERY:
        raise _refuse("field_out_of_bounds")
    if record.summary is not None:
        try:
            encoded = json.dumps(record.summary, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise _refuse("payload_not_json") from None
        if len(encoded.encode()) > MAX_SUMMARY_BYTES:
            raise _refuse("payload_too_large")
