"""How many and how long: the failover budget of one call, and the capped doubling of cooldowns.

* :class:`FailoverBudget` bounds one logical call across endpoints: at most ``attempts`` dials and
  no dial after ``total`` has passed since the call began (RFC 0018 §3.3: each endpoint at most
  once per call, and the whole sweep capped by one deadline).
* :func:`doubled` is the capped doubling the breakers' and the model bench's cooldowns share.

Each attempt's own watchdog is its adapter's (``requestTimeoutMs``, the AMQP connect and operation
timeouts, each applied with :func:`fleetd.clock.within` or ``asyncio.timeout``); the webhook's
retry schedule is :mod:`fleetd.notify.core.retry`'s, and a ``Retry-After`` is read by
:mod:`fleetd.resilience.retry_after`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["FailoverBudget", "doubled"]

_ZERO = timedelta(0)


def doubled(base: timedelta, times: int, cap: timedelta) -> timedelta:
    """``base`` doubled ``times`` times, never past ``cap`` (and never overflowing on the way)."""
    value = min(base, cap)
    for _ in range(max(times, 0)):
        if value >= cap:
            break
        value = cap if value > cap / 2 else value * 2
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverBudget:
    attempts: int = 3
    total: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("FailoverBudget.attempts must be at least 1")
        if self.total <= _ZERO:
            raise ValueError("FailoverBudget.total must be positive")
