"""The service on the live broker while the broker cannot be reached: fleet_reply and fleet_poll
refuse with a retryable error, and what is held in memory shows on fleet_list and /healthz."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.amqp import AmqpInbox
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet, sample_document

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import RawBroker, TcpProxy

pytest_plugins = ["tests.contract.inbox_fixtures"]
pytestmark = pytest.mark.amqp


@dataclass
class Outage:
    fleet: TestFleet
    lead: Caller
    proxy: TcpProxy
    http: httpx.AsyncClient
    inbox: AmqpInbox

    async def restore(self) -> None:
        """The broker is back: wait (bounded) for the robust reconnect before going on."""
        self.proxy.restore()
        await asyncio.wait_for(self.inbox.wait_connected(), timeout=10)


@pytest.fixture
async def outage(
    tmp_path: Path,
    inbox_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> AsyncIterator[Outage]:
    """A fleet whose AMQP inbox reaches the broker through a relay the test can cut."""
    name = inbox_broker.track(inbox_new_key())
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    url = f"amqp://guest:guest@127.0.0.1:{inbox_proxy.port}/?reconnect_interval=0.1"
    inbox = AmqpInbox(url, operation_timeout=1.0)
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox)
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    headers = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    try:
        await fleet.service.own_lead_keys()
        async with httpx.AsyncClient(
            transport=transport, base_url="http://fleetd", headers=headers
        ) as http:
            yield Outage(
                fleet=fleet,
                lead=Caller(role=Role.LEAD, name=name),
                proxy=inbox_proxy,
                http=http,
                inbox=inbox,
            )
    finally:
        await inbox.close()


async def _delegate(outage: Outage, profile: str) -> tuple[str, str]:
    fleet = outage.fleet
    sid = (await fleet.ok("fleet_spawn", outage.lead, profile=profile))["sessionId"]
    await fleet.service.registry.contact(fleet.member(sid))
    ticket = (await fleet.ok("fleet_send", outage.lead, target=sid, prompt="x"))["ticket"]
    return sid, ticket


async def test_a_reply_is_answered_only_once_stored_and_refused_while_the_broker_is_away(
    outage: Outage,
) -> None:
    """While the broker is unreachable fleet_reply is refused and retryable, the ticket stays
    pending, and the member's retry after the broker returns reaches the lead exactly once."""
    fleet = outage.fleet
    sid, ticket = await _delegate(outage, "codex")
    outage.proxy.cut()
    refused = await fleet.call("fleet_reply", fleet.member(sid), content="precious answer")
    assert refused.error is not None
    assert refused.error.code == "inbox_unavailable"
    assert refused.error.hint["retryable"] is True
    assert "not stored" in refused.error.hint["action"]
    assert (await fleet.ok("fleet_poll", outage.lead, ticket=ticket))["status"] == "pending"
    assert fleet.bridge.reads.unpublished == []  # nothing lives only in memory
    await outage.restore()
    answer = await fleet.ok("fleet_reply", fleet.member(sid), content="precious answer")
    assert (answer["ticket"], answer["late"]) == (ticket, False)
    await fleet.inbox.close()  # a kill now loses nothing: the broker has the reply

    after = AmqpInbox(f"amqp://guest:guest@127.0.0.1:{outage.proxy.port}/")
    try:
        await after.own(outage.lead.name)
        records = await after.collect(outage.lead.name)
    finally:
        await after.close()
    assert [(r.ticket, r.content) for r in records] == [(ticket, "precious answer")]


