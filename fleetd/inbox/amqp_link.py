"""The AMQP inbox's connection: one broker, or an ordered list of them, handed out as leases.

Theory of operation
-------------------
Every inbox operation runs inside :meth:`AmqpLink.lease`, which yields the channels of one live
connection (a :class:`~fleetd.inbox.amqp_connect.Generation`) and counts the lease on it. A
generation that is replaced — its broker failed, sticky primary moved back, a reload repointed
the list — is *retired*: no new lease gets it, and it is closed once its last lease ends. So a
call in flight always finishes on the connection it started on (RFC 0018 §5).

**One URL** is exactly the single-broker behaviour: aio-pika's robust connection reconnects on
its own, the first call to notice an outage waits at most :data:`RIDE_OUT_SECONDS` for it and
later ones not at all, and after a failed connect calls fail fast for :data:`RECONNECT_SECONDS`
before the next connect is tried.

**Several URLs** (``inbox.amqp.urls``, nodes of one cluster) add failover, with a breaker per
broker (:class:`~fleetd.inbox.amqp_brokers.Brokers`):

* a connect is one bounded sweep, lowest index first;
* a connection that drops is ridden out briefly, then struck and retired, and the sweep runs;
  three failed calls in a row on a kept connection open its breaker and do the same;
* while every broker is down, a background reconnect sweeps every
  :data:`~fleetd.inbox.amqp_connect.RECONNECT_INTERVAL` (breakers skip those cooling down) and
  calls fail at once: the inbox reports unreachable, so ``/readyz`` is not ready while
  ``/livez`` stays alive, and the first broker to answer resumes service. Readiness is this
  judgement and no other (:meth:`AmqpLink.reachable`): one failed call on a broker whose breaker
  still admits leaves fleetd ready, as it leaves failover on that broker;
* sticky primary: while on a fallback, a background probe dials the brokers before it whose
  breaker admits; the first to connect becomes the active generation and the fallback retires;
* a new connection re-declares the owned queues (durable, idempotent) before it serves.

Entries live on the broker that took them: with brokers that are *not* one cluster, what sits on
a broker fleetd has left is collected only once fleetd is connected to it again.

The log says each outage once (``fleetd serve`` keeps the broker client's own loggers, which
write a line per reconnect and probe, to CRITICAL): a WARNING as the inbox becomes unreachable,
an INFO as it is reachable again; per broker, likewise (:class:`~.amqp_brokers.Brokers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from fleetd.clock import Clock
from fleetd.errors import InboxUnavailableError
from fleetd.inbox.amqp_brokers import Brokers
from fleetd.inbox.amqp_connect import (
    RECONNECT_INTERVAL,
    Channels,
    Generation,
    OnConnect,
    classify,
    close_quietly,
    open_generation,
)
from fleetd.inbox.quarantine import QuarantineLaneFactory
from fleetd.resilience import ErrorClass, Outcome, Pool

__all__ = ["RECONNECT_SECONDS", "RIDE_OUT_SECONDS", "AmqpLink", "BrokerReport"]

logger = logging.getLogger("fleetd.inbox")

#: After a failed connect to the one broker, calls fail fast for this long before the next try.
RECONNECT_SECONDS = 5.0
#: How long a call waits for a reconnecting connection before it is refused.
RIDE_OUT_SECONDS = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerReport:
    """The link for the surfaces: the brokers' pool, the index in use, and reachability."""

    pool: Pool
    active: int | None
    reachable: bool


