"""A three-state circuit breaker for one outbound endpoint.

Theory of operation
-------------------
``CLOSED`` is normal: every consult is admitted. ``open_after`` consecutive *strikes* (blind
failures, see :mod:`fleetd.resilience.classify`) open it; any answer from the endpoint — success,
throttle, auth or request error — breaks the run of strikes. ``OPEN`` admits nothing until its
cooldown has passed; the first consult after that moves it to ``HALF_OPEN`` and *is* the probe.
``HALF_OPEN`` admits exactly one probe at a time and only the probe's outcome decides: an answer
closes the breaker and resets the cooldown; a strike opens it again with the cooldown doubled, up
to ``cooldown_cap`` (5 s → 10 → 20 → 40 → 60 s). A probe that ends without an outcome (cancelled)
is handed back with :meth:`Breaker.abandon`, and the next consult probes instead.

There is no timer: the cooldown is compared with ``now`` when the breaker is consulted (RFC 0018
§4.2). Every admission returns a :class:`Permit` stamped with the breaker's epoch; the epoch moves
on every open, probe and close, so an outcome that arrives after the state moved on (a call
admitted while closed, finishing after the breaker opened) is stale and ignored. That is what makes
"one probe, and only its outcome decides" exact even with many calls in flight.

A :class:`Breaker` is a frozen value: :meth:`~Breaker.admit`, :meth:`~Breaker.record` and
:meth:`~Breaker.abandon` return the next one. The caller keeps the current value and replaces it in
the same synchronous step (never across an ``await``). Every state change is one row of
:data:`TRANSITIONS`; the threshold and the cooldown clock are the rules that choose the event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from fleetd.errors import IllegalTransitionError
from fleetd.resilience.budget import doubled
from fleetd.resilience.classify import TRAITS, ErrorClass

__all__ = [
    "TRANSITIONS",
    "Breaker",
    "BreakerEvent",
    "BreakerPolicy",
    "BreakerState",
    "Permit",
    "next_breaker_state",
]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class BreakerEvent(StrEnum):
    ANSWER = "answer"
    STRIKE = "strike"
    TRIP = "trip"
    PROBE = "probe"
    PROBE_ANSWERED = "probe_answered"
    PROBE_STRUCK = "probe_struck"
    PROBE_ABANDONED = "probe_abandoned"


S, V = BreakerState, BreakerEvent

#: (state, event) -> (next state, cause). The only legal moves.
TRANSITIONS: dict[tuple[BreakerState, BreakerEvent], tuple[BreakerState, str]] = {
    (S.CLOSED, V.ANSWER): (S.CLOSED, "the endpoint answered: the run of strikes ends"),
    (S.CLOSED, V.STRIKE): (S.CLOSED, "a blind failure below the threshold"),
    (S.CLOSED, V.TRIP): (S.OPEN, "open_after consecutive blind failures: skip it for a cooldown"),
    (S.OPEN, V.PROBE): (S.HALF_OPEN, "the cooldown has passed: this consult is the one probe"),
    (S.HALF_OPEN, V.PROBE): (S.HALF_OPEN, "the last probe was abandoned: this consult probes"),
    (S.HALF_OPEN, V.PROBE_ANSWERED): (S.CLOSED, "the probe was answered: back in rotation"),
    (S.HALF_OPEN, V.PROBE_STRUCK): (S.OPEN, "the probe failed blind: open, cooldown doubled"),
    (S.HALF_OPEN, V.PROBE_ABANDONED): (S.HALF_OPEN, "the probe ended without an outcome"),
}


def next_breaker_state(state: BreakerState, event: BreakerEvent) -> BreakerState:
    """The state after ``event``, or :class:`~fleetd.errors.IllegalTransitionError`."""
    row = TRANSITIONS.get((state, event))
    if row is None:
        raise IllegalTransitionError("breaker", state.value, event.value)
    return row[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerPolicy:
    """RFC 0018 §4.2 defaults: open after 3 strikes; cooldown 5 s, doubling per reopen, cap 60 s."""

    open_after: int = 3
    cooldown: timedelta = timedelta(seconds=5)
    cooldown_cap: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        if self.open_after < 1:
            raise ValueError("BreakerPolicy.open_after must be at least 1")
        if self.cooldown <= timedelta(0):
            raise ValueError("BreakerPolicy.cooldown must be positive")
        if self.cooldown_cap < self.cooldown:
            raise ValueError("BreakerPolicy.cooldown_cap must not be below cooldown")

    def cooldown_for(self, openings: int) -> timedelta:
        """The cooldown of the ``openings``-th consecutive opening (1 = first), capped."""
        return doubled(self.cooldown, openings - 1, self.cooldown_cap)


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave to dial once: hand it back with the outcome (or to :meth:`Breaker.abandon`)."""

    epoch: int
    probe: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    """One endpoint's breaker. ``openings``: consecutive opens since it last closed."""

    state: BreakerState = BreakerState.CLOSED
    strikes: int = 0
    openings: int = 0
    opened_at: datetime | None = None
    cooldown: timedelta = timedelta(0)
    probing: bool = False
    epoch: int = 0

    def __post_init__(self) -> None:
        if (self.state is S.CLOSED) != (self.opened_at is None):
            raise ValueError("a breaker has an opening time exactly when it is not closed")
        if self.probing and self.state is not S.HALF_OPEN:
            raise ValueError("only a half-open breaker has a probe out")

    @property
    def ready_at(self) -> datetime | None:
        """When an open breaker's cooldown ends (``None`` while closed)."""
        return None if self.opened_at is None else self.opened_at + self.cooldown

    def state_at(self, now: datetime) -> BreakerState:
        """The state a consult at ``now`` would see: open past its cooldown reads half-open."""
        if self.state is S.OPEN and self._cooled(now):
            return S.HALF_OPEN
        return self.state

    def admits(self, now: datetime) -> bool:
        """Whether :meth:`admit` at ``now`` would hand out a permit (no state change)."""
        if self.state is S.CLOSED:
            return True
        if self.state is S.OPEN:
            return self._cooled(now)
        return not self.probing

    def admit(self, now: datetime) -> tuple[Breaker, Permit | None]:
        """A permit to dial, and the breaker after handing it out; ``None`` while refusing."""
        if self.state is S.CLOSED:
            return self, Permit(self.epoch, False)
        if not self.admits(now):
            return self, None
        nxt = next_breaker_state(self.state, V.PROBE)
        probe = self._moved(nxt, probing=True)
        return probe, Permit(probe.epoch, True)

    def record(
        self, permit: Permit, error: ErrorClass | None, now: datetime, policy: BreakerPolicy
    ) -> Breaker:
        """The breaker after the permitted attempt ended with ``error`` (``None``: success)."""
        if permit.epoch != self.epoch or (error is not None and not TRAITS[error].dialed):
            return self
        strike = error is not None and TRAITS[error].strike
        if permit.probe:
            if not strike:
                closed = next_breaker_state(self.state, V.PROBE_ANSWERED)
                return Breaker(state=closed, epoch=self.epoch + 1)
            return self._open(V.PROBE_STRUCK, now, policy)
        if not strike:
            if self.strikes == 0:
                return self
            return Breaker(state=next_breaker_state(self.state, V.ANSWER), epoch=self.epoch)
        if self.strikes + 1 >= policy.open_after:
            return self._open(V.TRIP, now, policy)
        state = next_breaker_state(self.state, V.STRIKE)
        return Breaker(state=state, strikes=self.strikes + 1, epoch=self.epoch)

    def abandon(self, permit: Permit) -> Breaker:
        """Hand back a permit whose attempt ended without an outcome; a probe frees its slot."""
        if not permit.probe or permit.epoch != self.epoch:
            return self
        return self._moved(next_breaker_state(self.state, V.PROBE_ABANDONED), probing=False)

    def _open(self, event: BreakerEvent, now: datetime, policy: BreakerPolicy) -> Breaker:
        openings = self.openings + 1
        return Breaker(
            state=next_breaker_state(self.state, event),
            strikes=self.strikes + 1,
            openings=openings,
            opened_at=now,
            cooldown=policy.cooldown_for(openings),
            epoch=self.epoch + 1,
        )

    def _cooled(self, now: datetime) -> bool:
        ready = self.ready_at
        return ready is not None and now >= ready

    def _moved(self, state: BreakerState, *, probing: bool) -> Breaker:
        return Breaker(
            state=state,
            strikes=self.strikes,
            openings=self.openings,
            opened_at=self.opened_at,
            cooldown=self.cooldown,
            probing=probing,
            epoch=self.epoch + 1,
        )
