"""How many, how long and how far apart: the failover budget, the watchdog, the retry delay.

Value objects only; adapters read them to configure their client (``httpx.Timeout``, the AMQP
connect timeout) and their retry loop.

* :class:`FailoverBudget` bounds one logical call across endpoints: at most ``attempts`` dials and
  no dial after ``total`` has passed since the call began (RFC 0018 §3.3: each endpoint at most
  once per call, and the whole sweep capped by one deadline).
* :class:`Timeouts` is the watchdog of one attempt: a connect limit and an attempt limit, never
  past the call's deadline — a hung peer becomes a ``TIMEOUT`` instead of a hang (Vak 15).
* :class:`RetryPolicy` spaces retries of the same request: ``base * 2**(n-1)`` with ±50 % jitter,
  capped; a server's Retry-After replaces the computed delay, within ``retry_after_cap``. The random
  draw comes in as an argument.
* :func:`retry_after` reads a Retry-After header (delta-seconds or an HTTP date) into a duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "RETRY_AFTER_LIMIT",
    "FailoverBudget",
    "RetryPolicy",
    "Timeouts",
    "doubled",
    "retry_after",
]

RETRY_AFTER_LIMIT = timedelta(days=1)
"""The longest Retry-After :func:`retry_after` reports; anything beyond reads as this."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    connect: timedelta = timedelta(seconds=5)
    attempt: timedelta = timedelta(seconds=15)

    def __post_init__(self) -> None:
        if self.connect <= _ZERO or self.attempt <= _ZERO:
            raise ValueError("Timeouts must be positive")
        if self.connect > self.attempt:
            raise ValueError("Timeouts.connect must not exceed Timeouts.attempt")

    def for_attempt(self, now: datetime, deadline: datetime) -> timedelta:
        """The watchdog for an attempt starting at ``now``: its limit, cut at the deadline."""
        return max(_ZERO, min(self.attempt, deadline - now))

    def connect_for(self, now: datetime, deadline: datetime) -> timedelta:
        """The connect limit for an attempt starting at ``now``, cut at the deadline."""
        return max(_ZERO, min(self.connect, deadline - now))


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    retries: int = 3
    base: timedelta = timedelta(seconds=1)
    cap: timedelta = timedelta(seconds=30)
    retry_after_cap: timedelta = timedelta(minutes=5)

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError("RetryPolicy.retries must not be negative")
        if self.base <= _ZERO or self.cap < self.base or self.retry_after_cap < _ZERO:
            raise ValueError("RetryPolicy needs 0 < base <= cap and retry_after_cap >= 0")

    def delay(self, retry: int, rnd: float, *, retry_after: timedelta | None = None) -> timedelta:
        """The wait before retry number ``retry`` (1 = first); ``rnd`` is a draw in [0, 1]."""
        if retry_after is not None:
            return max(_ZERO, min(retry_after, self.retry_after_cap))
        jitter = 0.5 + max(0.0, min(1.0, rnd))
        return min(self.cap, doubled(self.base, retry - 1, self.cap) * jitter)


_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


def _http_date(text: str) -> datetime | None:
    """An IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``), the form RFC 9110 says to send."""
    parts = text.split()
    if len(parts) != 6 or not parts[0].endswith(",") or parts[5] not in ("GMT", "UTC"):
        return None
    day, month, year, clock = parts[1:5]
    hms = clock.split(":")
    numbers = [day, year, *hms]
    if (
        month not in _MONTHS
        or len(hms) != 3
        or not all(n.isascii() and n.isdigit() for n in numbers)
    ):
        return None
    try:
        hour, minute, second = (int(n) for n in hms)
        return datetime(int(year), _MONTHS[month], int(day), hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None


def retry_after(value: str | None, now: datetime) -> timedelta | None:
    """A Retry-After header as a duration from ``now``; ``None`` when absent or unreadable.

    Delta-seconds or an IMF-fixdate HTTP date (the obsolete date forms read as absent); a date in
    the past reads as zero, anything beyond :data:`RETRY_AFTER_LIMIT` as the limit.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        # seven digits already exceed a day; the length check keeps int() off huge strings
        if len(text) > 6:
            return RETRY_AFTER_LIMIT
        return min(timedelta(seconds=int(text)), RETRY_AFTER_LIMIT)
    when = _http_date(text)
    if when is None:
        return None
    return max(_ZERO, min(when - now, RETRY_AFTER_LIMIT))
