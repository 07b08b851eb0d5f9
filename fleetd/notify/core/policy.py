"""What a person is told about one incident: the human leg's only decision (M4 §10.1–§10.4).

Theory of operation. A person hears of an incident through its outbound events, recorded in the
journal and delivered by the sink worker: ``open``, ``reminder`` and ``resolved`` (the journal
still knows ``severity_changed``, which this build never records: an incident's severity is fixed
when it opens, and a change of state is a new incident). :func:`plan` looks at one incident as it
stands — routed to a person or not, critical or not, resolved or not — and at the events already
recorded for it, and returns what must change so that the person's view is right:

* ``record``: events to add, in this order (revisions follow the last recorded one);
* ``cancel``: revisions that must never go out (pending or permanently failed);
* ``rearm``: permanently failed revisions to try again now;
* ``recheck_at``: when the incident needs another look even if nothing else changes (its next
  reminder).

It is a reconciliation, not a reaction: the shell calls it whenever it has the incident in hand
(a change from health, a periodic sweep, a delivery, the mode turned on, a new receiver list, an
operator's replay) and carries out what comes back; once that is done the same call returns an
empty plan. So a journal that was away, notifications off for a while, a receiver that refused,
or a restart only delay what a person is told, never change it. The rules, in order:

1. **Resolved.** Every pending or failed ``open``/``reminder`` is cancelled (nothing about an
   incident that is over may still go out). If the person was told (an earlier event was
   delivered) or may have been (an event is ``in_doubt``: its request went out under a lease
   that recorded nothing — a sender killed after the receiver had it, or still in flight), and
   no ``resolved`` event exists, one is recorded — exactly one, ever. A failed ``resolved`` is
   re-armed on a replay or for a new receiver list. A ``resolved`` recorded while an ``open``
   was in doubt, whose doubt then ended without a delivery (the receiver refused it for good),
   is cancelled if it has not gone out: the person was told nothing.
2. **Open, with a person** (``route`` is ``human``). If no ``open`` is pending, delivered or
   failed, one is recorded (again after a lead held the incident and its undelivered ``open``
   was cancelled). A failed ``open`` or ``reminder`` is re-armed on a replay or for a new
   receiver list. A critical incident whose person was told, with nothing pending or refused,
   gets a ``reminder`` every ``repeat`` counted from the last delivery. A sink that forgets an
   alert that stops arriving (Alertmanager, after its ``resolve_timeout``) gives a ``refresh``:
   then *every* open incident whose person was told gets a ``reminder`` every ``refresh`` (the
   sink, not fleetd, decides when a person hears again), on the same terms.
3. **Open, with a lead or nobody.** Every pending or failed ``open``/``reminder`` is cancelled:
   a lead can act, so a person is not paged; what was delivered stays delivered, and rule 1
   tells that person of the resolution.

With notifications off, no ``open`` or ``reminder`` is recorded and nothing is re-armed
(cancellations still apply); a ``resolved`` owed to a person who was told is recorded and waits,
pending like any event, until they are on again. Turning them on makes the next call record
what is owed. A failed event is re-armed for a new
receiver list when the receivers that refused it (``failed_by``) are not the configured ones
(unnamed refusals count as another list; while the configured list cannot be resolved, nothing
is re-armed for it).

Pure: values in, a value out; no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from fleetd.health.incidents import Incident, Route
from fleetd.health.states import Severity
from fleetd.model.events import EventState, EventType

__all__ = ["EMPTY", "HumanPlan", "Leg", "Told", "leg_of", "plan"]


class Told(Protocol):
    """What the policy reads of one recorded event (the journal's ``StoredEvent`` is one)."""

    @property
    def type(self) -> EventType: ...
    @property
    def revision(self) -> int: ...
    @property
    def state(self) -> EventState: ...
    @property
    def delivered_at(self) -> datetime | None: ...
    @property
    def failed_by(self) -> str | None: ...
    @property
    def in_doubt(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Leg:
    """One incident as the policy sees it: where it stands and what was recorded for it."""

    route: Route | None  # ``None`` before its first routing
    critical: bool
    resolved: bool
    events: Sequence[Told] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class HumanPlan:
    """What to do about one incident; :data:`EMPTY` when nothing is owed."""

    record: tuple[EventType, ...] = ()
    cancel: tuple[int, ...] = ()
    rearm: tuple[int, ...] = ()
    recheck_at: datetime | None = None

    @property
    def writes(self) -> bool:
        """Whether carrying the plan out writes anything."""
        return bool(self.record or self.cancel or self.rearm)


EMPTY = HumanPlan()

_TOLD = (EventType.OPEN, EventType.REMINDER, EventType.SEVERITY_CHANGED)
_LIVE = (EventState.PENDING, EventState.DELIVERED, EventState.FAILED)
_UNSENT = (EventState.PENDING, EventState.FAILED)


def leg_of(incident: Incident, *, resolved: bool, events: Sequence[Told] = ()) -> Leg:
    """The policy's view of ``incident`` with the events recorded for it."""
    return Leg(
        route=incident.route,
        critical=incident.severity is Severity.CRITICAL,
        resolved=resolved,
        events=events,
    )


def plan(
    leg: Leg,
    *,
    notify: bool,
    receivers: str | None,
    replay: bool = False,
    repeat: timedelta,
    now: datetime,
    refresh: timedelta | None = None,
) -> HumanPlan:
    """What must change for ``leg`` (module docstring). ``notify``: notifications are on;
    ``receivers``: the configured receiver list's generation (``None`` when unknown);
    ``replay``: an operator asked for this incident; ``repeat``: the reminder interval;
    ``refresh``: the re-post interval of a sink that forgets alerts, for every severity."""
    told = tuple(e for e in leg.events if e.type in _TOLD)
    delivered = any(e.state is EventState.DELIVERED for e in told)
    unsent = tuple(e.revision for e in told if e.state in _UNSENT)
    if leg.resolved:
        closing = tuple(e for e in leg.events if e.type is EventType.RESOLVED)
        maybe_told = delivered or any(e.in_doubt for e in told)
        if not maybe_told:  # told nothing after all: a resolved not yet out never goes
            withdrawn = tuple(e.revision for e in closing if e.state in _UNSENT and not e.in_doubt)
            return HumanPlan(cancel=unsent + withdrawn)
        record = () if closing else (EventType.RESOLVED,)
        rearm = _rearmed(closing, notify=notify, receivers=receivers, replay=replay)
        return HumanPlan(record=record, cancel=unsent, rearm=rearm)
    if leg.route is not Route.HUMAN:
        return HumanPlan(cancel=unsent)
    if not notify:
        return EMPTY
    opened = any(e.type is EventType.OPEN and e.state in _LIVE for e in told)
    rearm = _rearmed(told, notify=notify, receivers=receivers, replay=replay)
    if not opened:
        return HumanPlan(record=(EventType.OPEN,), rearm=rearm)
    if refresh is not None:
        due = _reminder_due(told, critical=True, repeat=refresh)
    else:
        due = _reminder_due(told, critical=leg.critical, repeat=repeat)
    if due is not None and due <= now and not rearm:
        return HumanPlan(record=(EventType.REMINDER,))
    return HumanPlan(rearm=rearm, recheck_at=due)


def _rearmed(
    events: Sequence[Told], *, notify: bool, receivers: str | None, replay: bool
) -> tuple[int, ...]:
    if not notify:
        return ()
    return tuple(
        e.revision
        for e in events
        if e.state is EventState.FAILED
        and (replay or (receivers is not None and e.failed_by != receivers))
    )


def _reminder_due(told: Sequence[Told], *, critical: bool, repeat: timedelta) -> datetime | None:
    """When the next reminder is due: a critical incident whose person was told, with nothing
    pending (an event still being told is the reminder) and nothing refused for good (it waits
    for a new receiver list or a replay, §10.4), ``repeat`` after the last delivery."""
    if not critical or any(e.state in _UNSENT for e in told):
        return None
    last = max((e.delivered_at for e in told if e.delivered_at is not None), default=None)
    return None if last is None else last + repeat
