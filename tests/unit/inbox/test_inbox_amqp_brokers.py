"""Choosing a broker: the sweep over the list, its records, a repointed list, and error classes."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
from aiormq import exceptions as amqp

from fleetd.clock import FakeClock
from fleetd.errors import InboxUnavailableError
from fleetd.inbox.amqp_brokers import Brokers
from fleetd.inbox.amqp_connect import classify
from fleetd.resilience import BreakerState, ErrorClass, Outcome

URLS = ("amqp://a/", "amqp://b/", "amqp://c/")


def failing(cause: BaseException) -> InboxUnavailableError:
    try:
        raise InboxUnavailableError("connect: the broker is unavailable") from cause
    except InboxUnavailableError as error:
        return error


REFUSED = ConnectionRefusedError(111, "refused")
AUTH = amqp.ProbableAuthenticationError("ACCESS_REFUSED")


class Dialer:
    """Answers each URL with a connection name, or raises the failure given for it."""

    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = failures or {}
        self.dialed: list[str] = []
        self.discarded: list[str] = []

    async def dial(self, index: int, url: str) -> str:
        self.dialed.append(url)
        failure = self.failures.get(url)
        if failure is not None:
            raise failing(failure)
        return f"conn-{index}"

    async def discard(self, found: str) -> None:
        self.discarded.append(found)


async def sweep(brokers: Brokers, dialer: Dialer, before: int | None = None) -> str:
    return await brokers.sweep(dialer.dial, dialer.discard, connect_timeout=1.0, before=before)


async def test_the_primary_is_dialed_first_and_failures_move_on() -> None:
    """Refusals fail over in list order; each broker is dialed once per sweep."""
    brokers = Brokers(URLS, clock=FakeClock())
    dialer = Dialer({URLS[0]: REFUSED, URLS[1]: TimeoutError()})
    assert await sweep(brokers, dialer) == "conn-2"
    assert dialer.dialed == list(URLS)
    healths = [e.health for e in brokers.pool.endpoints]
    assert [h.last_error for h in healths] == [ErrorClass.REFUSED, ErrorClass.TIMEOUT, None]
    assert healths[2].reachable is True


async def test_an_authentication_failure_ends_the_sweep() -> None:
    """Credentials refused are the same everywhere: no failover, the error stands."""
    brokers = Brokers(URLS, clock=FakeClock())
    dialer = Dialer({URLS[0]: AUTH})
    with pytest.raises(InboxUnavailableError):
        await sweep(brokers, dialer)
    assert dialer.dialed == [URLS[0]]


async def test_open_breakers_are_skipped_until_their_cooldown_ends() -> None:
    """Three failed sweeps open every breaker: the next sweep dials nothing; after the
    cooldown the primary is probed first."""
    clock = FakeClock()
    brokers = Brokers(URLS[:2], clock=clock)
    dialer = Dialer({URLS[0]: REFUSED, URLS[1]: REFUSED})
    for _ in range(3):
        with pytest.raises(InboxUnavailableError):
            await sweep(brokers, dialer)
    assert [e.breaker.state for e in brokers.pool.endpoints] == [BreakerState.OPEN] * 2
    dialer.dialed.clear()
    with pytest.raises(InboxUnavailableError, match="all_down"):
        await sweep(brokers, dialer)
    assert dialer.dialed == []
    clock.advance(5)
    dialer.failures.clear()
    assert await sweep(brokers, dialer) == "conn-0"
    assert brokers.pool.endpoints[0].breaker.state is BreakerState.CLOSED


async def test_a_probe_before_an_index_dials_only_the_brokers_ahead_of_it() -> None:
    """The return-to-primary probe never dials the broker in use or those after it."""
    brokers = Brokers(URLS, clock=FakeClock())
    dialer = Dialer({URLS[0]: REFUSED})
    with pytest.raises(InboxUnavailableError):
        await sweep(brokers, dialer, before=1)
    assert dialer.dialed == [URLS[0]]
    assert brokers.lower_admits(2)
    assert not brokers.lower_admits(0)


async def test_one_url_never_opens_its_breaker() -> None:
    """A single broker keeps today's behaviour: its failures are recorded, never gated."""
    brokers = Brokers(URLS[:1], clock=FakeClock())
    dialer = Dialer({URLS[0]: REFUSED})
    for _ in range(10):
        with pytest.raises(InboxUnavailableError):
            await brokers.dial_one(dialer.dial)
    endpoint = brokers.pool.endpoints[0]
    assert endpoint.breaker.state is BreakerState.CLOSED
    assert endpoint.health.failures == 10
    dialer.failures.clear()
    assert await brokers.dial_one(dialer.dial) == "conn-0"
    assert brokers.pool.endpoints[0].health.reachable is True
    assert not brokers.multi


