"""The loops of fleetd, run with an injected clock.

A :class:`Loop` is a named coroutine step plus a function that says how long to wait before the
next step (read from the live config each time, so interval keys stay hot). The :class:`Scheduler`
runs each loop as one asyncio task, records when each step started and last finished, keeps one
failing step from killing its loop, and stops every loop on :meth:`Scheduler.stop`.

``/livez`` asks :meth:`Scheduler.alive`: every loop's task still runs *and* no loop is stalled.
A loop is stalled while its current step has been running longer than its
:attr:`Loop.stall_after` (by default :data:`STALL_INTERVALS` of its intervals, at least
:data:`STALL_FLOOR_SECONDS`): a step that waits forever (an outbound call without a deadline, a
lock never released) stops the loop as surely as a crash, and liveness says so. The bound is
generous on purpose: a liveness failure gets the process restarted, so only a step far past
anything its own deadlines allow counts.

Under :class:`~fleetd.clock.FakeClock` a loop advances exactly as far as the test moves the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fleetd.clock import Clock

__all__ = ["STALL_FLOOR_SECONDS", "STALL_INTERVALS", "Loop", "LoopStatus", "Scheduler"]

_log = logging.getLogger("fleetd.runtime")

STALL_INTERVALS = 3
"""A step running this many of its loop's intervals stalls the loop (unless ``stall_after``)."""
STALL_FLOOR_SECONDS = 120.0
"""No loop counts as stalled before its step has run this long (by default)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Loop:
    """One periodic job: ``step`` runs, then the loop waits ``interval()`` seconds."""

    name: str
    step: Callable[[], Awaitable[None]]
    interval: Callable[[], float]
    run_first_immediately: bool = True
    stall_after: Callable[[], float] | None = None
    """Seconds one step may run before the loop counts as stalled (``None``: the default)."""

    def stall_limit(self) -> float:
        """How long one step may run before the loop counts as stalled, in seconds."""
        if self.stall_after is not None:
            return self.stall_after()
        return max(STALL_INTERVALS * self.interval(), STALL_FLOOR_SECONDS)


@dataclass(slots=True, kw_only=True)
class LoopStatus:
    """What the scheduler knows of one loop, for ``/livez`` and the fleet view."""

    name: str
    steps: int = 0
    failures: int = 0
    last_step_at: float | None = None
    running: bool = False
    step_started_at: float | None = None  # while a step runs (monotonic seconds)


@dataclass(slots=True)
class Scheduler:
    """Runs loops until stopped."""

    clock: Clock
    _loops: list[Loop] = field(default_factory=list)
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _status: dict[str, LoopStatus] = field(default_factory=dict)

    def add(self, loop: Loop) -> None:
        if loop.name in self._status:
            raise ValueError(f"loop {loop.name!r} already added")
        self._loops.append(loop)
        self._status[loop.name] = LoopStatus(name=loop.name)

    def start(self) -> None:
        for loop in self._loops:
            if loop.name not in self._tasks:
                self._tasks[loop.name] = asyncio.create_task(
                    self._run(loop), name=f"fleetd:{loop.name}"
                )

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for status in self._status.values():
            status.running = False

    def status(self) -> list[LoopStatus]:
        return [
            LoopStatus(
                name=s.name,
                steps=s.steps,
                failures=s.failures,
                last_step_at=s.last_step_at,
                running=s.running,
                step_started_at=s.step_started_at,
            )
            for s in self._status.values()
        ]

    def alive(self) -> bool:
        """True while every started loop still has a live task and none is stalled."""
        if any(task.done() for task in self._tasks.values()):
            return False
        return not self.stalled()

    def stalled(self) -> list[str]:
        """The loops whose current step has run past its stall limit, by name."""
        now = self.clock.monotonic()
        return [
            loop.name
            for loop in self._loops
            if (started := self._status[loop.name].step_started_at) is not None
            and now - started > loop.stall_limit()
        ]

    async def run_once(self, name: str) -> None:
        """Run one step of a loop now (tests and the demo use this)."""
        loop = next(loop for loop in self._loops if loop.name == name)
        await self._step(loop)

    async def _run(self, loop: Loop) -> None:
        self._status[loop.name].running = True
        if not loop.run_first_immediately:
            await self.clock.sleep(loop.interval())
        while True:
            await self._step(loop)
            await self.clock.sleep(loop.interval())

    async def _step(self, loop: Loop) -> None:
        status = self._status[loop.name]
        status.step_started_at = self.clock.monotonic()
        try:
            await loop.step()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the loop itself is being stopped
            # something the step awaited was cancelled elsewhere: a failed step, not a stop
            status.failures += 1
            _log.warning("loop %s: step cancelled from elsewhere; the loop goes on", loop.name)
        except Exception:  # noqa: BLE001 — one failing step must not end its loop; it is logged
            status.failures += 1
            _log.exception("loop %s: step failed", loop.name)
        finally:
            status.steps += 1
            status.last_step_at = self.clock.monotonic()
            status.step_started_at = None
