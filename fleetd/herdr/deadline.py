"""A deadline on the injected clock for one awaitable, failing as a link error.

``asyncio.wait_for`` measures the event loop's real time, which a :class:`~fleetd.clock.FakeClock`
cannot move; racing the work against ``clock.sleep`` keeps every herdr deadline testable without
sleeping. On expiry the work is cancelled (closing its half-done connection) and the caller gets
:class:`~fleetd.errors.ControlLinkError`, never a hang.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fleetd.clock import Clock, DeadlineExceededError, within
from fleetd.errors import ControlLinkError

__all__ = ["bounded"]

T = TypeVar("T")


async def bounded(
    clock: Clock,
    aw: Awaitable[T],
    seconds: float | None,
    code: str,
    *,
    discard: Callable[[T], object] | None = None,
) -> T:
    """Await ``aw`` for at most ``seconds`` of ``clock`` time, else ``ControlLinkError(code)``.
    ``discard`` receives a result the caller's cancellation left unclaimed."""
    if seconds is None:
        return await aw
    try:
        return await within(clock, aw, seconds, discard=discard)
    except DeadlineExceededError as exc:
        raise ControlLinkError(code, str(exc)) from None
