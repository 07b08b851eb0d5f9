"""One endpoint's health record: reachability, EWMA latency, a rolling error rate, the last error.

Updated from every attempt's :class:`~fleetd.resilience.classify.Outcome` (RFC 0018 §4.1):

* ``reachable`` — whether the last dialed attempt got any answer (``None`` before the first);
* ``latency`` — an exponentially weighted moving average of successful attempts' latency
  (weight 1/8 by default), ``None`` until one succeeded with a measured latency;
* ``error_rate`` — failover-class failures among the last ``window`` dialed attempts. The window is
  a bit field (bit 0 the newest attempt, 1 = failed), so it stays bounded and O(1) to update;
* ``last_error`` — the last failure's :class:`~fleetd.resilience.classify.ErrorClass` (a code,
  never text), with its time; ``last_ok_at`` the last success's.

An auth, request or body error is an answer, not ill health (it would fail the same on every
endpoint): it sets ``reachable`` and ``last_error`` but counts as a healthy sample. An attempt the
breaker never let out (``CIRCUIT_OPEN``) leaves the record unchanged. ``calls`` and ``failures``
are lifetime counters, for ``_total`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetd.resilience.classify import TRAITS, ErrorClass, Outcome

__all__ = ["EndpointHealth", "HealthPolicy"]

MAX_WINDOW = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthPolicy:
    """How far back the error rate looks, and how fast the latency average follows."""

    window: int = 32
    latency_weight: float = 0.125

    def __post_init__(self) -> None:
        if not 1 <= self.window <= MAX_WINDOW:
            raise ValueError(f"HealthPolicy.window must be within 1..{MAX_WINDOW}")
        if not 0.0 < self.latency_weight <= 1.0:
            raise ValueError("HealthPolicy.latency_weight must be within (0, 1]")


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointHealth:
    reachable: bool | None = None
    latency: timedelta | None = None
    window: int = 0
    samples: int = 0
    calls: int = 0
    failures: int = 0
    last_error: ErrorClass | None = None
    last_error_at: datetime | None = None
    last_ok_at: datetime | None = None

    @property
    def error_rate(self) -> float:
        """Failed share of the attempts in the window (0.0 before any)."""
        return self.window.bit_count() / self.samples if self.samples else 0.0

    def observe(self, outcome: Outcome, now: datetime, policy: HealthPolicy) -> EndpointHealth:
        """The record after one attempt ended with ``outcome`` at ``now``."""
        mask = (1 << policy.window) - 1
        samples = min(self.samples + 1, policy.window)
        if outcome.error is None:
            latency = self.latency
            if outcome.latency is not None:
                latency = (
                    outcome.latency
                    if latency is None
                    else latency + (outcome.latency - latency) * policy.latency_weight
                )
            return EndpointHealth(
                reachable=True,
                latency=latency,
                window=(self.window << 1) & mask,
                samples=samples,
                calls=self.calls + 1,
                failures=self.failures,
                last_error=self.last_error,
                last_error_at=self.last_error_at,
                last_ok_at=now,
            )
        traits = TRAITS[outcome.error]
        if not traits.dialed:
            return self
        return EndpointHealth(
            reachable=traits.answered,
            latency=self.latency,
            window=((self.window << 1) | traits.failover) & mask,
            samples=samples,
            calls=self.calls + 1,
            failures=self.failures + traits.failover,
            last_error=outcome.error,
            last_error_at=now,
            last_ok_at=self.last_ok_at,
        )
