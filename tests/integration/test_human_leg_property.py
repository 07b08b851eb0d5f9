"""What a person is told, over any history: the escalation shell and the delivery worker as
``fleetd serve`` runs them (one journal, the webhook loop's two steps), driven by hypothesis
through routing changes, resolutions, notifications off and on, receiver changes, refusals,
replays, a journal that goes away, and a resolution that lands while an ``open`` is in flight."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetd.clock import FakeClock
from fleetd.config import FleetdConfig, NotificationMode
from fleetd.errors import JournalUnavailableError
from fleetd.health.incidents import Assignment, Incident, ResolveReason, Route, RoutingReason
from fleetd.journal.memory import InMemoryJournal
from fleetd.metrics import Metrics
from fleetd.notify.core.retry import PostResult
from fleetd.notify.request import WebhookRequest
from fleetd.notify.sink import SinkTarget
from fleetd.notify.worker import SinkWorker
from fleetd.runtime.escalation import Escalation
from tests.contract.journal_cases import T0
from tests.unit.notify.sink_kit import human_incident, target

REPEAT = timedelta(hours=1)
ACTIONS = (
    "to_person",
    "to_lead",
    "resolve",
    "resolve_in_flight",
    "notify_off",
    "notify_on",
    "new_receivers",
    "refuse_next",
    "replay",
    "journal_down",
    "journal_up",
    "pass",
    "pass",
    "pass",
    "hour",
)


def _config(notify: bool) -> FleetdConfig:
    base = FleetdConfig()
    mode = NotificationMode.WEBHOOK if notify else NotificationMode.DISABLED
    notifications = base.health.notifications.model_copy(update={"mode": mode})
    health = base.health.model_copy(
        update={"notifications": notifications, "human_repeat_seconds": int(REPEAT.seconds)}
    )
    return base.model_copy(update={"health": health})


@dataclass
class World:
    """One incident, the service's two steps, and a receiver that keeps what it was told."""

    clock: FakeClock = field(default_factory=lambda: FakeClock(T0))
    journal: InMemoryJournal = field(default_factory=InMemoryJournal)
    incident: Incident = field(default_factory=human_incident)
    generation: int = 1
    notify: bool = True
    receivers: int = 0
    resolved: bool = False
    refuse: int = 0
    in_flight: bool = False
    told: list[tuple[str, str]] = field(default_factory=list)  # delivered (type, webhook-id)
    sent_after_resolution: list[str] = field(default_factory=list)
    escalation: Escalation = field(init=False)
    worker: SinkWorker = field(init=False)

    def __post_init__(self) -> None:
        self.escalation = Escalation(
            journal=self.journal,
            settings=lambda: _config(self.notify),
            receivers=lambda: self._target().generation if self.notify else None,
        )
        self.worker = SinkWorker(
            journal=self.journal,
            target=lambda: self._target() if self.notify else None,
            sender=self,
            clock=self.clock,
            draw=lambda: 0.0,
            metrics=Metrics(),
            owner="fleetd-a",
            settled=self.escalation.settled,
        )

    def _target(self) -> SinkTarget:
        return target(f"http://127.0.0.1:9/hooks/{self.receivers}")

    # -- the receiver -----------------------------------------------------------------
    async def send(self, request: WebhookRequest, *, limit: timedelta) -> PostResult:
        kind = json.loads(request.body)["eventType"]
        stored = self.journal._incidents[self.incident.id]  # what the journal held at the send
        if stored.resolved_at is not None and kind != "resolved":
            self.sent_after_resolution.append(kind)
        if self.in_flight and kind != "resolved":
            self.in_flight = False
            await self._resolve()  # the resolution lands while this request is out
        if self.refuse:
            self.refuse -= 1
            return PostResult(status=404)
        self.told.append((kind, request.event_id))
        return PostResult(status=200)

    async def aclose(self) -> None:
        return None

    # -- what happens -----------------------------------------------------------------
    def _route(self, route: Route) -> None:
        if self.resolved:
            return
        self.generation += 1
        lead = route is Route.LEAD
        self.incident = self.incident.routed(
            Assignment(
                route=route,
                recipient="lead-b" if lead else None,
                reason=RoutingReason.PEER_OWNER_UNHEALTHY if lead else RoutingReason.HUMAN_NO_OWNER,
                generation=self.generation,
                on_behalf_of=None,
            )
        )
        self.escalation.note(self.incident)

    async def _resolve(self) -> None:
        if self.resolved:
            return
        self.resolved = True
        self.escalation.note_resolved(
            self.incident, reason=ResolveReason.CLEARED, resolved_at=self.clock.now()
        )
        await self.escalation.step(self.clock.now())

    async def passes(self, count: int = 1) -> None:
        for _ in range(count):
            self.clock.advance(6)
            await self.escalation.step(self.clock.now())
            await self.worker.step()

    async def act(self, action: str) -> None:
        match action:
            case "to_person":
                self._route(Route.HUMAN)
            case "to_lead":
                self._route(Route.LEAD)
            case "resolve":
                await self._resolve()
            case "resolve_in_flight":
                self.in_flight = True
            case "notify_off" | "notify_on":
                self.notify = action == "notify_on"
            case "new_receivers":
                self.receivers += 1
            case "refuse_next":
                self.refuse += 1
            case "replay":
                if self.journal.fail_with is None:
                    await self.escalation.replay(self.incident.id, now=self.clock.now())
            case "journal_down":
                self.journal.fail_with = JournalUnavailableError("call", "down")
            case "journal_up":
                self.journal.fail_with = None
            case "hour":
                self.clock.advance(REPEAT.total_seconds())
            case _:
                await self.passes()


