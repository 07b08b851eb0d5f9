"""Choosing a receiver: the sweep over the ordered list, the breakers, sticky primary, a
repointed list, and the report the surfaces read."""

from __future__ import annotations

import asyncio
from collections import deque
from datetime import timedelta

import pytest

from fleetd.clock import FakeClock
from fleetd.notify.core.retry import PostResult, TransportFailure
from fleetd.notify.receivers import Receivers
from fleetd.resilience import BreakerState, ErrorClass
from tests.contract.journal_cases import T0

URLS = ("http://a.invalid/h", "http://b.invalid/h", "http://c.invalid/h")
OK = PostResult(status=200)
BUSY = PostResult(status=503)
LATER = PostResult(status=429, retry_after=timedelta(seconds=30))
GONE = PostResult(status=404)
REFUSED = PostResult(failure=TransportFailure.NETWORK)
RETIRED = PostResult(status=410)
FAR = T0 + timedelta(hours=1)


class Script:
    """Answers each URL from its own queue (200 when it runs out) and keeps the dial order."""

    def __init__(self, **answers: list[PostResult]) -> None:
        self.answers = {
            url: deque(answers.get(name, [])) for name, url in zip("abc", URLS, strict=True)
        }
        self.dialed: list[int] = []
        self.gate: asyncio.Event | None = None

    async def send(self, index: int, url: str) -> PostResult:
        self.dialed.append(index)
        if self.gate is not None:
            await self.gate.wait()
        queue = self.answers.setdefault(url, deque())
        return queue.popleft() if queue else OK


def receivers(clock: FakeClock, urls: tuple[str, ...] = URLS) -> Receivers:
    return Receivers(urls, clock=clock)


async def test_the_primary_takes_the_attempt_and_failures_move_on_in_order() -> None:
    """A refusal and a 503 fail over in list order; each receiver is dialed once."""
    clock = FakeClock(T0)
    script = Script(a=[REFUSED], b=[BUSY])
    result = await receivers(clock).sweep(script.send, deadline=FAR)
    assert script.dialed == [0, 1, 2]
    assert [d.index for d in result.dialed] == [0, 1, 2]
    assert result.last == OK


async def test_a_request_error_ends_the_attempt_on_its_receiver() -> None:
    """A 404 is the same on every receiver: no failover."""
    clock = FakeClock(T0)
    script = Script(a=[GONE])
    result = await receivers(clock).sweep(script.send, deadline=FAR)
    assert (script.dialed, result.last) == ([0], GONE)


async def test_a_sweep_failed_over_to_the_end_reports_every_dial() -> None:
    """Every receiver failed: three dials, the latest advised wait kept."""
    clock = FakeClock(T0)
    script = Script(a=[LATER], b=[BUSY], c=[REFUSED])
    result = await receivers(clock).sweep(script.send, deadline=FAR)
    assert [d.outcome for d in result.dialed] == [LATER, BUSY, REFUSED]
    assert result.retry_at == T0 + timedelta(seconds=30)