async def test_a_repointed_list_keeps_the_records_of_brokers_still_listed() -> None:
    """A broker still listed keeps its breaker and health (under its new index); a new one
    starts closed and fresh; the same list again changes nothing."""
    brokers = Brokers(URLS[:2], clock=FakeClock())
    dialer = Dialer({URLS[0]: REFUSED})
    await sweep(brokers, dialer)
    kept = brokers.pool.endpoints[1]
    assert brokers.repoint(["amqp://new/", URLS[1]]) is True
    assert brokers.epoch == 1
    fresh, moved = brokers.pool.endpoints
    assert (fresh.name, moved.name) == ("0", "1")
    assert fresh.health.calls == 0
    assert fresh.breaker.state is BreakerState.CLOSED
    assert (moved.breaker, moved.health) == (kept.breaker, kept.health)
    assert brokers.repoint(["amqp://new/", URLS[1]]) is False
    assert brokers.repoint([]) is False


async def test_an_attempt_begun_before_a_repoint_records_nothing_in_the_new_list() -> None:
    """A dial that lands after the list changed is discarded and the sweep refuses; a dial
    that fails after it is reported as it is, recording nothing."""
    brokers = Brokers(URLS[:2], clock=FakeClock())
    gate = asyncio.Event()

    async def slow(index: int, url: str) -> str:
        await gate.wait()
        return f"conn-{index}"

    discarded: list[str] = []

    async def discard(found: str) -> None:
        discarded.append(found)

    pending = asyncio.ensure_future(brokers.sweep(slow, discard, connect_timeout=1.0))
    await asyncio.sleep(0)
    brokers.repoint(["amqp://x/", "amqp://y/"])
    gate.set()
    with pytest.raises(InboxUnavailableError, match="changed"):
        await pending
    assert discarded == ["conn-0"]
    assert all(e.health.calls == 0 for e in brokers.pool.endpoints)

    async def refusing(index: int, url: str) -> str:
        brokers.repoint(["amqp://z/", "amqp://w/"])
        raise failing(REFUSED)

    with pytest.raises(InboxUnavailableError):
        await brokers.sweep(refusing, discard, connect_timeout=1.0)
    assert all(e.health.calls == 0 for e in brokers.pool.endpoints)


async def test_a_cancelled_dial_hands_its_probe_back() -> None:
    """A probe cancelled mid-dial frees its half-open slot for the next consult."""
    clock = FakeClock()
    brokers = Brokers(URLS[:2], clock=clock)
    for _ in range(3):
        brokers.observe(0, Outcome(error=ErrorClass.REFUSED))
    clock.advance(5)

    async def hang(index: int, url: str) -> str:
        await asyncio.Event().wait()
        return "never"

    async def discard(found: str) -> None:
        return None

    pending = asyncio.ensure_future(brokers.sweep(hang, discard, connect_timeout=1.0))
    await asyncio.sleep(0)
    assert brokers.pool.endpoints[0].breaker.probing
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert not brokers.pool.endpoints[0].breaker.probing


def _looping() -> BaseException:
    first, second = OSError("a"), OSError("b")
    first.__context__ = second
    second.__context__ = first
    return first


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        (lambda: ConnectionRefusedError(111, "refused"), ErrorClass.REFUSED),
        (lambda: socket.gaierror(-2, "unknown host"), ErrorClass.REFUSED),
        (TimeoutError, ErrorClass.TIMEOUT),
        (lambda: amqp.ProbableAuthenticationError("ACCESS_REFUSED"), ErrorClass.AUTH),
        (lambda: ConnectionResetError(104, "reset"), ErrorClass.RESET),
        (_looping, ErrorClass.RESET),
    ],
)
def test_failures_are_classed_by_their_cause(
    cause: Callable[[], BaseException], expected: ErrorClass
) -> None:
    """Refused or unknown host, timeout, authentication, anything else a reset; a cause chain
    that loops back on itself still ends."""
    assert classify(failing(cause())) is expected