async def _run(actions: list[str]) -> World:
    world = World()
    world.escalation.note(world.incident)  # opened, routed to a person
    for action in actions:
        await world.act(action)
    # Then the journal comes back, notifications are on, the receivers take everything, an
    # operator replays what failed, and the service runs until nothing is left to do.
    world.journal.fail_with = None
    world.notify, world.refuse, world.in_flight = True, 0, False
    await world._resolve()
    await world.passes(3)
    await world.escalation.replay(world.incident.id, now=world.clock.now())
    await world.passes(5)
    return world


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ACTIONS), max_size=30))
@example(actions=["resolve_in_flight", "refuse_next", "pass"])  # refused after the resolution
def test_a_person_told_of_an_incident_is_told_it_resolved_exactly_once(actions: list[str]) -> None:
    """Whatever happened, a person who got ``open`` (or a reminder) gets one ``resolved`` event
    (one id, however often it is retried), a person told nothing gets none, and nothing but
    ``resolved`` is sent once the journal holds the resolution. ``severity_changed`` is reserved:
    no history sends it."""
    world = asyncio.run(_run(actions))
    told = {kind for kind, _ in world.told}
    assert told <= {"open", "reminder", "resolved"}, world.told  # severity_changed is reserved
    resolved_ids = {event_id for kind, event_id in world.told if kind == "resolved"}
    if told & {"open", "reminder"}:
        assert len(resolved_ids) == 1, world.told
        last_open = max(i for i, (kind, _) in enumerate(world.told) if kind != "resolved")
        first_resolved = min(i for i, (kind, _) in enumerate(world.told) if kind == "resolved")
        assert last_open < first_resolved, world.told
    else:
        assert not resolved_ids, world.told
    assert world.sent_after_resolution == [], (world.sent_after_resolution, actions)
    stored = world.journal._incidents[world.incident.id]
    assert stored.resolved_at is not None


def test_an_open_cancelled_in_flight_is_recorded_as_delivered_and_resolved_follows() -> None:
    """1d: a resolution that cancels the ``open`` while its request is out still leaves the
    delivery recorded, so the person gets ``resolved``."""
    world = asyncio.run(_run(["resolve_in_flight", "pass", "pass"]))
    assert [kind for kind, _ in world.told] == ["open", "resolved"]


def test_an_incident_routed_to_a_person_while_the_journal_is_down_is_sent_when_it_returns() -> None:
    """1a: the ``open`` is owed while the journal is away, and recorded and sent once it is
    back; coverage stays degraded until then."""

    async def run() -> World:
        world = World()
        world.journal.fail_with = JournalUnavailableError("call", "down")
        world.escalation.note(world.incident)
        await world.passes(3)
        assert world.told == []
        assert world.escalation.problem is not None
        world.journal.fail_with = None
        await world.passes(2)
        assert world.escalation.problem is None
        return world

    world = asyncio.run(run())
    assert [kind for kind, _ in world.told] == ["open"]


def test_a_resolution_while_notifications_are_off_is_sent_once_they_are_on() -> None:
    """1c: a person who got ``open`` gets ``resolved`` after notifications come back on, and no
    reminder in between."""

    async def run() -> World:
        world = World()
        world.escalation.note(world.incident)
        await world.passes(2)
        world.notify = False
        await world._resolve()
        world.clock.advance(REPEAT.total_seconds() * 3)
        await world.passes(3)
        world.notify = True
        await world.passes(3)
        return world

    world = asyncio.run(run())
    assert [kind for kind, _ in world.told] == ["open", "resolved"]
