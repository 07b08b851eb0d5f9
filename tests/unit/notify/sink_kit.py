"""What the delivery worker's tests share: incidents routed to a person, their stored payloads, a
target, a scripted sender, the webhook loop's two steps on one journal (:func:`make_leg`), and
receiver-side checks with the ``standardwebhooks`` package."""

from __future__ import annotations

import base64
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import standardwebhooks
import standardwebhooks.webhooks

from fleetd.clock import Clock, FakeClock
from fleetd.config import FleetdConfig, NotificationMode
from fleetd.errors import ConfigError
from fleetd.health.incidents import Assignment, Incident, Route, RoutingReason
from fleetd.health.states import ControlLinkState, Scope
from fleetd.journal.port import Journal
from fleetd.journal.values import EventType, IncidentChange, NewEvent
from fleetd.metrics import Metrics
from fleetd.notify.core.retry import PostResult
from fleetd.notify.core.signing import WebhookSecret
from fleetd.notify.http import WebhookSender
from fleetd.notify.payload import CoverageStatus, event_from_incident
from fleetd.notify.request import WebhookRequest
from fleetd.notify.sink import SinkTarget
from fleetd.notify.worker import PassReport, SinkWorker
from fleetd.runtime.escalation import Escalation
from tests.contract.journal_cases import make_incident

SECRET_TEXT = "whsec_" + base64.b64encode(bytes(range(40, 72))).decode()
OTHER_SECRET_TEXT = "whsec_" + base64.b64encode(bytes(range(80, 112))).decode()
LIMIT = timedelta(seconds=10)
REPEAT = timedelta(hours=1)
INSTANCE = "fleetd-test"


def target(*urls: str, secret: str = SECRET_TEXT, limit: timedelta = LIMIT) -> SinkTarget:
    """A target over ``urls`` (primary first; one closed local port when none is given)."""
    return SinkTarget(
        urls=urls or ("http://127.0.0.1:9/hooks",), secret=WebhookSecret.parse(secret), limit=limit
    )


def human_incident(subject: str = "sess_1", **changes: Any) -> Incident:
    """A critical member incident with no owning lead: routed to a person."""
    incident = make_incident(subject, owner=None, **changes)
    assignment = Assignment(
        route=Route.HUMAN, recipient=None, reason=RoutingReason.HUMAN_NO_OWNER, generation=1
    )
    return incident.routed(assignment)


def link_incident() -> Incident:
    """The control link down: critical, routed to a person."""
    incident = make_incident(
        "herdr",
        state=ControlLinkState.CONTROL_LINK_DOWN,
        cause="list_and_ping_failed",
        owner=None,
        target=None,
        scope=Scope.CONTROL_LINK,
    )
    assignment = Assignment(
        route=Route.HUMAN,
        recipient=None,
        reason=RoutingReason.HUMAN_CONTROL_LINK_DOWN,
        generation=1,
    )
    return incident.routed(assignment)


def payload(
    incident: Incident, kind: EventType = EventType.OPEN, revision: int = 1, *, at: datetime
) -> dict[str, object]:
    """The stored v1 payload the dispatcher records for ``incident``."""
    event = event_from_incident(
        incident,
        event_type=kind,
        revision=revision,
        occurred_at=at,
        instance=INSTANCE,
        coverage=CoverageStatus.FULL,
        routing_reason=incident.routing_reason,
    )
    return event.model_dump(mode="json", by_alias=True)


async def open_incident(journal: Journal, incident: Incident, *, at: datetime) -> IncidentChange:
    change = IncidentChange(incident=incident)
    await journal.record(
        change, [NewEvent(type=EventType.OPEN, payload=payload(incident, at=at))], now=at
    )
    return change


class ScriptedSender:
    """A :class:`WebhookSender` that answers from a script (200 when it runs out) and keeps every
    request; ``during`` runs inside each send (to move a fake clock or change the journal)."""

    def __init__(self, *outcomes: PostResult) -> None:
        self.outcomes: deque[PostResult] = deque(outcomes)
        self.requests: list[WebhookRequest] = []
        self.during: Callable[[WebhookRequest], Any] | None = None

    def answer(self, *outcomes: PostResult) -> None:
        self.outcomes.extend(outcomes)

    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        self.requests.append(request)
        if self.during is not None:
            result = self.during(request)
            if hasattr(result, "__await__"):
                await result
        return self.outcomes.popleft() if self.outcomes else PostResult(status=200)

    async def aclose(self) -> None:
        return None


