"""Which broker to connect to: the ordered list, its breakers and health, and the sweep.

:class:`Brokers` keeps the configured URLs with a :class:`~fleetd.resilience.Pool` (one endpoint
per URL, labelled by its index — never by its URL) and finds a connection with one bounded
failover sweep (:func:`~fleetd.resilience.next_attempt` / :func:`~fleetd.resilience.settle`):
the lowest-index broker whose breaker admits is dialed first, each at most once, a refused,
reset or timed-out dial moves on, an authentication failure ends the sweep. With one URL the
breaker never opens (exactly the single-broker behaviour) and only the health record learns.

With several brokers the log says once when a broker stops answering (a WARNING naming its index
and the error class) and once when it answers again (an INFO): the return-to-primary probe that
dials a broker which is down once a minute adds nothing.

The pool is replaced in the same synchronous step as the attempt that produced it, so sweeps
running at once (a connect and a return-to-primary probe) share the breakers exactly.
:meth:`Brokers.repoint` swaps the list: brokers still listed keep their breaker and health, new
ones start closed and fresh, and the *epoch* moves on so an attempt begun on the old list records
nothing in the new one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TypeVar

from fleetd.clock import Clock
from fleetd.errors import InboxUnavailableError
from fleetd.inbox.amqp_connect import classify
from fleetd.resilience import (
    BreakerPolicy,
    Endpoint,
    FailoverBudget,
    GiveUp,
    Outcome,
    Pool,
    Settled,
    Sweep,
    next_attempt,
    settle,
)

__all__ = ["Brokers"]

G = TypeVar("G")

logger = logging.getLogger("fleetd.inbox")

#: The one broker's breaker never opens: one URL behaves exactly as it did before failover.
_INERT = BreakerPolicy(open_after=2**62)


class Brokers:
    """The broker URLs in failover order, with their pool."""

    def __init__(self, urls: Sequence[str], *, clock: Clock) -> None:
        if not urls:
            raise ValueError("at least one broker URL is needed")
        self._clock = clock
        self.urls = tuple(urls)
        self.pool = _pool(self.urls, {})
        self.epoch = 0

    @property
    def multi(self) -> bool:
        """Several brokers: failover is on."""
        return len(self.urls) > 1

    def repoint(self, urls: Sequence[str]) -> bool:
        """Take a new list; True when it differs from the one in use."""
        urls = tuple(urls)
        if not urls or urls == self.urls:
            return False
        kept = dict(zip(self.urls, self.pool.endpoints, strict=True))
        self.urls = urls
        self.pool = _pool(urls, kept)
        self.epoch += 1
        return True

    def observe(self, index: int, outcome: Outcome) -> None:
        """A call over a kept connection to broker ``index`` ended with ``outcome``."""
        was = self._answering(index)
        self.pool = self.pool.observe(index, outcome, self._clock.now())
        self._report(index, was)

    def admits(self, index: int) -> bool:
        """Broker ``index``'s breaker would let a call through now."""
        return self.pool.endpoints[index].breaker.admits(self._clock.now())

    def all_down(self) -> bool:
        """No broker's breaker would let a dial through now: a sweep would dial nothing."""
        return self.pool.all_down(self._clock.now())

    def lower_admits(self, index: int) -> bool:
        """A broker before ``index`` would be dialed first now (sticky primary)."""
        active = self.pool.active(self._clock.now())
        return active is not None and active < index

    async def dial_one(self, dial: Callable[[int, str], Awaitable[G]]) -> G:
        """Connect to the first broker, recording the outcome (the single-broker path)."""
        started = self._clock.monotonic()
        try:
            found = await dial(0, self.urls[0])
        except InboxUnavailableError as exc:
            self.observe(0, Outcome(error=classify(exc)))
            raise
        self.observe(0, Outcome(latency=self._since(started)))
        return found

    async def sweep(
        self,
        dial: Callable[[int, str], Awaitable[G]],
        discard: Callable[[G], Awaitable[None]],
        *,
        connect_timeout: float,
        before: int | None = None,
    ) -> G:
        """One bounded sweep (over the brokers before ``before`` only, when given): the first
        connection made, or :class:`~fleetd.errors.InboxUnavailableError`."""
        epoch = self.epoch
        budget = FailoverBudget(
            attempts=len(self.urls),
            total=timedelta(seconds=connect_timeout * len(self.urls) + 1.0),
        )
        sweep = Sweep.start(budget, self._clock.now())
        if before is not None:  # the brokers from ``before`` on count as tried already
            sweep = Sweep(
                deadline=sweep.deadline, attempts_left=sweep.attempts_left, tried=-(1 << before)
            )
        while True:
            if epoch != self.epoch:
                raise InboxUnavailableError("connect: the broker list changed meanwhile")
            self.pool, sweep, step = next_attempt(self.pool, sweep, self._clock.now())
            if isinstance(step, GiveUp):
                raise InboxUnavailableError(f"connect: no broker answered ({step.reason.value})")
            started = self._clock.monotonic()
            was = self._answering(step.index)
            try:
                found = await dial(step.index, self.urls[step.index])
            except InboxUnavailableError as exc:
                if epoch != self.epoch:
                    raise
                outcome = Outcome(error=classify(exc))
                self.pool, sweep, settled = settle(
                    self.pool, sweep, step, outcome, self._clock.now()
                )
                self._report(step.index, was)
                if settled is Settled.STOPPED:
                    raise
                continue
            except BaseException:
                if epoch == self.epoch:
                    self.pool = self.pool.release(step)
                raise
            if epoch != self.epoch:
                await discard(found)
                raise InboxUnavailableError("connect: the broker list changed meanwhile")
            outcome = Outcome(latency=self._since(started))
            self.pool, sweep, _ = settle(self.pool, sweep, step, outcome, self._clock.now())
            self._report(step.index, was)
            return found

    def _answering(self, index: int) -> bool | None:
        endpoints = self.pool.endpoints
        return endpoints[index].health.reachable if index < len(endpoints) else None

    def _report(self, index: int, was: bool | None) -> None:
        """One line as broker ``index`` stops answering, one as it answers again (several
        brokers only: with one, the link reports the inbox itself)."""
        if not self.multi or index >= len(self.pool.endpoints):
            return
        health = self.pool.endpoints[index].health
        if health.reachable is False and was is not False:
            error = "unknown" if health.last_error is None else health.last_error.value
            logger.warning("inbox broker %d does not answer (%s)", index, error)
        elif health.reachable is True and was is False:
            logger.info("inbox broker %d answers again", index)

    def _since(self, started: float) -> timedelta:
        return timedelta(seconds=max(0.0, self._clock.monotonic() - started))


def _pool(urls: tuple[str, ...], kept: dict[str, Endpoint]) -> Pool:
    endpoints = tuple(
        Endpoint(name=str(index), breaker=kept[url].breaker, health=kept[url].health)
        if url in kept
        else Endpoint(name=str(index))
        for index, url in enumerate(urls)
    )
    return Pool(endpoints=endpoints, breaker_policy=BreakerPolicy() if len(urls) > 1 else _INERT)
