"""Deadlines on the injected clock: the work wins, or the deadline fails it as a link error."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.clock import FakeClock
from fleetd.errors import ControlLinkError
from fleetd.herdr.deadline import bounded
from fleetd.sim.event_stream import reconnect_delay


async def test_work_that_finishes_first_returns_its_value() -> None:
    """A result before the deadline is returned as is."""
    assert await bounded(FakeClock(), asyncio.sleep(0, result=7), 1.0, "request_timeout") == 7


async def test_deadline_on_the_fake_clock_cancels_the_work() -> None:
    """When the fake clock passes the deadline the work is cancelled and ControlLinkError raised."""
    clock = FakeClock()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    call = asyncio.ensure_future(bounded(clock, never, 2.0, "request_timeout"))
    await clock.run(1.9, step=0.1)
    assert not call.done()
    await clock.run(0.2, step=0.1)
    with pytest.raises(ControlLinkError) as info:
        await call
    assert info.value.code == "request_timeout"
    assert never.cancelled()


async def test_no_deadline_means_wait_as_long_as_it_takes() -> None:
    """`None` seconds awaits the work directly (blocking waits have no client deadline)."""
    clock = FakeClock()
    gate = asyncio.Event()

    async def later() -> str:
        await gate.wait()
        return "done"

    call = asyncio.ensure_future(bounded(clock, later(), None, "request_timeout"))
    await clock.run(3600, step=600)
    assert not call.done()
    gate.set()
    assert await asyncio.wait_for(call, timeout=1) == "done"


async def test_errors_of_the_work_pass_through() -> None:
    """An exception raised by the work is not masked as a timeout."""

    async def boom() -> None:
        raise ConnectionResetError

    with pytest.raises(ConnectionResetError):
        await bounded(FakeClock(), boom(), 5.0, "request_timeout")


async def test_cancelling_the_caller_cancels_the_work() -> None:
    """Cancelling a bounded call cancels the I/O it was waiting on."""
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    call = asyncio.ensure_future(bounded(FakeClock(), never, 5.0, "request_timeout"))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert never.cancelled()


@given(st.integers(min_value=0, max_value=200), st.floats(min_value=0.0, max_value=1.0))
def test_reconnect_delay_is_jittered_within_half_to_full_capped_ceiling(
    attempt: int, rnd: float
) -> None:
    """Delays grow exponentially from base, stay within [ceiling/2, ceiling], never exceed cap."""
    delay = reconnect_delay(attempt, rnd, base=0.25, cap=10.0)
    ceiling = min(10.0, 0.25 * 2 ** min(attempt, 30))
    assert ceiling / 2 <= delay <= ceiling


def test_reconnect_delay_depends_on_the_random_number() -> None:
    """The jitter is the injected random number: 0 gives half the ceiling, 1 the full ceiling."""
    assert reconnect_delay(2, 0.0, base=0.25, cap=10.0) == 0.5
    assert reconnect_delay(2, 1.0, base=0.25, cap=10.0) == 1.0


async def test_a_result_the_cancelled_caller_never_takes_is_discarded() -> None:
    """The work finishes in the same instant its caller is cancelled: the caller raises
    CancelledError and the unclaimed result (an opened connection, in the client) goes to
    ``discard`` instead of the garbage collector."""
    opened: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    discarded: list[str] = []
    call = asyncio.ensure_future(
        bounded(FakeClock(), opened, 5.0, "connect_timeout", discard=discarded.append)
    )
    await asyncio.sleep(0)
    opened.set_result("connection")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert discarded == ["connection"]


async def test_a_result_the_caller_takes_is_never_discarded() -> None:
    """``discard`` is only for results nobody received."""
    discarded: list[int] = []
    value = await bounded(
        FakeClock(), asyncio.sleep(0, result=3), 1.0, "request_timeout", discard=discarded.append
    )
    assert (value, discarded) == (3, [])


async def test_a_bounded_call_closed_without_a_loop_step_still_discards_and_unwinds() -> None:
    """A pending task nobody holds is collected, which closes its coroutine where it waits: no
    await may run then. The unclaimed result still goes to ``discard`` and the close unwinds
    (the caller's ``finally`` runs) instead of failing with "coroutine ignored GeneratorExit"."""
    opened: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    discarded: list[str] = []
    call = bounded(FakeClock(), opened, 5.0, "connect_timeout", discard=discarded.append)
    call.send(None)  # runs to the wait for the connection or the deadline
    opened.set_result("connection")
    call.close()
    assert discarded == ["connection"]


async def test_work_that_finishes_after_its_cancelled_caller_is_discarded_then() -> None:
    """The caller is cancelled (twice: a stop that gives up waiting cancels again) and leaves;
    its work, cancelled too, still ends with a result later (a connect that had already
    succeeded can): that result goes to ``discard`` when it arrives."""
    gate, late = asyncio.Event(), asyncio.Event()

    async def stubborn() -> str:
        with contextlib.suppress(asyncio.CancelledError):
            await gate.wait()
        await late.wait()
        return "connection"

    discarded: list[str] = []
    call = asyncio.ensure_future(
        bounded(FakeClock(), stubborn(), 5.0, "connect_timeout", discard=discarded.append)
    )
    await asyncio.sleep(0)
    call.cancel()
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    late.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert discarded == ["connection"]