class RoutedSender:
    """A :class:`WebhookSender` whose answers depend on the URL: each receiver's own script
    (200 when it runs out); ``requests`` keeps every request in order."""

    def __init__(self, scripts: Mapping[str, Iterable[PostResult]] | None = None) -> None:
        self.scripts: dict[str, deque[PostResult]] = {
            url: deque(outcomes) for url, outcomes in (scripts or {}).items()
        }
        self.requests: list[WebhookRequest] = []

    def answer(self, url: str, *outcomes: PostResult) -> None:
        self.scripts.setdefault(url, deque()).extend(outcomes)

    def to(self, url: str) -> list[WebhookRequest]:
        """The requests sent to ``url``."""
        return [request for request in self.requests if request.url == url]

    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        self.requests.append(request)
        script = self.scripts.get(request.url)
        return script.popleft() if script else PostResult(status=200)

    async def aclose(self) -> None:
        return None


def make_worker(
    journal: Journal,
    sender: WebhookSender,
    clock: Clock,
    *,
    sink: Callable[[], SinkTarget | None] | SinkTarget | None = None,
    draws: Iterable[float] = (),
    owner: str = "fleetd-a",
    metrics: Metrics | None = None,
    **options: Any,
) -> SinkWorker:
    """A worker on ``journal``; ``draws`` are the jitter draws in order (then 1.0)."""
    queued = deque(draws)
    chosen = sink if sink is not None else target()
    supplier = chosen if callable(chosen) else (lambda: chosen)
    return SinkWorker(
        journal=journal,
        target=supplier,
        sender=sender,
        clock=clock,
        draw=lambda: queued.popleft() if queued else 1.0,
        metrics=metrics or Metrics(),
        owner=owner,
        **options,
    )


class _At:
    """``datetime`` for the verifier, whose ``now()`` is the receiver's (fake) time."""

    def __init__(self, now: datetime) -> None:
        self._now = now

    def __call__(self) -> type[datetime]:
        now = self._now

        class Frozen(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Frozen:
                return cls.fromtimestamp(now.timestamp(), tz)

        return Frozen


def verify(
    body: bytes, headers: Mapping[str, str], *, now: datetime, secret: str = SECRET_TEXT
) -> dict[str, Any]:
    """The reference library's verification, as a receiver whose clock reads ``now`` does it."""
    with mock.patch.object(standardwebhooks.webhooks, "datetime", _At(now)()):
        document = standardwebhooks.Webhook(secret).verify(body, dict(headers))
    assert isinstance(document, dict)
    return document


def body_of(request: WebhookRequest) -> dict[str, Any]:
    document = json.loads(request.body)
    assert isinstance(document, dict)
    return document


def clock_at(start: datetime) -> FakeClock:
    return FakeClock(start)


def webhook_settings(*, notify: bool = True, repeat: timedelta = REPEAT) -> FleetdConfig:
    """A config whose notifications are on (webhook mode) or off, reminding every ``repeat``
    (built without the environment check: the kit's targets carry their own URLs)."""
    base = FleetdConfig()
    mode = NotificationMode.WEBHOOK if notify else NotificationMode.DISABLED
    notifications = base.health.notifications.model_copy(update={"mode": mode})
    health = base.health.model_copy(
        update={"notifications": notifications, "human_repeat_seconds": int(repeat.total_seconds())}
    )
    return base.model_copy(update={"health": health, "instance": INSTANCE})


@dataclass(slots=True)
class HumanLeg:
    """The webhook loop as ``fleetd serve`` schedules it (``compose``): the escalation shell
    records what a person is owed, then the sink worker delivers, both on one journal."""

    escalation: Escalation
    worker: SinkWorker
    clock: Clock

    async def step(self) -> PassReport:
        """One pass of the loop at the clock's time; the worker's report."""
        await self.escalation.step(self.clock.now())
        return await self.worker.step()


def make_leg(
    journal: Journal,
    sender: WebhookSender,
    clock: Clock,
    *,
    sink: Callable[[], SinkTarget | None] | SinkTarget | None = None,
    repeat: timedelta = REPEAT,
    **options: Any,
) -> HumanLeg:
    """The escalation shell and a worker (:func:`make_worker`, ``options`` go to it) on
    ``journal``, wired as ``compose`` wires them: notifications are on while the target supplier
    gives a target (or fails to resolve one), the receiver list's generation is the target's,
    and each recorded delivery is handed to the shell."""
    chosen = sink if sink is not None else target()
    supplier = chosen if callable(chosen) else (lambda: chosen)

    def current() -> tuple[bool, str | None]:
        try:
            found = supplier()
        except ConfigError:  # webhook mode whose list cannot be resolved
            return True, None
        return found is not None, None if found is None else found.generation

    escalation = Escalation(
        journal=journal,
        settings=lambda: webhook_settings(notify=current()[0], repeat=repeat),
        receivers=lambda: current()[1],
    )
    worker = make_worker(
        journal, sender, clock, sink=supplier, settled=escalation.settled, **options
    )
    return HumanLeg(escalation=escalation, worker=worker, clock=clock)