class AmqpLink:
    """The inbox's broker connection(s); see the module docstring."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        clock: Clock,
        connect_timeout: float,
        operation_timeout: float,
        lane_factory: QuarantineLaneFactory,
        on_connect: OnConnect | None = None,
    ) -> None:
        self._brokers = Brokers(urls, clock=clock)
        self._clock = clock
        self.connect_timeout = connect_timeout
        self.operation_timeout = operation_timeout
        self._lane_factory = lane_factory
        self._on_connect = on_connect
        self._gen: Generation | None = None
        self._changed = asyncio.Event()  # set (and replaced) whenever the generation changes
        self._lock = asyncio.Lock()
        self._closed = False
        self._reachable = True  # until an attempt says otherwise
        self._noted = True  # the reachability the log last reported
        self._connect_failed_at: float | None = None  # monotonic, of the last failed connect
        self._retiring: set[Generation] = set()  # retired, not closed yet
        self._background: set[asyncio.Task[None]] = set()
        self._reconnecting: asyncio.Task[None] | None = None
        self._returning: asyncio.Task[None] | None = None

    # -- what the inbox uses -------------------------------------------------------------------

    @property
    def multi(self) -> bool:
        return self._brokers.multi

    def reachable(self) -> bool:
        """Whether a call now would find a broker (``/readyz``, ``allDown``). One broker: its
        last attempt reached it. Several: failover's own judgement — no while every broker is
        known down (reconnecting) or no breaker admits a dial; else yes (a failed call is a
        strike, not an outage: failover waits for three)."""
        if self._closed:
            return False
        if not self.multi:
            return self._reachable
        gen = self._gen
        if gen is None and self._reconnecting is not None:
            return False
        if gen is not None and gen.up and self._brokers.admits(gen.index):
            return True
        return not self._brokers.all_down()

    def report(self) -> BrokerReport:
        """Where the link stands now, for ``fleet_list.dependencies`` and the metrics."""
        gen = self._gen
        return BrokerReport(
            pool=self._brokers.pool,
            active=gen.index if gen is not None and gen.up else None,
            reachable=self.reachable(),
        )

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Channels]:
        """The channels of a live connection for one operation; raises
        :class:`~fleetd.errors.InboxUnavailableError` soon when no broker can be reached."""
        gen = await self._connected()
        gen.leases += 1
        try:
            yield gen.channels
        finally:
            gen.leases -= 1
            if gen.retired and gen.leases == 0:
                self._spawn(self._close(gen))

    def succeeded(self, latency: float) -> None:
        """A call on the current connection was answered after ``latency`` seconds."""
        self._observe(Outcome(latency=timedelta(seconds=max(0.0, latency))))
        self._note()

    def failed(self, error: BaseException) -> None:
        """A call on the current connection failed: the broker is unreachable for now."""
        self._reachable = False
        self._observe(Outcome(error=classify(error)))
        self._note()

    async def wait_connected(self) -> None:
        """Wait until a connection is up (again); for tooling and tests that must not race the
        reconnect. Bound it with a timeout of your own."""
        while not self._closed:
            gen, changed = self._gen, self._changed
            if gen is not None and gen.up:
                return
            waits = [asyncio.ensure_future(changed.wait())]
            if gen is not None:
                waits.append(asyncio.ensure_future(gen.connection.connected.wait()))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    def repoint(
        self, urls: Sequence[str], *, connect_timeout: float, operation_timeout: float
    ) -> None:
        """Apply a reloaded broker list and watchdogs: brokers still listed keep their records,
        and the connection in use retires (after its calls) if its broker left the list."""
        self.connect_timeout, self.operation_timeout = connect_timeout, operation_timeout
        if not self._brokers.repoint(urls):
            return
        gen = self._gen
        if gen is None:
            return
        if gen.url in self._brokers.urls:
            gen.index = self._brokers.urls.index(gen.url)
            return
        logger.info("inbox broker list changed: broker %d retires when its calls end", gen.index)
        self._retire(gen)

    async def close(self) -> None:
        """Close every connection, retired ones with calls still on them included."""
        self._closed = True
        self._signal()
        for task in (self._reconnecting, self._returning):
            if task is not None:
                task.cancel()
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.retired = True
            self._retiring.add(gen)
        for old in list(self._retiring):
            await self._close(old)
        await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- connecting ----------------------------------------------------------------------------

    async def _connected(self) -> Generation:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")
        failed_at = self._connect_failed_at
        if (
            not self.multi
            and failed_at is not None
            and self._clock.monotonic() - failed_at < RECONNECT_SECONDS
        ):
            raise InboxUnavailableError("connect: the broker was unreachable moments ago")
        if self.multi and self._gen is None and self._reconnecting is not None:
            raise InboxUnavailableError("connect: every broker is unreachable")
        async with self._lock:
            gen = self._gen
            if self.multi and gen is None and self._reconnecting is not None:
                raise InboxUnavailableError("connect: every broker is unreachable")
            if gen is not None and self.multi:
                gen = await self._keep_or_leave(gen)
            if gen is not None:
                if not self.multi:
                    await self._ride_out(gen)
                self._reachable = True
                self._note()
                return gen
            try:
                gen = await self._connect()
            except InboxUnavailableError:
                self._connect_failed_at = self._clock.monotonic()
                self._reachable = False
                if self.multi:
                    self._start_reconnecting()
                self._note()
                raise
            return self._install(gen)

    async def _connect(self) -> Generation:
        if not self.multi:
            return await self._brokers.dial_one(self._dial)
        return await self._brokers.sweep(
            self._dial, self._discard, connect_timeout=self.connect_timeout
        )

    async def _ride_out(self, gen: Generation) -> None:
        """Wait (briefly) for a robust connection that is reconnecting — once: while the broker
        is known to be away, calls fail at once until the connection is back."""
        if gen.up:
            return
        if not self._reachable:
            raise InboxUnavailableError("the broker connection is down (reconnecting)")
        try:
            async with asyncio.timeout(min(self.operation_timeout, RIDE_OUT_SECONDS)):
                await gen.connection.connected.wait()
        except TimeoutError:
            self._reachable = False
            self._observe(Outcome(error=ErrorClass.RESET))  # the broker's record says so too
            self._note()
            raise InboxUnavailableError("the broker connection is down (reconnecting)") from None

    async def _keep_or_leave(self, gen: Generation) -> Generation | None:
        """With several brokers: the current generation while it serves, else ``None`` after
        striking and retiring it (the caller then sweeps)."""
        if gen.up and self._brokers.admits(gen.index):
            self._return_to_primary(gen)
            return gen
        if not gen.up:
            with contextlib.suppress(InboxUnavailableError):
                await self._ride_out(gen)
                return gen
            self._brokers.observe(gen.index, Outcome(error=ErrorClass.RESET))
        logger.info("inbox fails over from broker %d", gen.index)
        self._retire(gen)
        return None

    async def _dial(self, index: int, url: str) -> Generation:
        gen = await open_generation(
            index,
            url,
            connect_timeout=self.connect_timeout,
            operation_timeout=self.operation_timeout,
            lane_factory=self._lane_factory,
            on_connect=self._on_connect if self.multi else None,
            label=f" (broker {index})" if self.multi else "",
        )
        if self._closed:  # close() ran while we connected: do not leave this one open
            await self._discard(gen)
            raise InboxUnavailableError("the inbox is closed")
        return gen

    async def _discard(self, gen: Generation) -> None:
        with contextlib.suppress(InboxUnavailableError):
            await gen.channels.lane.close()
        await close_quietly(gen.connection)

    def _install(self, gen: Generation) -> Generation:
        old = self._gen
        if old is not None and old is not gen:
            self._retire(old)
        self._gen = gen
        self._signal()
        self._connect_failed_at = None
        self._reachable = True
        self._note()
        return gen

    def _retire(self, gen: Generation) -> None:
        gen.retired = True
        self._retiring.add(gen)
        if self._gen is gen:
            self._gen = None
            self._signal()
        if gen.leases == 0:
            self._spawn(self._close(gen))

    async def _close(self, gen: Generation) -> None:
        if gen in self._retiring:  # once
            self._retiring.discard(gen)
            await self._discard(gen)

    # -- background work (several brokers) -----------------------------------------------------

    def _start_reconnecting(self) -> None:
        if self._reconnecting is None and not self._closed:
            self._reconnecting = self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        """Sweep every :data:`RECONNECT_INTERVAL` until a broker answers."""
        try:
            while not self._closed and self._gen is None:
                await self._clock.sleep(RECONNECT_INTERVAL)
                async with self._lock:
                    if self._closed or self._gen is not None:
                        return
                    with contextlib.suppress(InboxUnavailableError):
                        gen = self._install(await self._connect())
                        logger.info("inbox broker %d answers: service resumes", gen.index)
        finally:
            self._reconnecting = None

    def _return_to_primary(self, gen: Generation) -> None:
        """While on a fallback, probe the brokers before it whose breaker admits (no wait)."""
        if self._returning is None and not self._closed and self._brokers.lower_admits(gen.index):
            self._returning = self._spawn(self._probe_before(gen))

    async def _probe_before(self, gen: Generation) -> None:
        try:
            found = await self._brokers.sweep(
                self._dial, self._discard, connect_timeout=self.connect_timeout, before=gen.index
            )
        except InboxUnavailableError:
            return
        finally:
            self._returning = None
        async with self._lock:
            if self._closed or self._gen is not gen:
                await self._discard(found)
                return
            logger.info("inbox returns to broker %d from broker %d", found.index, gen.index)
            self._install(found)

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _note(self) -> None:
        """Log a change of :meth:`reachable` once: a WARNING as an outage starts, an INFO as it
        ends (never while closing)."""
        reachable = self.reachable()
        if self._closed or reachable == self._noted:
            return
        self._noted = reachable
        if reachable:
            logger.info("inbox reachable again")
        elif self.multi:
            logger.warning("inbox unreachable: no broker answers; calls fail until one does")
        else:
            logger.warning(
                "inbox unreachable: the broker does not answer; calls fail until it does"
            )

    def _observe(self, outcome: Outcome) -> None:
        gen = self._gen
        if gen is not None:
            self._brokers.observe(gen.index, outcome)