async def test_a_poll_while_the_broker_is_away_is_a_retryable_refusal(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    """fleet_poll over HTTP answers 503 inbox_unavailable with a hint, not 500 internal_error
    with a traceback in the log, and the next poll after the broker returns gets the reply."""
    fleet = outage.fleet
    sid, ticket = await _delegate(outage, "codex")
    await fleet.ok("fleet_reply", fleet.member(sid), content="waiting for you")
    outage.proxy.cut()
    response = await outage.http.post("/v1/tools/fleet_poll", json={})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "inbox_unavailable"
    assert error["hint"]["retryable"] is True
    assert [
        r.getMessage() for r in caplog.records if r.exc_info and r.name.startswith("fleetd")
    ] == []
    await outage.restore()
    response = await outage.http.post("/v1/tools/fleet_poll", json={})
    assert response.status_code == 200, response.text
    messages = response.json()["result"]["messages"]
    assert [(m["ticket"], m["content"]) for m in messages] == [(ticket, "waiting for you")]


async def test_the_broker_s_own_record_shows_it_away_while_the_inbox_is_unreachable(
    outage: Outage,
) -> None:
    """fleet_list's dependencies and the endpoint metric agree with /readyz: once a call finds
    the connection down, the broker's endpoint reads unreachable with the failure counted (it
    used to read reachable, no failure, while allDown was true), and answered again once back."""
    outage.proxy.cut()
    assert (await outage.http.post("/v1/tools/fleet_poll", json={})).status_code == 503

    async def endpoint() -> dict[str, Any]:
        listed = (await outage.http.get("/v1/fleet")).json()["result"]
        inbox: dict[str, Any] = listed["dependencies"]["inbox"]
        assert inbox["kind"] == "amqp"
        [only] = inbox["endpoints"]
        return {"allDown": inbox["allDown"], **only}

    away = await endpoint()
    assert (away["allDown"], away["reachable"], away["lastError"]) == (True, False, "reset")
    assert away["failures"] >= 1
    metrics = outage.fleet.service.metrics.registry
    labels = {"kind": "amqp", "endpoint": "0"}
    assert metrics.get_sample_value("fleetd_dependency_endpoint_up", labels) == 0.0

    await outage.restore()
    assert (await outage.http.post("/v1/tools/fleet_poll", json={})).status_code == 200
    back = await endpoint()
    assert (back["allDown"], back["reachable"]) == (False, True)
    assert metrics.get_sample_value("fleetd_dependency_endpoint_up", labels) == 1.0


async def test_records_held_in_memory_show_on_fleet_list_and_healthz(outage: Outage) -> None:
    """A completion-fallback result (no member to retry it) waits in memory while the broker is
    away, and fleet_list and the /healthz inbox component count it until the inbox takes it."""
    fleet = outage.fleet
    sid, ticket = await _delegate(outage, "sonnet")
    health = (await outage.http.get("/healthz")).json()["components"]["inbox"]
    assert (health["status"], health["heldInMemory"]["records"]) == ("pass", 0)
    outage.proxy.cut()
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)
    assert (await fleet.ok("fleet_poll", outage.lead, ticket=ticket))["source"] == "raw_fallback"

    listed = (await outage.http.get("/v1/fleet")).json()["result"]["inbox"]["heldInMemory"]
    assert (listed["records"], listed["byLead"], listed["byKind"]) == (
        1,
        {outage.lead.name: 1},
        {"reply": 1},
    )
    health = (await outage.http.get("/healthz")).json()["components"]["inbox"]
    assert (health["status"], health["reachable"], health["heldInMemory"]["records"]) == (
        "fail",
        False,
        1,
    )
    ready = await outage.http.get("/readyz")
    assert (ready.status_code, ready.json()["inboxReachable"]) == (503, False)
    await fleet.service.start()  # readiness needs a started service; the inbox still refuses it
    ready = await outage.http.get("/readyz")
    assert (ready.status_code, ready.json()["inboxReachable"]) == (503, False)

    await outage.restore()
    await fleet.service.push.push_once()
    health = (await outage.http.get("/healthz")).json()["components"]["inbox"]
    assert (health["status"], health["heldInMemory"]["records"]) == ("pass", 0)
    ready = await outage.http.get("/readyz")
    assert (ready.status_code, ready.json()["inboxReachable"]) == (200, True)
    messages = (await fleet.ok("fleet_poll", outage.lead))["messages"]
    assert [m["ticket"] for m in messages] == [ticket]
    await fleet.service.scheduler.stop()


async def test_a_broker_outage_never_makes_a_call_wait_out_its_operation_timeout(
    tmp_path: Path,
    inbox_proxy: TcpProxy,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """With the default 10 s operation timeout and three leads, replies, polls, fleet_list and a
    fleet tick each answer within about a second while the broker is away (they used to take
    10-60 s, growing with the number of leads): only the first call to notice waits."""
    name = inbox_broker.track(inbox_new_key())
    others = [inbox_broker.track(inbox_new_key()) for _ in range(2)]
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}] + [
        {"name": other, "agent": other, "tokenEnv": f"T_{n}"} for n, other in enumerate(others)
    ]
    document["health"] = {"enabled": True}
    url = f"amqp://guest:guest@127.0.0.1:{inbox_proxy.port}/"
    inbox = AmqpInbox(url)
    environ = {f"T_{n}": f"token-of-lead-{n}-0123456789" for n in range(2)}
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox, environ=environ)
    lead = Caller(role=Role.LEAD, name=name)
    try:
        await fleet.service.own_lead_keys()
        sid = (await fleet.ok("fleet_spawn", lead, profile="codex"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(sid))
        await fleet.ok("fleet_send", lead, target=sid, prompt="x")
        inbox_proxy.cut()
        for call in (
            fleet.call("fleet_reply", fleet.member(sid), content="kept by the member"),
            fleet.call("fleet_poll", lead),
            fleet.call("fleet_list", lead),
            fleet.service.health.tick(),
            fleet.service.push.push_once(),
            fleet.call("fleet_list", lead),
            fleet.call("fleet_reply", fleet.member(sid), content="kept by the member"),
        ):
            started = time.monotonic()
            await call
            assert time.monotonic() - started < 1.5
        assert not inbox.reachable()
    finally:
        await inbox.close()
