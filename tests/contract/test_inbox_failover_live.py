"""Several brokers on the live RabbitMQ: failover, all brokers down, return to the primary, and a
reload that repoints the list — through the adapter and through the service's probes."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.errors import InboxUnavailableError
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.resilience import BreakerState, ErrorClass
from fleetd.testing import LEAD_TOKEN, build_test_fleet, hold_calls, sample_document

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import RawBroker, TcpProxy

pytest_plugins = ["tests.contract.inbox_fixtures"]
pytestmark = pytest.mark.amqp

BROKER = "amqp://guest:guest@127.0.0.1:{port}/?reconnect_interval=0.1"


def closed_port() -> int:
    """A port nothing listens on: bound to get a free number, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def refused_url() -> str:
    return BROKER.format(port=closed_port())


def reply(key: str, msg_id: str, content: str = "answer") -> InboxRecord:
    return InboxRecord(
        msg_id=msg_id,
        kind=MessageKind.REPLY,
        recipient_lead=key,
        target="member-1",
        content=content,
        ticket=f"t-{msg_id}",
        created_at_epoch_millis=1_700_000_000_000,
    )


async def eventually(condition: Callable[[], bool], what: str, within: float = 10.0) -> None:
    """Wait (bounded) for a background connect to land; fail naming ``what``."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_a_refusing_primary_fails_over_to_the_second_broker(
    inbox_broker: RawBroker, inbox_new_key: Callable[[], str], inbox_amqp_url: str
) -> None:
    """The first broker refuses connections: own, publish and collect run on the second, the
    inbox stays reachable, and the primary shows its refusal, by index, never by URL."""
    key = inbox_broker.track(inbox_new_key())
    inbox = AmqpInbox([refused_url(), inbox_amqp_url], operation_timeout=2.0)
    try:
        await inbox.own(key)
        assert await inbox.publish(reply(key, "m-1")) is True
        assert [r.msg_id for r in await inbox.collect(key)] == ["m-1"]
        assert inbox.reachable()
        state = inbox.broker_report()
        assert state.active == 1
        primary, second = state.pool.endpoints
        assert primary.health.last_error is ErrorClass.REFUSED
        assert primary.health.reachable is False
        assert second.health.calls >= 3
        assert second.health.latency is not None
    finally:
        await inbox.close()


async def test_the_service_stays_ready_on_the_second_broker(
    tmp_path: Path, inbox_broker: RawBroker, inbox_new_key: Callable[[], str]
) -> None:
    """Configured through inbox.amqp.urls, fleetd serves replies from the second broker and
    /readyz answers ready while the first refuses."""
    name = inbox_broker.track(inbox_new_key())
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    document["inbox"] = {
        "backend": "amqp",
        "amqp": {"urls": [refused_url(), BROKER.format(port=5672)], "connectTimeoutMs": 2000},
    }
    fleet = build_test_fleet(tmp_path, document=document, inbox=None)
    lead = Caller(role=Role.LEAD, name=name)
    app = create_app(fleet.service)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://fleetd",
        headers={"Authorization": f"Bearer {LEAD_TOKEN}"},
    ) as http:
        try:
            await fleet.service.start()
            sid = (await fleet.ok("fleet_spawn", lead, profile="codex"))["sessionId"]
            await fleet.service.registry.contact(fleet.member(sid))
            ticket = (await fleet.ok("fleet_send", lead, target=sid, prompt="x"))["ticket"]
            await fleet.ok("fleet_reply", fleet.member(sid), content="on the second broker")
            messages = (await fleet.ok("fleet_poll", lead))["messages"]
            assert [(m["ticket"], m["content"]) for m in messages] == [
                (ticket, "on the second broker")
            ]
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
        finally:
            await fleet.service.scheduler.stop()
            await fleet.service.inbox.close()


async def test_every_broker_down_is_not_ready_alive_and_loses_nothing(
    tmp_path: Path,
    inbox_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """Both brokers refuse: /readyz 503, /livez 200, a reply is refused (retryable) and a
    fallback result waits in memory; once the broker is back the reply stored before the
    outage, the held result and the member's retried reply all reach the lead, each once."""
    name = inbox_broker.track(inbox_new_key())
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    inbox = AmqpInbox([refused_url(), BROKER.format(port=inbox_proxy.port)], operation_timeout=1.0)
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox)
    lead = Caller(role=Role.LEAD, name=name)
    app = create_app(fleet.service)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fleetd")
    try:
        await fleet.service.start()
        first = (await fleet.ok("fleet_spawn", lead, profile="codex"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(first))
        stored = (await fleet.ok("fleet_send", lead, target=first, prompt="x"))["ticket"]
        await fleet.ok("fleet_reply", fleet.member(first), content="stored before")
        held_sid = (await fleet.ok("fleet_spawn", lead, profile="sonnet"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(held_sid))
        held = (await fleet.ok("fleet_send", lead, target=held_sid, prompt="y"))["ticket"]
        second = (await fleet.ok("fleet_spawn", lead, profile="opencode"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(second))
        retried = (await fleet.ok("fleet_send", lead, target=second, prompt="z"))["ticket"]

        inbox_proxy.cut()
        refused = await fleet.call("fleet_reply", fleet.member(second), content="retry me")
        assert refused.error is not None
        assert refused.error.code == "inbox_unavailable"
        fleet.set_status(held_sid, AgentStatus.WORKING)
        await fleet.poll()
        fleet.set_status(held_sid, AgentStatus.DONE)
        await fleet.poll()
        await fleet.poll(1.0)
        assert [r.ticket for r in fleet.bridge.reads.unpublished] == [held]
        assert not inbox.reachable()
        not_ready = await http.get("/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json()["dependencies"]["inbox"] == {
            "kind": "amqp",
            "allDown": True,
            "active": None,
        }
        assert (await http.get("/livez")).status_code == 200
        assert inbox.broker_report().active is None

        inbox_proxy.restore()
        await asyncio.wait_for(inbox.wait_connected(), timeout=10)
        await fleet.service.push.push_once()  # flushes what waited in memory
        assert fleet.bridge.reads.unpublished == []
        await fleet.ok("fleet_reply", fleet.member(second), content="retry me")
        assert (await http.get("/readyz")).status_code == 200
        messages = (await fleet.ok("fleet_poll", lead))["messages"]
        assert sorted(m["ticket"] for m in messages) == sorted([stored, held, retried])
    finally:
        await http.aclose()
        await fleet.service.scheduler.stop()
        await inbox.close()


async def test_one_failed_call_on_a_hanging_primary_leaves_the_service_ready(
    tmp_path: Path,
    inbox_proxy: TcpProxy,
    inbox_second_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """2c: the primary hangs (its connection stays up, calls time out) while the second broker
    is healthy. After one and two failed publishes failover stays on the primary and /readyz
    stays 200 with allDown false; the third opens its breaker, /readyz is still ready, and the
    next publish is served by the second broker."""
    name = inbox_broker.track(inbox_new_key())
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    inbox = AmqpInbox(
        [BROKER.format(port=inbox_proxy.port), BROKER.format(port=inbox_second_proxy.port)],
        operation_timeout=0.5,
    )
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(fleet.service)), base_url="http://fleetd"
    )

    async def readiness() -> tuple[int, dict[str, object]]:
        answer = await http.get("/readyz")
        return answer.status_code, answer.json()["dependencies"]["inbox"]

    try:
        await fleet.service.own_lead_keys()  # what start() does first; no loop calls the inbox
        fleet.service.started = True
        assert inbox.broker_report().active == 0
        inbox_proxy.freeze()
        for n in range(2):
            with pytest.raises(InboxUnavailableError):
                await inbox.publish(reply(name, f"m-{n}"))
            assert await readiness() == (200, {"kind": "amqp", "allDown": False, "active": 0})
        with pytest.raises(InboxUnavailableError):
            await inbox.publish(reply(name, "m-2"))
        assert inbox.broker_report().pool.endpoints[0].breaker.state is BreakerState.OPEN
        assert (await readiness())[0] == 200
        assert await inbox.publish(reply(name, "m-3")) is True
        assert await readiness() == (200, {"kind": "amqp", "allDown": False, "active": 1})
    finally:
        inbox_proxy.thaw()
        await http.aclose()
        await fleet.service.scheduler.stop()
        await inbox.close()


async def test_sticky_primary_returns_once_the_primary_answers(
    inbox_proxy: TcpProxy,
    inbox_second_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """While the primary is cut the fallback serves; once it answers again, the next calls
    move back to it and the fallback's connection is closed."""
    key = inbox_broker.track(inbox_new_key())
    inbox_proxy.cut()
    inbox = AmqpInbox(
        [BROKER.format(port=inbox_proxy.port), BROKER.format(port=inbox_second_proxy.port)],
        operation_timeout=2.0,
    )
    try:
        await inbox.own(key)
        assert inbox.broker_report().active == 1
        inbox_proxy.restore()
        await inbox.publish(reply(key, "m-1"))  # a call on the fallback starts the probe
        await eventually(lambda: inbox.broker_report().active == 0, "the return to the primary")
        await inbox.publish(reply(key, "m-2"))
        assert [r.msg_id for r in await inbox.collect(key)] == ["m-1", "m-2"]
        await eventually(lambda: not inbox_second_proxy.live, "the fallback connection to close")
        assert inbox.broker_report().pool.endpoints[0].breaker.state is BreakerState.CLOSED
    finally:
        await inbox.close()


async def test_a_dropped_connection_fails_over_within_one_call(
    inbox_proxy: TcpProxy,
    inbox_second_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """The primary's connection drops and it refuses: once the drop is noticed, the next
    publish rides out briefly, strikes it and lands on the second broker."""
    key = inbox_broker.track(inbox_new_key())
    inbox = AmqpInbox(
        [BROKER.format(port=inbox_proxy.port), BROKER.format(port=inbox_second_proxy.port)],
        operation_timeout=2.0,
    )
    try:
        await inbox.own(key)
        assert inbox.broker_report().active == 0
        inbox_proxy.cut()
        await eventually(lambda: inbox.broker_report().active is None, "the drop to be noticed")
        assert await inbox.publish(reply(key, "m-1")) is True
        assert inbox.broker_report().active == 1
        assert [r.msg_id for r in await inbox.collect(key)] == ["m-1"]
    finally:
        await inbox.close()


async def test_a_reload_repoints_after_the_call_in_flight(
    inbox_proxy: TcpProxy,
    inbox_second_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """A call under way when the list changes finishes on the old broker; the next calls go to
    the new one, which starts with a fresh closed breaker; the old connection then closes."""
    key = inbox_broker.track(inbox_new_key())
    inbox = AmqpInbox([BROKER.format(port=inbox_proxy.port)], operation_timeout=2.0)
    try:
        await inbox.own(key)
        await inbox.publish(reply(key, "m-1"))
        gate = hold_calls(inbox._collector, "take")
        in_flight: Awaitable[list[InboxRecord]] = asyncio.ensure_future(inbox.collect(key))
        await gate.entered.wait()
        inbox.repoint(
            [BROKER.format(port=inbox_second_proxy.port)],
            connect_timeout=2.0,
            operation_timeout=2.0,
        )
        assert inbox_proxy.live  # the old connection still serves the call in flight
        gate.release()
        assert [r.msg_id for r in await in_flight] == ["m-1"]
        await eventually(lambda: not inbox_proxy.live, "the old connection to close")
        inbox_proxy.cut()
        assert await inbox.publish(reply(key, "m-2")) is True  # on the new broker
        assert inbox_second_proxy.accepted == 1
        state = inbox.broker_report()
        assert state.active == 0
        assert state.pool.endpoints[0].breaker.state is BreakerState.CLOSED
        assert state.pool.endpoints[0].health.last_error is None
    finally:
        await inbox.close()
