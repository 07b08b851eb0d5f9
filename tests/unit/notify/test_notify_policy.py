"""The human-leg policy, row by row: what a person is told about one incident (M4 §10.1–§10.4)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from fleetd.health.incidents import Assignment, Incident, Route, RoutingReason
from fleetd.health.states import Severity
from fleetd.journal.values import EventState, StoredEvent
from fleetd.model.events import EventType
from fleetd.notify.core.policy import EMPTY, HumanPlan, Leg, leg_of, plan
from tests.blocked_imports import run_blocked
from tests.contract.journal_cases import make_incident

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
REPEAT = timedelta(hours=1)
OPEN, REMINDER, RESOLVED = EventType.OPEN, EventType.REMINDER, EventType.RESOLVED
PENDING, DELIVERED, FAILED, CANCELLED = (
    EventState.PENDING,
    EventState.DELIVERED,
    EventState.FAILED,
    EventState.CANCELLED,
)


def ev(
    revision: int,
    kind: EventType,
    state: EventState,
    *,
    at: datetime = T0,
    failed_by: str | None = None,
    in_doubt: bool = False,
) -> StoredEvent:
    """Event ``revision`` of the incident in ``state`` (delivered at ``at`` when delivered);
    ``in_doubt``: its request went out under a lease that recorded nothing."""
    return StoredEvent(
        id=revision,
        type=kind,
        revision=revision,
        idempotency_key=f"evt_{revision}",
        state=state,
        created_at=T0,
        delivered_at=at if state is DELIVERED else None,
        failed_by=failed_by,
        in_doubt=in_doubt,
    )


def leg(
    *events: StoredEvent,
    route: Route | None = Route.HUMAN,
    critical: bool = True,
    resolved: bool = False,
) -> Leg:
    return Leg(route=route, critical=critical, resolved=resolved, events=events)


def decide(
    case: Leg,
    *,
    notify: bool = True,
    receivers: str | None = "snk_a",
    replay: bool = False,
    now: datetime = T0,
) -> HumanPlan:
    return plan(case, notify=notify, receivers=receivers, replay=replay, repeat=REPEAT, now=now)


ROWS: list[tuple[str, Leg, dict[str, object], HumanPlan]] = [
    # -- resolved (rule 1)
    (
        "resolved after a delivered open: resolved, once",
        leg(ev(1, OPEN, DELIVERED), resolved=True),
        {},
        HumanPlan(record=(RESOLVED,)),
    ),
    (
        "resolved after a delivered reminder: resolved, and the pending reminder is cancelled",
        leg(ev(1, OPEN, DELIVERED), ev(2, REMINDER, PENDING), resolved=True),
        {},
        HumanPlan(record=(RESOLVED,), cancel=(2,)),
    ),
    (
        "resolved with a resolved event already: nothing more",
        leg(ev(1, OPEN, DELIVERED), ev(2, RESOLVED, DELIVERED), resolved=True),
        {},
        EMPTY,
    ),
    (
        "resolved before its open was delivered: the open is cancelled, no resolved",
        leg(ev(1, OPEN, PENDING), resolved=True),
        {},
        HumanPlan(cancel=(1,)),
    ),
    (
        "resolved while its open is in flight (in doubt): cancelled, and resolved, once",
        leg(ev(1, OPEN, PENDING, in_doubt=True), resolved=True),
        {},
        HumanPlan(record=(RESOLVED,), cancel=(1,)),
    ),
    (
        "resolved after its open was cancelled in flight (in doubt): resolved, once",
        leg(ev(1, OPEN, CANCELLED, in_doubt=True), resolved=True),
        {"notify": False},
        HumanPlan(record=(RESOLVED,)),
    ),
    (
        "resolved with an in-doubt open and a resolved already: nothing more",
        leg(ev(1, OPEN, CANCELLED, in_doubt=True), ev(2, RESOLVED, PENDING), resolved=True),
        {},
        EMPTY,
    ),
    (
        "resolved recorded while the open was in doubt, then refused for good: the resolved that "
        "has not gone out is cancelled (the person was told nothing)",
        leg(ev(1, OPEN, CANCELLED), ev(2, RESOLVED, PENDING), resolved=True),
        {},
        HumanPlan(cancel=(2,)),
    ),
    (
        "the same with the resolved failed, on a replay: cancelled, never re-armed",
        leg(ev(1, OPEN, CANCELLED), ev(2, RESOLVED, FAILED, failed_by="snk_old"), resolved=True),
        {"replay": True},
        HumanPlan(cancel=(2,)),
    ),
    (
        "the same with the resolved itself in flight: left to land",
        leg(ev(1, OPEN, CANCELLED), ev(2, RESOLVED, PENDING, in_doubt=True), resolved=True),
        {},
        EMPTY,
    ),
    (
        "1b: resolved with its open failed: cancelled (never re-sent), no resolved",
        leg(ev(1, OPEN, FAILED, failed_by="snk_old"), resolved=True),
        {"replay": True},
        HumanPlan(cancel=(1,)),
    ),
    (
        "1c: resolved while notifications are off: resolved is recorded and waits",
        leg(ev(1, OPEN, DELIVERED), resolved=True),
        {"notify": False},
        HumanPlan(record=(RESOLVED,)),
    ),
    (
        "resolved while off also cancels what must never go out",
        leg(ev(1, OPEN, DELIVERED), ev(2, REMINDER, FAILED), resolved=True),
        {"notify": False},
        HumanPlan(record=(RESOLVED,), cancel=(2,)),
    ),
    (
        "a failed resolved is re-armed for a new receiver list",
        leg(ev(1, OPEN, DELIVERED), ev(2, RESOLVED, FAILED, failed_by="snk_old"), resolved=True),
        {},
        HumanPlan(rearm=(2,)),
    ),
    (
        "a failed resolved stays failed for the receivers that refused it",
        leg(ev(1, OPEN, DELIVERED), ev(2, RESOLVED, FAILED, failed_by="snk_a"), resolved=True),
        {},
        EMPTY,
    ),
    (
        "a failed resolved is re-armed on a replay",
        leg(ev(1, OPEN, DELIVERED), ev(2, RESOLVED, FAILED, failed_by="snk_a"), resolved=True),
        {"replay": True},
        HumanPlan(rearm=(2,)),
    ),
    (
        "a failed resolved waits while notifications are off",
        leg(ev(1, OPEN, DELIVERED), ev(2, RESOLVED, FAILED, failed_by="snk_old"), resolved=True),
        {"notify": False},
        EMPTY,
    ),
    # -- open, with a person (rule 2)
    ("routed to a person: open", leg(), {}, HumanPlan(record=(OPEN,))),
    ("1a: routed to a person while off: nothing", leg(), {"notify": False}, EMPTY),
    (
        "back with a person after a lead cancelled the open: open again",
        leg(ev(1, OPEN, CANCELLED)),
        {},
        HumanPlan(record=(OPEN,)),
    ),
    ("an open still being told: nothing", leg(ev(1, OPEN, PENDING)), {}, EMPTY),
    (
        "a failed open is re-armed for a new receiver list",
        leg(ev(1, OPEN, FAILED, failed_by="snk_old")),
        {},
        HumanPlan(rearm=(1,)),
    ),
    (
        "an open refused unnamed counts as another list",
        leg(ev(1, OPEN, FAILED)),
        {},
        HumanPlan(rearm=(1,)),
    ),
    (
        "a failed open stays failed for the receivers that refused it",
        leg(ev(1, OPEN, FAILED, failed_by="snk_a")),
        {},
        EMPTY,
    ),
    (
        "a failed open stays failed while the receiver list cannot be resolved",
        leg(ev(1, OPEN, FAILED, failed_by="snk_a")),
        {"receivers": None},
        EMPTY,
    ),
    (
        "a failed open is re-armed on a replay",
        leg(ev(1, OPEN, FAILED, failed_by="snk_a")),
        {"replay": True},
        HumanPlan(rearm=(1,)),
    ),
    (
        "a critical incident told an hour ago: a reminder",
        leg(ev(1, OPEN, DELIVERED, at=T0 - REPEAT)),
        {},
        HumanPlan(record=(REMINDER,)),
    ),
    (
        "a reminder is counted from the last delivery",
        leg(ev(1, OPEN, DELIVERED, at=T0 - 2 * REPEAT), ev(2, REMINDER, DELIVERED, at=T0)),
        {},
        HumanPlan(recheck_at=T0 + REPEAT),
    ),
    (
        "not yet due: look again when it is",
        leg(ev(1, OPEN, DELIVERED)),
        {},
        HumanPlan(recheck_at=T0 + REPEAT),
    ),
    (
        "no reminder while the last one is still being told",
        leg(ev(1, OPEN, DELIVERED, at=T0 - REPEAT), ev(2, REMINDER, PENDING)),
        {},
        EMPTY,
    ),
    (
        "no reminder after one refused for good (it waits for new receivers or a replay)",
        leg(ev(1, OPEN, DELIVERED, at=T0 - REPEAT), ev(2, REMINDER, FAILED, failed_by="snk_a")),
        {},
        EMPTY,
    ),
    (
        "no reminder for a warning",
        leg(ev(1, OPEN, DELIVERED, at=T0 - REPEAT), critical=False),
        {},
        EMPTY,
    ),
    (
        "a re-arm comes before a new reminder",
        leg(
            ev(1, OPEN, DELIVERED, at=T0 - 2 * REPEAT),
            ev(2, REMINDER, FAILED, failed_by="snk_old"),
        ),
        {},
        HumanPlan(rearm=(2,)),
    ),
    # -- open, with a lead or nobody (rule 3)
    (
        "back to a lead: the undelivered open is cancelled",
        leg(ev(1, OPEN, PENDING), route=Route.LEAD),
        {},
        HumanPlan(cancel=(1,)),
    ),
    (
        "back to a lead: a failed open is cancelled too",
        leg(ev(1, OPEN, FAILED), route=Route.LEAD),
        {},
        HumanPlan(cancel=(1,)),
    ),
    (
        "back to a lead: what was delivered stays, no reminder",
        leg(ev(1, OPEN, DELIVERED, at=T0 - REPEAT), route=Route.LEAD),
        {},
        EMPTY,
    ),
    ("never routed: nothing", leg(route=None), {}, EMPTY),
]


@pytest.mark.parametrize(
    ("case", "options", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_every_row_of_the_policy(
    case: Leg, options: dict[str, object], expected: HumanPlan
) -> None:
    """Each row: the incident as it stands and its recorded events give exactly this plan."""
    assert decide(case, **options) == expected  # type: ignore[arg-type]


def test_an_empty_plan_writes_nothing_and_any_other_does() -> None:
    """``writes`` is what the shell checks before it touches the journal."""
    assert not EMPTY.writes
    assert not HumanPlan(recheck_at=T0).writes
    assert HumanPlan(record=(OPEN,)).writes
    assert HumanPlan(cancel=(1,)).writes
    assert HumanPlan(rearm=(1,)).writes


def _incident(severity: Severity, route: Route) -> Incident:
    incident = dataclasses.replace(make_incident("sess_1", owner=None), severity=severity)
    recipient = None if route is Route.HUMAN else "lead-a"
    reason = RoutingReason.HUMAN_NO_OWNER if route is Route.HUMAN else RoutingReason.OWNER
    return incident.routed(
        Assignment(route=route, recipient=recipient, reason=reason, generation=1)
    )


def test_the_policy_reads_an_incident_s_route_and_severity() -> None:
    """``leg_of`` takes the route and whether the incident is critical from the incident, and
    the journal's stored events as they are."""
    incident = _incident(Severity.CRITICAL, Route.HUMAN)
    events = (ev(1, OPEN, DELIVERED),)
    assert leg_of(incident, resolved=True, events=events) == Leg(
        route=Route.HUMAN, critical=True, resolved=True, events=events
    )
    warning = _incident(Severity.WARNING, Route.LEAD)
    assert leg_of(warning, resolved=False) == Leg(
        route=Route.LEAD, critical=False, resolved=False, events=()
    )


