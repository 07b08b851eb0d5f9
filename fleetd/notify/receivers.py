"""Which webhook receiver takes an attempt: the ordered list, a breaker per receiver, the sweep.

Theory of operation
-------------------
:class:`Receivers` keeps the configured receiver URLs with a :class:`~fleetd.resilience.Pool`
(one endpoint per URL, labelled by its index — never by its URL). Each attempt to deliver an
event is one bounded failover sweep (:func:`~fleetd.resilience.next_attempt` /
:func:`~fleetd.resilience.settle`), the same machinery the AMQP inbox uses for its brokers:

* **sticky primary** — the lowest-index receiver whose breaker admits is dialed first; once a
  primary's cooldown has passed, the next attempt is its one half-open probe, and when that is
  answered every later attempt goes back to it;
* **failover** — a failover-class failure (refused, reset, timeout, 5xx, a throttle; see
  :mod:`fleetd.notify.core.failover`) moves the *same* attempt to the next receiver: same body, same
  ``webhook-id``, signed anew for that dial. Each receiver is dialed at most once per attempt,
  and none after the attempt's deadline (the claim's lease less one request limit);
* **no failover** — 401/403, 408, other 4xx: the attempt ends on that receiver, and the retry
  table decides (permanent for the event, or a retry later);
* **breakers** — three blind failures in a row open a receiver's breaker for 5 s, doubling per
  reopening up to 60 s; a throttle (429, or 503 with Retry-After) never strikes;
* **disabled** — a receiver that answers 410 Gone is retiring itself (Standard Webhooks: disable
  the endpoint). It is disabled at once, in the same synchronous step as its dial, with one WARN:
  no later sweep dials it, the attempt that heard the 410 goes on to the next receiver, and with
  every receiver disabled nothing is claimed (:meth:`admits`). It stays disabled until an
  operator acts — a config change that makes a new target generation, or a replay
  (:meth:`enable`) — never by itself.

The pool is replaced in the same synchronous step as the dial that produced it, never across an
``await``, so the concurrent sends of one pass share the breakers exactly. :meth:`repoint` takes
a reloaded list: receivers still listed (same URL) keep their breaker and health, a new or
repointed one starts closed and fresh, and the *epoch* moves on so an attempt begun on the old
list finishes there and records nothing in the new one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleetd.clock import Clock
from fleetd.notify.core.failover import Dialed, SweepResult, outcome_of
from fleetd.notify.core.retry import PostResult
from fleetd.resilience import (
    BreakerPolicy,
    BreakerState,
    Endpoint,
    ErrorClass,
    FailoverBudget,
    GiveUp,
    Pool,
    Settled,
    Sweep,
    next_attempt,
    settle,
)

__all__ = ["ReceiverReport", "Receivers", "Send"]

_log = logging.getLogger("fleetd.notify")

Send = Callable[[int, str], Awaitable[PostResult]]
"""Dial receiver ``index`` at ``url`` once with the event (signed for this dial)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverReport:
    """The receivers for the surfaces: their pool, the one in use, which are disabled, and
    whether all are down.

    ``active`` is the lowest-index enabled receiver whose breaker is closed; ``all_down`` holds
    while none is (an open or half-open breaker, or a 410, everywhere: nothing can be sent now).
    """

    pool: Pool
    active: int | None
    disabled: frozenset[int] = field(default_factory=frozenset)
    #: The sink kind the receivers take events in (``health.notifications.mode``).
    kind: str = "webhook"

    @property
    def all_down(self) -> bool:
        return self.active is None


