"""An ordered endpoint list with sticky primary, and the bounded failover sweep of one call.

Theory of operation
-------------------
A :class:`Pool` is the ordered list of one dependency's endpoints (primary first), each with its
:class:`~fleetd.resilience.breaker.Breaker` and
:class:`~fleetd.resilience.endpoint.EndpointHealth`. :meth:`Pool.pick` hands out the lowest-index
endpoint whose breaker admits a dial. That one rule is the whole sticky-primary policy (RFC 0018
§3.3): while the primary is open the fallback serves; once the primary's cooldown passes, the next
call probes it; when the probe is answered the primary's breaker closes and every later call
returns to it. A fallback is temporary by construction. When no breaker admits, the pool is
*all down* (:meth:`Pool.all_down`) until the earliest cooldown ends (:meth:`Pool.ready_at`).

A :class:`Sweep` is one logical call (one webhook delivery, one connect, one catalog fetch). The
caller loops::

    sweep = Sweep.start(budget, now)
    while True:
        pool, sweep, step = next_attempt(pool, sweep, now)     # a Pick, or GiveUp
        ...dial step.index, within its own watchdog, never past sweep.deadline...
        pool, sweep, settled = settle(pool, sweep, step, outcome, now)
        # SUCCEEDED: done; STOPPED: the error is final (auth, request, body); NEXT: loop

Each endpoint is dialed at most once per sweep, at most ``budget.attempts`` dials in all, none
after the deadline. A failover-class failure moves on; any other failure stops at once — it would
be the same on every endpoint. A cancelled attempt goes back with :meth:`Pool.release` so a probe
it held is freed. The pool is a frozen value: keep the current one in one place and replace it in
the same synchronous step as the call that produced it, never across an ``await``; concurrent
sweeps then share the breakers exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from fleetd.resilience.breaker import Breaker, BreakerPolicy, BreakerState, Permit
from fleetd.resilience.budget import FailoverBudget
from fleetd.resilience.classify import TRAITS, ErrorClass, Outcome
from fleetd.resilience.endpoint import EndpointHealth, HealthPolicy

__all__ = [
    "Endpoint",
    "GiveUp",
    "GiveUpReason",
    "Pick",
    "Pool",
    "Settled",
    "Sweep",
    "next_attempt",
    "settle",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """One endpoint by its configured name (a bounded label, never a URL), with its records."""

    name: str
    breaker: Breaker = field(default_factory=Breaker)
    health: EndpointHealth = field(default_factory=EndpointHealth)


@dataclass(frozen=True, slots=True)
class Pick:
    """Leave to dial endpoint ``index`` once; hand it back to :meth:`Pool.record` or release."""

    index: int
    name: str
    permit: Permit


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    endpoints: tuple[Endpoint, ...]
    breaker_policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    health_policy: HealthPolicy = field(default_factory=HealthPolicy)

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("a Pool needs at least one endpoint")
        if len({e.name for e in self.endpoints}) != len(self.endpoints):
            raise ValueError("Pool endpoint names must be unique")

    @classmethod
    def of(
        cls,
        *names: str,
        breaker_policy: BreakerPolicy | None = None,
        health_policy: HealthPolicy | None = None,
    ) -> Pool:
        """A fresh pool (every breaker closed) over ``names``, primary first."""
        return cls(
            endpoints=tuple(Endpoint(name=name) for name in names),
            breaker_policy=breaker_policy or BreakerPolicy(),
            health_policy=health_policy or HealthPolicy(),
        )

    def pick(self, now: datetime, *, skip: int = 0) -> tuple[Pool, Pick | None]:
        """The lowest-index endpoint that admits a dial (not in the ``skip`` bit set)."""
        for index, endpoint in enumerate(self.endpoints):
            if skip >> index & 1:
                continue
            breaker, permit = endpoint.breaker.admit(now)
            if permit is not None:
                pool = self
                if breaker is not endpoint.breaker:
                    pool = self._with(index, breaker, endpoint.health)
                return pool, Pick(index, endpoint.name, permit)
        return self, None

    def record(self, pick: Pick, outcome: Outcome, now: datetime) -> Pool:
        """The pool after the picked attempt ended with ``outcome`` (a stale pick: unchanged)."""
        endpoint = self._endpoint(pick)
        if endpoint is None:
            return self
        breaker = endpoint.breaker.record(pick.permit, outcome.error, now, self.breaker_policy)
        health = endpoint.health.observe(outcome, now, self.health_policy)
        if breaker is endpoint.breaker and health is endpoint.health:
            return self
        return self._with(pick.index, breaker, health)

    def observe(self, index: int, outcome: Outcome, now: datetime) -> Pool:
        """The pool after a call over an already established link to endpoint ``index`` (a
        connection kept open between calls, so no permit was taken). Its health always learns
        the outcome; its breaker only while closed, where a run of strikes opens it as if each
        call had dialed. An out-of-range index changes nothing."""
        if not 0 <= index < len(self.endpoints):
            return self
        endpoint = self.endpoints[index]
        if endpoint.breaker.state is BreakerState.CLOSED:
            permit = Permit(endpoint.breaker.epoch, probe=False)
            return self.record(Pick(index, endpoint.name, permit), outcome, now)
        health = endpoint.health.observe(outcome, now, self.health_policy)
        return self if health is endpoint.health else self._with(index, endpoint.breaker, health)

    def release(self, pick: Pick) -> Pool:
        """The pool after the picked attempt ended without an outcome (cancelled)."""
        endpoint = self._endpoint(pick)
        if endpoint is None:
            return self
        breaker = endpoint.breaker.abandon(pick.permit)
        return self if breaker is endpoint.breaker else self._with(pick.index, breaker, None)

    def active(self, now: datetime) -> int | None:
        """The index the next call would try first; ``None`` when all are down."""
        for index, endpoint in enumerate(self.endpoints):
            if endpoint.breaker.admits(now):
                return index
        return None

    def all_down(self, now: datetime) -> bool:
        """No endpoint would admit a dial at ``now``."""
        return self.active(now) is None

    def ready_at(self) -> datetime | None:
        """The earliest end of an open breaker's cooldown (``None`` if none is open)."""
        times = [e.breaker.ready_at for e in self.endpoints if e.breaker.ready_at is not None]
        return min(times, default=None)

    def _endpoint(self, pick: Pick) -> Endpoint | None:
        if pick.index >= len(self.endpoints) or self.endpoints[pick.index].name != pick.name:
            return None
        return self.endpoints[pick.index]

    def _with(self, index: int, breaker: Breaker, health: EndpointHealth | None) -> Pool:
        old = self.endpoints[index]
        new = Endpoint(
            name=old.name, breaker=breaker, health=old.health if health is None else health
        )
        endpoints = (*self.endpoints[:index], new, *self.endpoints[index + 1 :])
        return Pool(
            endpoints=endpoints,
            breaker_policy=self.breaker_policy,
            health_policy=self.health_policy,
        )