def test_the_policy_decides_with_io_clock_and_adapters_blocked() -> None:
    """Purity: the policy imports and decides with sockets, asyncio, logging, randomness, the
    database and HTTP libraries and every adapter package blocked."""
    blocked = ["asyncio", "socket", "logging", "random", "secrets", "threading", "subprocess"]
    blocked += ["httpx", "sqlalchemy", "sqlmodel", "aio_pika", "fastapi", "yaml"]
    blocked += ["fleetd.runtime", "fleetd.api", "fleetd.herdr", "fleetd.inbox", "fleetd.bridge"]
    blocked += ["fleetd.journal", "fleetd.notify.payload", "fleetd.config"]
    snippet = """
from datetime import UTC, datetime, timedelta
from fleetd.health.incidents import Route
from fleetd.notify.core.policy import Leg, plan
now = datetime(2026, 1, 1, tzinfo=UTC)
leg = Leg(route=Route.HUMAN, critical=True, resolved=False)
decided = plan(leg, notify=True, receivers="snk_a", repeat=timedelta(hours=1), now=now)
print(",".join(kind.value for kind in decided.record))
"""
    assert run_blocked(blocked, snippet) == "open"


def test_a_refreshing_sink_gets_every_open_incident_re_posted() -> None:
    """With a refresh (alertmanager mode) an open incident of any severity whose person was
    told gets a reminder every refresh after the last delivery; a pending one is the re-post;
    without a refresh a non-critical incident gets none."""
    refresh = timedelta(minutes=1)
    told = leg(ev(1, OPEN, DELIVERED), critical=False)
    later = T0 + refresh

    def decided(case: Leg, now: datetime, every: timedelta | None) -> HumanPlan:
        return plan(case, notify=True, receivers="snk_a", repeat=REPEAT, now=now, refresh=every)

    assert decided(told, later, refresh) == HumanPlan(record=(REMINDER,))
    assert decided(told, later - timedelta(seconds=1), refresh) == HumanPlan(recheck_at=later)
    assert decided(told, later, None) == EMPTY
    pending = leg(ev(1, OPEN, DELIVERED), ev(2, REMINDER, PENDING), critical=False)
    assert decided(pending, later, refresh) == EMPTY
    closed = leg(ev(1, OPEN, DELIVERED), ev(2, REMINDER, PENDING), resolved=True, critical=False)
    assert decided(closed, later, refresh) == HumanPlan(record=(RESOLVED,), cancel=(2,))