class Receivers:
    """The webhook receiver URLs in failover order, with their pool."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        clock: Clock,
        policy: BreakerPolicy | None = None,
        kind: str = "webhook",
    ) -> None:
        if not urls:
            raise ValueError("at least one receiver URL is needed")
        self.kind = kind  # the sink kind (mode) they take events in: a label on the surfaces
        self._clock = clock
        self._policy = policy or BreakerPolicy()
        self.urls = tuple(urls)
        self.pool = self._pool(self.urls, {})
        self.epoch = 0
        self._gone: set[str] = set()  # URLs that answered 410: disabled until enable()

    def repoint(self, urls: Sequence[str]) -> bool:
        """Take a new list; True when it differs from the one in use."""
        urls = tuple(urls)
        if not urls or urls == self.urls:
            return False
        kept = dict(zip(self.urls, self.pool.endpoints, strict=True))
        self.urls = urls
        self.pool = self._pool(urls, kept)
        self._gone &= set(urls)
        self.epoch += 1
        _log.info("%s receivers changed: %d listed", self.kind, len(urls))
        return True

    @property
    def disabled(self) -> frozenset[int]:
        """The indexes of the receivers disabled by a 410."""
        return frozenset(i for i, url in enumerate(self.urls) if url in self._gone)

    def enable(self) -> int:
        """Re-enable every disabled receiver (the operator acted); how many were disabled."""
        count = len(self.disabled)
        self._gone.clear()
        if count:
            _log.info("%s receivers re-enabled: %d", self.kind, count)
        return count

    def admits(self, now: datetime) -> bool:
        """Some enabled receiver would take a dial at ``now`` (a closed breaker or a probe due)."""
        disabled = self.disabled
        return any(
            index not in disabled and endpoint.breaker.admits(now)
            for index, endpoint in enumerate(self.pool.endpoints)
        )

    def any_closed(self, now: datetime) -> bool:
        """Some enabled receiver's breaker is closed at ``now`` (half-open ones take one probe
        each)."""
        return self.report(now).active is not None

    def states(self, now: datetime) -> tuple[BreakerState, ...]:
        """Each receiver's breaker state at ``now``, in list order."""
        return tuple(endpoint.breaker.state_at(now) for endpoint in self.pool.endpoints)

    def report(self, now: datetime) -> ReceiverReport:
        disabled = self.disabled
        active = next(
            (
                i
                for i, state in enumerate(self.states(now))
                if state is BreakerState.CLOSED and i not in disabled
            ),
            None,
        )
        return ReceiverReport(pool=self.pool, active=active, disabled=disabled, kind=self.kind)

    async def sweep(self, send: Send, *, deadline: datetime) -> SweepResult:
        """One attempt across the receivers, no dial starting at or after ``deadline``."""
        epoch, urls = self.epoch, self.urls
        now = self._clock.now()
        if deadline <= now:
            return SweepResult()
        sweep = Sweep.start(FailoverBudget(attempts=len(urls), total=deadline - now), now)
        dialed: list[Dialed] = []
        while epoch == self.epoch:
            sweep = dataclasses.replace(sweep, tried=sweep.tried | self._disabled_bits())
            self.pool, sweep, step = next_attempt(self.pool, sweep, self._clock.now())
            if isinstance(step, GiveUp):
                break
            started = self._clock.monotonic()
            try:
                attempt = await send(step.index, urls[step.index])
            except BaseException:  # cancelled: a probe this dial held is freed
                if epoch == self.epoch:
                    self.pool = self.pool.release(step)
                raise
            dialed.append(Dialed(step.index, attempt))
            if epoch != self.epoch:  # the list changed meanwhile: this dial stands as it is
                break
            done = self._clock.now()
            latency = self._clock.monotonic() - started
            outcome = outcome_of(attempt, latency=_seconds(latency), now=done)
            was = self.pool.endpoints[step.index].breaker.state
            self.pool, sweep, settled = settle(self.pool, sweep, step, outcome, done)
            if outcome.error is ErrorClass.GONE:
                self._disable(step.index)
            breaker = self.pool.endpoints[step.index].breaker
            if breaker.state is BreakerState.OPEN and was is not BreakerState.OPEN:
                _log.warning(
                    "%s receiver %d: breaker open after %s for %.0f s",
                    self.kind,
                    step.index,
                    outcome.error.value if outcome.error is not None else "failures",
                    breaker.cooldown.total_seconds(),
                )
            if settled is not Settled.NEXT:
                break
        return SweepResult(dialed=tuple(dialed), retry_at=sweep.retry_at)

    def _disabled_bits(self) -> int:
        return sum(1 << index for index in self.disabled)

    def _disable(self, index: int) -> None:
        url = self.urls[index]
        if url in self._gone:
            return
        self._gone.add(url)
        _log.warning(
            "%s receiver %d answered 410 Gone: disabled until its receivers change (a URL, "
            "the secret or the sink kind) or an operator replays an incident",
            self.kind,
            index,
        )

    def _pool(self, urls: tuple[str, ...], kept: dict[str, Endpoint]) -> Pool:
        endpoints = tuple(
            Endpoint(name=str(index), breaker=kept[url].breaker, health=kept[url].health)
            if url in kept
            else Endpoint(name=str(index))
            for index, url in enumerate(urls)
        )
        return Pool(endpoints=endpoints, breaker_policy=self._policy)


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=max(0.0, value))
