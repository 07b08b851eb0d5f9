"""Per-call overhead of the breakers and failover selection around one outbound call.

One timed call is what an adapter adds around its dial: ``Sweep.start``, then ``next_attempt``
and ``settle`` for every endpoint it dials, until the sweep succeeds, stops or gives up. No I/O is
done; the outcome of each dial is fixed by the scenario. Scenarios, on a pool of three endpoints
(and eight for the widest):

* healthy primary — every call is served by the first endpoint (the steady state);
* primary down — the primary refuses every dial: it opens after three calls, is skipped while
  open and probed whenever its cooldown ends (the clock moves 10 ms per call); the fallback serves;
* all down — every endpoint refuses: three dials per call until the breakers open, then calls
  give up without dialing, with probes as cooldowns end;
* flapping, eight endpoints — every endpoint fails one dial in three (blind), so breakers open,
  probe and close throughout and calls walk down the list;
* webhook, primary 503 — the webhook sink's own path (:mod:`fleetd.notify.core.failover`): each dial
  answers an HTTP outcome that is classified into the sweep, and the event's fate is decided when
  it ends. The primary answers 503 (it opens, is skipped, probed, and fails again), the second
  receiver takes the event.

Each scenario runs ``CALLS`` calls ``REPEATS`` times; the figure is the median microseconds per
call. Target (issue 14): under 50 µs per call in every scenario. Exits 1 if any misses it.
Run: ``.venv/bin/python benchmarks/resilience.py``.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fleetd.notify.core.failover import Dialed, SweepResult, after_sweep, outcome_of
from fleetd.notify.core.retry import PostResult
from fleetd.resilience import (
    ErrorClass,
    FailoverBudget,
    GiveUp,
    Outcome,
    Pool,
    Settled,
    Sweep,
    next_attempt,
    settle,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(milliseconds=10)
CALLS = 20_000
REPEATS = 7
TARGET_US = 50.0
BUDGET = FailoverBudget(attempts=8)
OK = Outcome(latency=timedelta(milliseconds=12))
REFUSED = Outcome(error=ErrorClass.REFUSED)
TIMEOUT = Outcome(error=ErrorClass.TIMEOUT)

Dial = Callable[[int, int], Outcome]
"""(call number, endpoint index) -> the outcome of that dial."""
LATENCY = timedelta(milliseconds=12)
HTTP_OK = PostResult(status=200)
HTTP_BUSY = PostResult(status=503)


def one_call(pool: Pool, now: datetime, dial: Dial, n: int) -> Pool:
    sweep = Sweep.start(BUDGET, now)
    while True:
        pool, sweep, step = next_attempt(pool, sweep, now)
        if isinstance(step, GiveUp):
            return pool
        pool, sweep, settled = settle(pool, sweep, step, dial(n, step.index), now)
        if settled is not Settled.NEXT:
            return pool


def webhook_call(pool: Pool, now: datetime, dial: Dial, n: int) -> Pool:
    """One webhook attempt: HTTP outcomes classified per dial, then the event's fate decided.
    ``dial`` answers an :class:`Outcome` whose error stands for the HTTP answer (none: 200)."""
    sweep = Sweep.start(BUDGET, now)
    dialed = []
    while True:
        pool, sweep, step = next_attempt(pool, sweep, now)
        if isinstance(step, GiveUp):
            break
        attempt = HTTP_OK if dial(n, step.index).ok else HTTP_BUSY
        dialed.append(Dialed(step.index, attempt))
        outcome = outcome_of(attempt, latency=LATENCY, now=now)
        pool, sweep, settled = settle(pool, sweep, step, outcome, now)
        if settled is not Settled.NEXT:
            break
    after_sweep(
        SweepResult(dialed=tuple(dialed), retry_at=sweep.retry_at), failures=1, draw=0.5, now=now
    )
    return pool


Call = Callable[[Pool, datetime, Dial, int], Pool]


def run(size: int, dial: Dial, call: Call = one_call) -> float:
    """Median µs per call over ``REPEATS`` runs of ``CALLS`` calls, each from a fresh pool."""
    samples = []
    for _ in range(REPEATS):
        pool = Pool.of(*(f"endpoint-{i}" for i in range(size)))
        now = T0
        gc.collect()
        started = time.perf_counter()
        for n in range(CALLS):
            pool = call(pool, now, dial, n)
            now += STEP
        samples.append((time.perf_counter() - started) * 1e6 / CALLS)
    return statistics.median(samples)


SCENARIOS: list[tuple[str, int, Dial, Call]] = [
    ("healthy primary", 3, lambda n, i: OK, one_call),
    ("primary down", 3, lambda n, i: REFUSED if i == 0 else OK, one_call),
    ("all down", 3, lambda n, i: REFUSED, one_call),
    ("flapping, eight endpoints", 8, lambda n, i: TIMEOUT if (n + i) % 3 == 0 else OK, one_call),
    ("webhook, primary 503", 2, lambda n, i: REFUSED if i == 0 else OK, webhook_call),
]


def dials_per_call(size: int, dial: Dial, call: Call = one_call) -> float:
    """How many endpoints a call dials on average (untimed): shows what the scenario exercises."""
    count = 0

    def counted(n: int, i: int) -> Outcome:
        nonlocal count
        count += 1
        return dial(n, i)

    pool, now = Pool.of(*(f"endpoint-{i}" for i in range(size))), T0
    for n in range(CALLS):
        pool = call(pool, now, counted, n)
        now += STEP
    return count / CALLS


def main() -> int:
    print(f"{CALLS} calls x {REPEATS} runs per scenario; median µs per call (target < {TARGET_US})")
    missed = []
    for label, size, dial, call in SCENARIOS:
        us = run(size, dial, call)
        dials = dials_per_call(size, dial, call)
        print(f"  {label:28} {size} endpoints  {dials:5.2f} dials/call  {us:7.2f} µs/call")
        if us >= TARGET_US:
            missed.append(label)
    print(
        f"target < {TARGET_US:.0f} µs/call: {'MISSED by ' + ', '.join(missed) if missed else 'met'}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