async def test_three_blind_failures_open_the_primary_and_one_probe_brings_it_back() -> None:
    """503 three times: the primary's breaker opens and the second receiver serves; after the
    5 s cooldown exactly one attempt probes the primary (a concurrent one goes to the second);
    once the probe is answered every attempt goes to the primary again."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[BUSY, BUSY, BUSY])
    for _ in range(3):
        assert (await chosen.sweep(script.send, deadline=FAR)).last == OK
    assert script.dialed == [0, 1, 0, 1, 0, 1]
    assert chosen.states(clock.now()) == (BreakerState.OPEN, BreakerState.CLOSED)
    report = chosen.report(clock.now())
    assert (report.active, report.all_down) == (1, False)
    script.dialed.clear()
    await chosen.sweep(script.send, deadline=FAR)
    assert script.dialed == [1]
    clock.advance(5)
    script.dialed.clear()
    script.gate = asyncio.Event()
    probe = asyncio.ensure_future(chosen.sweep(script.send, deadline=FAR))
    other = asyncio.ensure_future(chosen.sweep(script.send, deadline=FAR))
    await asyncio.sleep(0)
    assert script.dialed == [0, 1]  # one probe at the primary, the other attempt at the second
    script.gate.set()
    assert [(await probe).receiver, (await other).receiver] == [0, 1]
    assert chosen.states(clock.now()) == (BreakerState.CLOSED, BreakerState.CLOSED)
    script.gate, script.dialed = None, []
    for _ in range(3):
        await chosen.sweep(script.send, deadline=FAR)
    assert script.dialed == [0, 0, 0]
    assert chosen.report(clock.now()).active == 0


async def test_throttles_fail_over_but_never_open_a_breaker() -> None:
    """A primary answering 429 with Retry-After ten times stays closed; the second serves."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[LATER] * 10)
    for _ in range(10):
        assert (await chosen.sweep(script.send, deadline=FAR)).receiver == 1
    assert chosen.states(clock.now()) == (BreakerState.CLOSED, BreakerState.CLOSED)
    assert chosen.pool.endpoints[0].health.last_error is ErrorClass.THROTTLED


async def test_a_410_disables_its_receiver_until_enabled_and_the_attempt_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """5i: 410 from the primary: the same attempt goes to the second; the primary is disabled
    (one WARN, even when two attempts in flight both hear it), never dialed again, reported
    disabled and not active, its breaker closed; enable() gives it back."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[RETIRED, RETIRED])
    script.gate = asyncio.Event()
    both = [asyncio.ensure_future(chosen.sweep(script.send, deadline=FAR)) for _ in range(2)]
    await asyncio.sleep(0)
    script.gate.set()
    results = [await sweep for sweep in both]
    script.gate = None
    assert [r.last for r in results] == [OK, OK]
    assert script.dialed == [0, 0, 1, 1]
    assert [r.getMessage() for r in caplog.records if "410" in r.getMessage()] == [
        "webhook receiver 0 answered 410 Gone: disabled until its receivers change (a URL, the "
        "secret or the sink kind) or an operator replays an incident"
    ]
    script.dialed.clear()
    assert (await chosen.sweep(script.send, deadline=FAR)).receiver == 1
    assert script.dialed == [1]
    report = chosen.report(clock.now())
    assert (report.disabled, report.active, report.all_down) == (frozenset({0}), 1, False)
    assert chosen.states(clock.now()) == (BreakerState.CLOSED, BreakerState.CLOSED)
    assert chosen.enable() == 1
    assert chosen.enable() == 0
    script.dialed.clear()
    await chosen.sweep(script.send, deadline=FAR)
    assert script.dialed == [0]


async def test_every_receiver_gone_admits_nothing_and_a_repoint_keeps_who_is_gone() -> None:
    """Both answer 410: nothing admits, an attempt dials nothing, all are down; a repointed
    list keeps a still-listed receiver disabled and forgets one no longer listed."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[RETIRED], b=[RETIRED])
    result = await chosen.sweep(script.send, deadline=FAR)
    assert [d.outcome for d in result.dialed] == [RETIRED, RETIRED]
    assert not chosen.admits(clock.now())
    assert not chosen.any_closed(clock.now())
    assert chosen.report(clock.now()).all_down
    assert (await chosen.sweep(script.send, deadline=FAR)).dialed == ()
    assert chosen.repoint((URLS[2], URLS[1]))
    assert chosen.disabled == frozenset({1})
    assert chosen.repoint(URLS[:2])
    assert chosen.disabled == frozenset({1})
    assert chosen.admits(clock.now())


