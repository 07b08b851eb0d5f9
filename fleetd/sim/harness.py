"""Test helpers shipped with the simulator: a simulator plus client on a FakeClock.

:func:`drive` runs an awaitable to completion while moving a
:class:`~fleetd.clock.FakeClock` forward in small steps. Between steps it only yields to the
event loop (``asyncio.sleep(0)``), which is enough for local Unix-socket I/O to flow: no real
time passes and nothing sleeps. :class:`SimHarness` starts a :class:`HerdrSimulator` on a
short socket path (``AF_UNIX`` paths are limited to ~100 bytes), gives a
:class:`~fleetd.sim.client.SimClient` on the same clock, and cleans both up.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from fleetd.clock import FakeClock
from fleetd.sim.agent import AgentBehaviour
from fleetd.sim.client import SimClient
from fleetd.sim.scenario import Scenario
from fleetd.sim.server import FrameTap, HerdrSimulator

__all__ = ["SimHarness", "drive"]

T = TypeVar("T")
_SPINS = 30
#: Every this many steps, and once more before giving up, work outside the event loop (a file read
#: in a worker thread) gets a moment of real time; simulated time alone never lets a thread finish.
_REAL_EVERY = 100
_REAL_WAIT = 0.002
_REAL_GRACE = 5.0


async def _spin() -> None:
    for _ in range(_SPINS):
        await asyncio.sleep(0)


async def drive(
    clock: FakeClock, aw: Awaitable[T], *, step: float = 0.05, max_seconds: float = 600.0
) -> T:
    """Await ``aw`` while advancing ``clock`` by ``step`` whenever nothing else can move."""
    task = asyncio.ensure_future(aw)
    moved = 0.0
    steps = 0
    try:
        while True:
            await _spin()
            steps += 1
            if not task.done() and steps % _REAL_EVERY == 0:
                await asyncio.wait({task}, timeout=_REAL_WAIT)
            if task.done():
                return task.result()
            if moved >= max_seconds:
                await asyncio.wait({task}, timeout=_REAL_GRACE)
                if task.done():
                    return task.result()
                raise AssertionError(f"still pending after {max_seconds:g} simulated seconds")
            clock.advance(step)
            moved += step
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class SimHarness:
    """``async with SimHarness(scenario) as h:`` -> ``h.sim``, ``h.client``, ``h.clock``."""

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        request_timeout: float = 2.0,
        behaviour: AgentBehaviour | None = None,
        tap: FrameTap | None = None,
        jitter: float = 0.5,
    ) -> None:
        self.clock = FakeClock()
        self._dir = Path(tempfile.mkdtemp(prefix="fsim"))
        self.socket_path = self._dir / "herdr.sock"
        self.sim = HerdrSimulator(
            self.socket_path, scenario, clock=self.clock, behaviour=behaviour, tap=tap
        )
        self.client = SimClient(
            self.socket_path,
            clock=self.clock,
            request_timeout=request_timeout,
            jitter=lambda: jitter,
        )

    async def run(self, aw: Awaitable[T], *, max_seconds: float = 600.0) -> T:
        """:func:`drive` on this harness's clock."""
        return await drive(self.clock, aw, max_seconds=max_seconds)

    async def advance(self, seconds: float, *, step: float = 0.05) -> None:
        """Let ``seconds`` of simulated time pass, with I/O flowing between steps."""
        moved = 0.0
        while moved < seconds:
            await _spin()
            delta = min(step, seconds - moved)
            self.clock.advance(delta)
            moved += delta
        await _spin()

    async def __aenter__(self) -> SimHarness:
        await self.sim.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.sim.stop()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
