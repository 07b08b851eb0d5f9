"""The link's life with several brokers, on fake connections and a fake clock: all down, the
background reconnect, leases across a failover, and closing."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from fleetd.clock import FakeClock
from fleetd.errors import InboxUnavailableError
from fleetd.inbox import amqp_link
from fleetd.inbox.amqp_connect import Channels, Generation
from fleetd.inbox.amqp_link import AmqpLink
from fleetd.inbox.codec import DecodeReason

URLS = ("amqp://a/", "amqp://b/")


@dataclass
class FakeConnection:
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False

    async def close(self) -> None:
        self.closed = True
        self.connected.clear()


class FakeLane:
    async def copy(self, key: str, message: AbstractIncomingMessage, reason: DecodeReason) -> None:
        raise AssertionError("these link tests decode nothing, so quarantine nothing")

    async def close(self) -> None:
        return None


class Brokers:
    """Which URLs answer; every connection made, in order."""

    def __init__(self) -> None:
        self.up: set[str] = set(URLS)
        self.made: list[tuple[str, FakeConnection]] = []

    async def open(self, index: int, url: str, **_: Any) -> Generation:
        if url not in self.up:
            try:
                raise InboxUnavailableError("connect") from ConnectionRefusedError(111, "no")
            except InboxUnavailableError as error:
                raise error from error.__cause__
        connection = FakeConnection()
        connection.connected.set()
        self.made.append((url, connection))
        unused = cast(Any, None)  # the link never touches the channels itself
        channels = Channels(
            admin=unused, publisher=unused, consumer=unused, browser=unused, lane=FakeLane()
        )
        return Generation(index=index, url=url, connection=cast(Any, connection), channels=channels)


@pytest.fixture
def brokers(monkeypatch: pytest.MonkeyPatch) -> Brokers:
    fake = Brokers()
    monkeypatch.setattr(amqp_link, "open_generation", fake.open)
    return fake


def link(clock: FakeClock, urls: tuple[str, ...] = URLS) -> AmqpLink:
    return AmqpLink(
        urls,
        clock=clock,
        connect_timeout=1.0,
        operation_timeout=1.0,
        lane_factory=lambda connection, timeout: FakeLane(),
    )


async def use(target: AmqpLink) -> None:
    async with target.lease():
        pass


async def test_every_broker_down_fails_fast_until_the_reconnect_finds_one(
    brokers: Brokers,
) -> None:
    """A failed sweep starts the background reconnect; calls meanwhile fail at once without
    dialing; within two reconnect intervals of a broker answering, the link is up again."""
    clock = FakeClock()
    target = link(clock)
    brokers.up.clear()
    with pytest.raises(InboxUnavailableError):
        await use(target)
    assert not target.reachable()
    with pytest.raises(InboxUnavailableError, match="every broker"):
        await use(target)
    assert brokers.made == []
    brokers.up.add(URLS[1])
    waiting = asyncio.ensure_future(target.wait_connected())
    await clock.run(2.0, step=0.5)
    await asyncio.wait_for(waiting, timeout=1)
    assert target.reachable()
    assert target.report().active == 1
    await use(target)
    await target.close()


async def test_callers_waiting_on_a_failed_sweep_do_not_sweep_again(
    brokers: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent calls while every broker is down cost one sweep: the rest fail at once."""
    target = link(FakeClock())
    brokers.up.clear()
    dialed: list[str] = []
    opening = brokers.open

    async def counted(index: int, url: str, **kwargs: Any) -> Generation:
        dialed.append(url)
        return await opening(index, url, **kwargs)

    monkeypatch.setattr(amqp_link, "open_generation", counted)
    results = await asyncio.gather(*(use(target) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, InboxUnavailableError) for r in results)
    assert dialed == list(URLS)
    await target.close()


async def test_a_dropped_connection_retires_after_its_lease_and_fails_over(
    brokers: Brokers,
) -> None:
    """A lease taken before the drop keeps its connection until it ends; the next lease rides
    out, fails over, and the old connection is closed once its lease is over."""
    clock = FakeClock()
    target = link(clock)
    async with target.lease():
        first = brokers.made[0][1]
        first.connected.clear()  # the broker dropped it; robust reconnect does not succeed
        brokers.up.discard(URLS[0])
        pending = asyncio.ensure_future(use(target))
        await clock.run(1.5, step=0.25)
        await asyncio.wait_for(pending, timeout=1)
        assert not first.closed  # the first lease still holds it
        assert target.report().active == 1
    await asyncio.sleep(0)
    assert first.closed
    await target.close()
    assert brokers.made[1][1].closed


