"""The bridge on the real broker: replies survive a restart; held entries are no lead's backlog."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from fleetd.api.tools import Caller, Role
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.amqp_collect import _Round
from fleetd.inbox.codec import TYPED_MEDIA_TYPE, quarantine_queue_name, queue_name
from fleetd.testing import build_test_fleet, sample_document

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
pytestmark = pytest.mark.amqp


@pytest.fixture
def broker() -> str:
    try:
        socket.create_connection(("127.0.0.1", 5672), timeout=1.0).close()
    except OSError:
        if os.environ.get("CI") == "true":
            pytest.fail("RabbitMQ is not reachable on 127.0.0.1:5672; CI needs it")
        pytest.skip("RabbitMQ is not reachable on 127.0.0.1:5672")
    return AMQP_URL


async def test_reply_survives_a_restart_on_the_broker(tmp_path: Path, broker: str) -> None:
    """A reply published by one fleetd is collected by the next one, exactly once."""
    lead = f"l{uuid.uuid4().hex[:12]}"
    document = sample_document(tmp_path)
    document["leads"] = [{"name": lead, "agent": "lead", "tokenEnv": "T_LEAD"}]
    first = build_test_fleet(tmp_path, document=document, inbox=AmqpInbox(broker))
    caller = first.lead.__class__(role=first.lead.role, name=lead)
    try:
        await first.service.own_lead_keys()
        sid = (await first.ok("fleet_spawn", caller, profile="codex"))["sessionId"]
        await first.service.registry.contact(first.member(sid))
        ticket = (await first.ok("fleet_send", caller, target=sid, prompt="x"))["ticket"]
        await first.ok("fleet_reply", first.member(sid), content="kept on the broker")
        await first.inbox.close()

        second = build_test_fleet(tmp_path, document=document, inbox=AmqpInbox(broker))
        await second.service.own_lead_keys()
        drained = await second.ok("fleet_poll", caller)
        assert [(m["ticket"], m["content"]) for m in drained["messages"]] == [
            (ticket, "kept on the broker")
        ]
        assert (await second.ok("fleet_poll", caller))["messages"] == []
        assert await second.inbox.release(lead)
        await second.inbox.close()
    finally:
        await first.inbox.close()


async def test_a_poll_cancelled_mid_collect_loses_no_reply(
    tmp_path: Path, broker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lead whose fleet_poll is dropped during the broker round trips gets every reply later."""
    lead = f"l{uuid.uuid4().hex[:12]}"
    document = sample_document(tmp_path)
    document["leads"] = [{"name": lead, "agent": "lead", "tokenEnv": "T_LEAD"}]
    fleet = build_test_fleet(tmp_path, document=document, inbox=AmqpInbox(broker))
    caller = fleet.lead.__class__(role=fleet.lead.role, name=lead)
    try:
        await fleet.service.own_lead_keys()
        for n in range(3):
            sid = (await fleet.ok("fleet_spawn", caller, profile="codex"))["sessionId"]
            await fleet.service.registry.contact(fleet.member(sid))
            await fleet.ok("fleet_send", caller, target=sid, prompt="x")
            await fleet.ok("fleet_reply", fleet.member(sid), content=f"reply {n}")
        closing, proceed = asyncio.Event(), asyncio.Event()
        close = _Round.__aexit__

        async def held_close(self: _Round, *args: Any, **kwargs: Any) -> Any:
            closing.set()  # the consumer's basic.cancel round trip, held open
            await proceed.wait()
            return await close(self, *args, **kwargs)

        monkeypatch.setattr(_Round, "__aexit__", held_close)
        polling = asyncio.ensure_future(fleet.call("fleet_poll", caller))
        await asyncio.wait_for(closing.wait(), 10)
        polling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await polling
        proceed.set()

        async def carried() -> None:
            while lead not in fleet.bridge.outbox._carried:  # noqa: ASYNC110 — no event to await here
                await asyncio.sleep(0)

        await asyncio.wait_for(carried(), 10)  # the shielded collect finished on its own
        monkeypatch.setattr(_Round, "__aexit__", close)
        sid = (await fleet.ok("fleet_spawn", caller, profile="codex"))["sessionId"]
        await fleet.service.registry.contact(fleet.member(sid))
        await fleet.ok("fleet_send", caller, target=sid, prompt="x")
        await fleet.ok("fleet_reply", fleet.member(sid), content="reply 3")
        drained = await fleet.ok("fleet_poll", caller)
        contents = [m["content"] for m in drained["messages"]]
        assert contents == ["reply 0", "reply 1", "reply 2", "reply 3"]
        await fleet.inbox.release(lead)
    finally:
        await fleet.inbox.close()


async def test_a_held_entry_is_not_the_lead_s_backlog(tmp_path: Path, broker: str) -> None:
    """An unsupported-version entry earns no nudge, no LEAD_UNRESPONSIVE and no REPLY_STRANDED:
    it is its own decode incident, told to the lead once."""
    lead = f"l{uuid.uuid4().hex[:12]}"
    document = sample_document(tmp_path)
    document["leads"] = [{"name": lead, "agent": lead, "tokenEnv": "T_LEAD"}]
    document["health"] = {"enabled": True, "leadUnresponsiveAfterSeconds": 120}
    fleet = build_test_fleet(tmp_path, document=document, inbox=AmqpInbox(broker))
    fleet.control.add_agent(lead, kind="claude", status=AgentStatus.IDLE)
    caller = Caller(role=Role.LEAD, name=lead)
    raw = await aio_pika.connect_robust(broker)
    try:
        await fleet.service.own_lead_keys()
        body = {"schemaVersion": 2, "msgId": "v2-held", "recipientLead": lead, "parts": []}
        async with raw.channel(publisher_confirms=True) as channel:
            await channel.default_exchange.publish(
                aio_pika.Message(
                    json.dumps(body).encode(),
                    content_type=TYPED_MEDIA_TYPE,
                    message_id="v2-held",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                ),
                routing_key=queue_name(lead),
            )
        polled: list[dict[str, Any]] = []
        for _ in range(12):  # six minutes of a lead that polls every 31 s
            fleet.clock.advance(31)
            await fleet.service.push.push_once()
            await fleet.service.health.tick()
            polled += (await fleet.ok("fleet_poll", caller))["messages"]
        assert [(m["kind"], m["state"]) for m in polled] == [("health", "INBOX_DECODE_FAILED")]
        nudges = [c for c in fleet.control.calls_to("prompt") if c.args["target"] == lead]
        assert nudges == []
        assert str(fleet.service.health.state.leads[lead].state) == "LEAD_IDLE"
        listed = await fleet.ok("fleet_list", caller)
        assert [i["state"] for i in listed["incidents"]] == ["INBOX_DECODE_FAILED"]
        assert [f["reason"] for f in listed["inbox"]["failures"]] == ["unsupported_version"]
    finally:
        await fleet.inbox.close()
        async with raw.channel() as channel:
            for name in (queue_name(lead), quarantine_queue_name(lead)):
                await channel.queue_delete(name)
        await raw.close()
