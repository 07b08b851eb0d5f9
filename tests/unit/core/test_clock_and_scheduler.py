"""The injected clock and the loop scheduler: time moves only when told."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from fleetd.clock import FakeClock, SystemClock, wait_event
from fleetd.runtime.scheduler import STALL_FLOOR_SECONDS, STALL_INTERVALS, Loop, Scheduler


async def test_fake_clock_moves_only_when_advanced_and_never_backwards() -> None:
    """now() and monotonic() follow advance(); a negative step is refused."""
    clock = FakeClock(datetime(2026, 5, 1, tzinfo=UTC))
    start = clock.now()
    assert clock.now() == start
    clock.advance(2.5)
    assert (clock.now() - start).total_seconds() == 2.5
    assert clock.monotonic() == 2.5
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone"):
        FakeClock(datetime(2026, 5, 1))


async def test_sleepers_wake_in_deadline_order() -> None:
    """A sleeper wakes only once the clock passes its deadline, earliest first."""
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.ensure_future(sleeper(n, s)) for n, s in (("b", 2), ("a", 1), ("c", 3))]
    await asyncio.sleep(0)
    assert clock.sleepers == 3
    clock.advance(0.5)
    await asyncio.sleep(0)
    assert woke == []
    clock.advance(2)
    await asyncio.gather(*tasks[:2])
    assert woke == ["a", "b"]
    await clock.run(1)
    await tasks[2]
    assert woke == ["a", "b", "c"]


async def test_wait_event_is_bounded_by_clock_time() -> None:
    """wait_event returns True when set, False after the timeout in clock seconds."""
    clock = FakeClock()
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_event(clock, event, 5))
    for _ in range(3):  # let the waiter start its timer at time 0
        await asyncio.sleep(0)
    await clock.run(4)
    assert not waiting.done()
    await clock.run(2)
    assert await waiting is False
    event.set()
    assert await wait_event(clock, event, 5) is True


async def test_system_clock_is_utc() -> None:
    """The real clock answers in UTC."""
    assert SystemClock().now().tzinfo is UTC


async def test_scheduler_steps_on_the_clock_survives_a_failing_step_and_stops() -> None:
    """Each loop steps per interval of clock time; a raising step is counted, not fatal."""
    clock = FakeClock()
    calls: list[float] = []

    async def good() -> None:
        calls.append(clock.monotonic())

    async def bad() -> None:
        raise RuntimeError("boom")

    scheduler = Scheduler(clock)
    scheduler.add(Loop(name="good", step=good, interval=lambda: 10))
    scheduler.add(Loop(name="bad", step=bad, interval=lambda: 10))
    with pytest.raises(ValueError, match="already"):
        scheduler.add(Loop(name="good", step=good, interval=lambda: 1))
    scheduler.start()
    for _ in range(3):  # let the loops take their first step, at time 0
        await asyncio.sleep(0)
    await clock.run(35, step=5)
    assert calls == [0, 10, 20, 30]
    status = {s.name: s for s in scheduler.status()}
    assert status["bad"].failures == 4
    assert scheduler.alive()
    await scheduler.stop()
    await clock.run(20, step=5)
    assert calls == [0, 10, 20, 30]


async def test_a_step_that_awaits_something_cancelled_elsewhere_does_not_end_its_loop() -> None:
    """A step awaiting a task another part cancelled gets CancelledError without its own task
    being cancelled: that step failed, and the loop steps again; stopping still stops it."""
    clock = FakeClock()
    steps: list[float] = []

    async def awaits_a_cancelled_task() -> None:
        steps.append(clock.monotonic())
        other = asyncio.ensure_future(asyncio.Event().wait())  # never set: only cancelled
        other.cancel()
        await other

    scheduler = Scheduler(clock)
    scheduler.add(Loop(name="victim", step=awaits_a_cancelled_task, interval=lambda: 10))
    scheduler.start()
    for _ in range(3):
        await asyncio.sleep(0)
    await clock.run(25, step=5)
    assert steps == [0, 10, 20]
    [status] = scheduler.status()
    assert status.failures == 3
    assert scheduler.alive()
    await scheduler.stop()
    await clock.run(20, step=5)
    assert steps == [0, 10, 20]


async def test_a_loop_whose_step_never_ends_is_not_alive() -> None:
    """2a: a step stuck past a few intervals (at least the floor) makes the scheduler not alive,
    though its task still runs; once the step ends the scheduler is alive again."""
    clock = FakeClock()
    release = asyncio.Event()
    steps: list[float] = []

    async def stuck() -> None:
        steps.append(clock.monotonic())
        if len(steps) == 2:
            await release.wait()

    scheduler = Scheduler(clock)
    scheduler.add(Loop(name="health", step=stuck, interval=lambda: 30))
    scheduler.start()
    for _ in range(3):
        await asyncio.sleep(0)
    await clock.run(30)  # the second step starts at 30 and waits
    assert steps == [0, 30]
    limit = max(STALL_INTERVALS * 30, STALL_FLOOR_SECONDS)
    await clock.run(limit, step=10)
    assert scheduler.alive()  # exactly at the limit: still alive
    assert scheduler.stalled() == []
    await clock.run(1)
    assert not scheduler.alive()
    assert scheduler.stalled() == ["health"]
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert scheduler.alive()
    await scheduler.stop()


async def test_a_loop_may_say_how_long_its_step_may_run() -> None:
    """``stall_after`` replaces the default limit (a pass whose own deadlines are long)."""
    clock = FakeClock()
    never = asyncio.Event()

    async def slow() -> None:
        await never.wait()

    scheduler = Scheduler(clock)
    scheduler.add(Loop(name="webhook", step=slow, interval=lambda: 0.5, stall_after=lambda: 400))
    scheduler.start()
    for _ in range(3):
        await asyncio.sleep(0)
    await clock.run(STALL_FLOOR_SECONDS * 3)
    assert scheduler.alive()
    await clock.run(401 - STALL_FLOOR_SECONDS * 3)
    assert scheduler.stalled() == ["webhook"]
    await scheduler.stop()
    assert scheduler.alive()  # stopped loops have no step in progress