class GiveUpReason(StrEnum):
    ALL_DOWN = "all_down"  # no endpoint admitted a dial: nothing was tried
    EXHAUSTED = "exhausted"  # every endpoint that admitted a dial failed over
    ATTEMPTS_SPENT = "attempts_spent"  # the budget's dial count is used up
    DEADLINE = "deadline"  # the budget's time is used up


class Settled(StrEnum):
    SUCCEEDED = "succeeded"
    STOPPED = "stopped"  # a failure no other endpoint would change: the call ends with it
    NEXT = "next"  # a failover-class failure: ask next_attempt for another endpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class GiveUp:
    """The sweep ends without a success.

    ``last_error`` is the last attempt's class (``CIRCUIT_OPEN`` when nothing was dialed);
    ``ready_at`` the earliest breaker cooldown end; ``retry_at`` the latest time a throttling
    server asked us to wait until. Either may be ``None``.
    """

    reason: GiveUpReason
    last_error: ErrorClass
    ready_at: datetime | None = None
    retry_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """The state of one logical call across endpoints. ``tried``: bit set of dialed indexes."""

    deadline: datetime
    attempts_left: int
    tried: int = 0
    last_error: ErrorClass | None = None
    retry_at: datetime | None = None

    @classmethod
    def start(cls, budget: FailoverBudget, now: datetime) -> Sweep:
        return cls(deadline=now + budget.total, attempts_left=budget.attempts)


def next_attempt(pool: Pool, sweep: Sweep, now: datetime) -> tuple[Pool, Sweep, Pick | GiveUp]:
    """The next endpoint to dial in this sweep, or why the sweep gives up."""
    reason: GiveUpReason | None = None
    if now >= sweep.deadline:
        reason = GiveUpReason.DEADLINE
    elif sweep.attempts_left <= 0:
        reason = GiveUpReason.ATTEMPTS_SPENT
    else:
        pool, pick = pool.pick(now, skip=sweep.tried)
        if pick is not None:
            sweep = Sweep(
                deadline=sweep.deadline,
                attempts_left=sweep.attempts_left - 1,
                tried=sweep.tried | 1 << pick.index,
                last_error=sweep.last_error,
                retry_at=sweep.retry_at,
            )
            return pool, sweep, pick
        reason = GiveUpReason.EXHAUSTED if sweep.tried else GiveUpReason.ALL_DOWN
    give_up = GiveUp(
        reason=reason,
        last_error=sweep.last_error or ErrorClass.CIRCUIT_OPEN,
        ready_at=pool.ready_at(),
        retry_at=sweep.retry_at,
    )
    return pool, sweep, give_up


def settle(
    pool: Pool, sweep: Sweep, pick: Pick, outcome: Outcome, now: datetime
) -> tuple[Pool, Sweep, Settled]:
    """Record the attempt's outcome; say whether the call succeeded, stopped, or moves on."""
    pool = pool.record(pick, outcome, now)
    if outcome.error is None:
        return pool, sweep, Settled.SUCCEEDED
    retry_at = sweep.retry_at
    if outcome.retry_after is not None:
        advised = now + outcome.retry_after
        retry_at = advised if retry_at is None else max(retry_at, advised)
    sweep = Sweep(
        deadline=sweep.deadline,
        attempts_left=sweep.attempts_left,
        tried=sweep.tried,
        last_error=outcome.error,
        retry_at=retry_at,
    )
    return pool, sweep, Settled.NEXT if TRAITS[outcome.error].failover else Settled.STOPPED