async def test_closing_refuses_further_leases(brokers: Brokers) -> None:
    """After close every lease is refused and no connection stays open."""
    target = link(FakeClock())
    await use(target)
    await target.close()
    with pytest.raises(InboxUnavailableError, match="closed"):
        await use(target)
    assert all(connection.closed for _, connection in brokers.made)


async def test_readiness_follows_failover_not_one_failed_call(brokers: Brokers) -> None:
    """2c: a call on the primary times out once, then twice: the primary's breaker still admits,
    so failover stays on it and the link stays reachable (readiness agrees). The third opens it:
    still reachable (the fallback admits), and the next call lands on the fallback. Only when
    no broker answers a sweep is the link unreachable, until one does."""
    clock = FakeClock()
    target = link(clock)
    await use(target)
    assert target.report().active == 0
    for _ in range(2):
        target.failed(InboxUnavailableError("collect: the broker is unavailable"))
        assert target.reachable()
        await use(target)
        assert target.report().active == 0
    target.failed(InboxUnavailableError("collect"))
    assert target.reachable()
    brokers.up.discard(URLS[0])
    await use(target)
    assert (target.report().active, target.reachable()) == (1, True)

    brokers.made[-1][1].connected.clear()  # the fallback drops too, and nothing answers
    brokers.up.clear()
    target.failed(InboxUnavailableError("collect"))  # the drop was noticed: no ride-out
    with pytest.raises(InboxUnavailableError):
        await use(target)
    assert not target.reachable()
    assert not target.report().reachable
    brokers.up.add(URLS[1])
    await clock.run(6.0, step=0.5)  # both breakers are open for 5 s; then the reconnect finds it
    assert (target.report().active, target.reachable()) == (1, True)
    await target.close()
    assert not target.reachable()


async def test_one_broker_keeps_its_single_broker_readiness(brokers: Brokers) -> None:
    """With one URL there is no failover: a failed call makes it unreachable until a call
    reaches it again (exactly the single-broker behaviour)."""
    target = link(FakeClock(), URLS[:1])
    await use(target)
    target.failed(InboxUnavailableError("collect"))
    assert not target.reachable()
    await use(target)
    assert target.reachable()
    await target.close()


async def test_an_outage_is_one_warning_and_its_end_one_info(
    brokers: Brokers, caplog: pytest.LogCaptureFixture
) -> None:
    """5e: one broker failing call after call is one WARNING, and the call that reaches it again
    one INFO; with two, a broker that stops answering is one WARNING however often it is
    probed, every broker down one more, and the way back one INFO each."""
    caplog.set_level(logging.INFO, logger="fleetd.inbox")
    single = link(FakeClock(), URLS[:1])
    await use(single)
    for _ in range(3):
        single.failed(InboxUnavailableError("collect"))
    await use(single)
    await single.close()
    assert lines(caplog) == [
        ("WARNING", "inbox unreachable: the broker does not answer; calls fail until it does"),
        ("INFO", "inbox reachable again"),
    ]
    caplog.clear()

    clock = FakeClock()
    brokers.up.discard(URLS[0])
    several = link(clock)
    for _ in range(3):  # the first sweep, then a probe of the primary on each call
        await use(several)
        await asyncio.sleep(0)
    brokers.made[-1][1].connected.clear()
    brokers.up.clear()
    several.failed(InboxUnavailableError("collect"))
    with pytest.raises(InboxUnavailableError):
        await use(several)
    brokers.up.add(URLS[1])
    await clock.run(6.0, step=0.5)
    await several.close()
    assert lines(caplog) == [
        ("WARNING", "inbox broker 0 does not answer (refused)"),
        ("WARNING", "inbox broker 1 does not answer (reset)"),
        ("WARNING", "inbox unreachable: no broker answers; calls fail until one does"),
        ("INFO", "inbox broker 1 answers again"),
        ("INFO", "inbox reachable again"),
    ]


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """The inbox's WARNING lines and its lines about answering again, in order."""
    return [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name == "fleetd.inbox" and (r.levelno >= logging.WARNING or "again" in r.getMessage())
    ]