async def test_all_down_dials_nothing_until_a_cooldown_ends() -> None:
    """Both refuse three times: no breaker is closed (all down), an attempt dials nothing; after
    the cooldown the primary is probed first."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[REFUSED] * 4, b=[REFUSED] * 3)
    for _ in range(3):
        await chosen.sweep(script.send, deadline=FAR)
    report = chosen.report(clock.now())
    assert (report.active, report.all_down, chosen.admits(clock.now())) == (None, True, False)
    script.dialed.clear()
    assert (await chosen.sweep(script.send, deadline=FAR)).dialed == ()
    assert script.dialed == []
    clock.advance(5)
    assert chosen.admits(clock.now())
    assert not chosen.any_closed(clock.now())
    result = await chosen.sweep(script.send, deadline=FAR)
    assert [d.index for d in result.dialed] == [0, 1]  # the primary's probe failed: the second's
    assert chosen.report(clock.now()).active == 1


async def test_no_dial_starts_at_or_after_the_deadline() -> None:
    """The deadline bounds the sweep: none at all when it has passed, and no further receiver
    once a slow dial used the time up."""
    clock = FakeClock(T0)
    chosen = receivers(clock)
    script = Script(a=[BUSY])
    assert (await chosen.sweep(script.send, deadline=T0)).dialed == ()

    async def slow(index: int, url: str) -> PostResult:
        clock.advance(10)
        return await script.send(index, url)

    result = await chosen.sweep(slow, deadline=T0 + timedelta(seconds=5))
    assert [d.index for d in result.dialed] == [0]


async def test_a_cancelled_probe_frees_its_slot() -> None:
    """A probe cancelled in flight is handed back: the next attempt probes instead."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:1])
    script = Script(a=[REFUSED] * 3)
    for _ in range(3):
        await chosen.sweep(script.send, deadline=FAR)
    clock.advance(5)
    script.gate = asyncio.Event()
    probe = asyncio.ensure_future(chosen.sweep(script.send, deadline=FAR))
    await asyncio.sleep(0)
    assert not chosen.admits(clock.now())  # the one probe is out
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert chosen.admits(clock.now())
    script.gate = None
    assert (await chosen.sweep(script.send, deadline=FAR)).last == OK
    assert chosen.states(clock.now()) == (BreakerState.CLOSED,)


async def test_a_repointed_list_keeps_known_receivers_and_starts_new_ones_afresh() -> None:
    """A receiver still listed keeps breaker and health wherever it moves; a new URL starts
    closed and fresh; the same list changes nothing."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[REFUSED] * 3, b=[REFUSED])
    for _ in range(3):
        await chosen.sweep(script.send, deadline=FAR)
    old_a = chosen.pool.endpoints[0]
    assert not chosen.repoint(URLS[:2])
    assert chosen.repoint((URLS[2], URLS[0]))
    fresh, moved = chosen.pool.endpoints
    assert (moved.breaker, moved.health) == (old_a.breaker, old_a.health)
    assert fresh.breaker.state is BreakerState.CLOSED
    assert fresh.health.calls == 0
    assert (fresh.name, moved.name) == ("0", "1")
    assert (chosen.urls, chosen.epoch) == ((URLS[2], URLS[0]), 1)


async def test_an_attempt_begun_on_the_old_list_finishes_there_and_records_nothing_new() -> None:
    """The list changes while a dial is in flight: that dial stands, no further receiver of the
    old list is tried, and the new list's records stay untouched."""
    clock = FakeClock(T0)
    chosen = receivers(clock, URLS[:2])
    script = Script(a=[BUSY])
    script.gate = asyncio.Event()
    running = asyncio.ensure_future(chosen.sweep(script.send, deadline=FAR))
    await asyncio.sleep(0)
    chosen.repoint((URLS[0], URLS[2]))
    script.gate.set()
    result = await running
    assert ([d.index for d in result.dialed], result.last) == ([0], BUSY)
    assert [e.health.calls for e in chosen.pool.endpoints] == [0, 0]


def test_a_receiver_list_is_never_empty() -> None:
    """A Receivers list with no receiver is refused."""
    with pytest.raises(ValueError, match="receiver"):
        Receivers((), clock=FakeClock(T0))
