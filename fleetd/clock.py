"""Time, injected.

Only this module reads the wall clock or the monotonic clock, or sleeps. Everything else receives a
:class:`Clock` and asks it. Production uses :class:`SystemClock`; tests use :class:`FakeClock`,
which moves only when a test calls :meth:`FakeClock.advance` and never moves backwards, so a loop
under test runs exactly as far as the test lets it — no test sleeps to wait for a loop.

``now()`` is a UTC-aware :class:`~datetime.datetime` for anything that is recorded or compared with
recorded times. ``monotonic()`` is seconds for measuring durations and deadlines inside one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["Clock", "DeadlineExceededError", "FakeClock", "SystemClock", "wait_event", "within"]

T = TypeVar("T")


@runtime_checkable
class Clock(Protocol):
    """The one source of time for fleetd."""

    def now(self) -> datetime:
        """Current UTC-aware wall time."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for ``seconds``."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told, and never backwards.

    ``sleep()`` parks the caller until :meth:`advance` carries the clock past its deadline. Sleepers
    wake in deadline order; ties wake in the order they went to sleep.
    """

    def __init__(self, start: datetime = _EPOCH) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        """How many callers are parked in :meth:`sleep` right now."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def advance(self, seconds: float) -> None:
        """Move the clock forward and wake every sleeper whose deadline has come."""
        if seconds < 0:
            raise ValueError("FakeClock never moves backwards")
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    async def run(self, seconds: float, *, step: float | None = None) -> None:
        """Advance by ``seconds`` in steps, letting woken tasks run between steps."""
        remaining = seconds
        increment = seconds if step is None else step
        while remaining > 0:
            delta = min(increment, remaining)
            self.advance(delta)
            remaining -= delta
            for _ in range(5):
                await asyncio.sleep(0)


async def wait_event(
    clock: Clock, event: asyncio.Event, seconds: float, *, unless: asyncio.Event | None = None
) -> bool:
    """Wait for ``event`` at most ``seconds`` of ``clock`` time, or until ``unless`` is set;
    True when ``event`` was set."""
    if event.is_set():
        return True
    if seconds <= 0 or (unless is not None and unless.is_set()):
        return False
    tasks = {asyncio.ensure_future(event.wait()), asyncio.ensure_future(clock.sleep(seconds))}
    if unless is not None:
        tasks.add(asyncio.ensure_future(unless.wait()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return event.is_set()


class DeadlineExceededError(Exception):
    """:func:`within` gave up: the work did not finish in time on the clock (and was cancelled)."""


async def within(
    clock: Clock,
    aw: Awaitable[T],
    seconds: float,
    *,
    discard: Callable[[T], object] | None = None,
) -> T:
    """Await ``aw`` for at most ``seconds`` of ``clock`` time, else cancel it and raise
    :class:`DeadlineExceededError`.

    ``asyncio.wait_for`` measures the event loop's real time, which a :class:`FakeClock` cannot
    move; racing the work against ``clock.sleep`` keeps every outbound deadline testable without
    sleeping. The work's own errors pass through unchanged. A result the caller never takes —
    it was cancelled as the work finished, cancelled again while the work unwound, or closed
    with its task — goes to ``discard`` as soon as it exists (an opened connection is closed
    there, not left to the garbage collector).
    """
    work = asyncio.ensure_future(aw)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    claimed = False
    try:
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # no await here: a coroutine closed without a loop step must unwind at once
            with contextlib.suppress(RuntimeError):  # its loop may be closed already
                _stop(work, timer)
        await asyncio.gather(work, timer, return_exceptions=True)
        if work.cancelled():
            raise DeadlineExceededError(f"no answer within {seconds:g}s")
        claimed = True
        return work.result()
    finally:
        if not claimed and discard is not None:
            _discard_when_done(work, discard)


def _stop(work: asyncio.Future[Any], timer: asyncio.Future[Any]) -> None:
    timer.cancel()
    if not work.done():
        work.cancel()


def _discard_when_done(work: asyncio.Future[T], discard: Callable[[T], object]) -> None:
    """Hand ``work``'s result to ``discard`` once it has one: now, or when a cancelled ``work``
    finishes with a result anyway."""
    if work.done():
        if _succeeded(work):
            discard(work.result())
        return
    work.add_done_callback(lambda done: discard(done.result()) if _succeeded(done) else None)


def _succeeded(work: asyncio.Future[Any]) -> bool:
    return work.done() and not work.cancelled() and work.exception() is None
