"""Decode failures on the live broker reach the owning lead as a routed, redacted incident."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.tools import Caller, Role
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.codec import TYPED_MEDIA_TYPE
from fleetd.testing import LEAD_TOKEN, build_test_fleet, sample_document

if TYPE_CHECKING:
    from tests.contract.inbox_fixtures import RawBroker

pytest_plugins = ["tests.contract.inbox_fixtures"]
pytestmark = pytest.mark.amqp


async def test_bad_entries_open_an_incident_and_tell_the_owning_lead_without_content(
    tmp_path: Path,
    inbox_amqp_url: str,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """An unsupported-version entry and an invalid one in a lead's queue: after one health tick
    fleet_list shows an INBOX_DECODE_FAILED incident per reason routed to that lead, and the
    lead's next fleet_poll carries typed health records naming codes and ids, never the body."""
    name = inbox_broker.track(inbox_new_key())
    marker = "secret-body-marker-7f3a"
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    document["health"] = {"enabled": True}
    inbox = AmqpInbox(inbox_amqp_url)
    fleet = build_test_fleet(tmp_path, document=document, inbox=inbox)
    lead = Caller(role=Role.LEAD, name=name)
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    headers = {"Authorization": f"Bearer {LEAD_TOKEN}"}
    try:
        await fleet.service.own_lead_keys()
        newer = json.dumps({"schemaVersion": 2, "msgId": "v2-1", "note": marker}).encode()
        await inbox_broker.publish(name, newer, content_type=TYPED_MEDIA_TYPE, message_id="v2-1")
        broken = f'{{"schemaVersion": 1, "content": "{marker}'.encode()
        await inbox_broker.publish(name, broken, content_type=TYPED_MEDIA_TYPE, message_id="bad-1")
        async with httpx.AsyncClient(
            transport=transport, base_url="http://fleetd", headers=headers
        ) as http:
            polled = await http.post("/v1/tools/fleet_poll", json={})
            assert polled.json()["result"]["messages"] == []

            await fleet.service.health.tick()

            listed = (await http.get("/v1/fleet")).json()["result"]
            incidents = {
                (i["subject"], i["state"], i["recipient"])
                for i in listed["incidents"]
                if i["scope"] == "inbox"
            }
            assert incidents == {(name, "INBOX_DECODE_FAILED", name)}
            assert len([i for i in listed["incidents"] if i["scope"] == "inbox"]) == 2
            health = (await http.get("/healthz")).json()["components"]["inbox"]
            assert health["decodeFailures"] == 2

            polled = await http.post("/v1/tools/fleet_poll", json={})
        messages = polled.json()["result"]["messages"]
        assert {(m["kind"], m["state"]) for m in messages} == {("health", "INBOX_DECODE_FAILED")}
        evidence = sorted((m["evidence"]["reason"], m["evidence"]["messageIds"]) for m in messages)
        assert evidence == [("malformed_json", "bad-1"), ("unsupported_version", "v2-1")]
        assert all(m["suggestedToolCalls"] == ["fleet_list()"] for m in messages)
        assert marker not in polled.text
        assert marker not in (await fleet.ok("fleet_list", lead)).__repr__()
        await fleet.service.health.tick()  # edge-triggered: no second record for the same entries
        assert (await fleet.ok("fleet_poll", lead))["messages"] == []
    finally:
        await inbox.close()


async def test_a_health_record_of_a_new_run_is_never_taken_for_the_last_run_s(
    tmp_path: Path,
    inbox_amqp_url: str,
    inbox_broker: RawBroker,
    inbox_new_key: Callable[[], str],
) -> None:
    """Incident ids repeat across a restart (same key, cause, generation); the record a new run
    publishes is still delivered next to the one the crashed run left, not acked as a duplicate."""
    name = inbox_broker.track(inbox_new_key())
    document = sample_document(tmp_path)
    document["leads"] = [{"name": name, "agent": "lead", "tokenEnv": "T_LEAD"}]
    document["health"] = {"enabled": True}
    lead = Caller(role=Role.LEAD, name=name)
    unknown = "application/x-unknown"

    first_inbox = AmqpInbox(inbox_amqp_url)
    first = build_test_fleet(tmp_path / "one", document=document, inbox=first_inbox)
    await first.service.own_lead_keys()
    await inbox_broker.publish(name, b"?", content_type=unknown, message_id="mid-u-one")
    assert (await first.ok("fleet_poll", lead))["messages"] == []
    await first.service.health.tick()  # its record waits in the queue; then the run dies
    await first_inbox.close()

    second_inbox = AmqpInbox(inbox_amqp_url)
    second = build_test_fleet(tmp_path / "two", document=document, inbox=second_inbox)
    try:
        await second.service.own_lead_keys()
        await inbox_broker.publish(name, b"?", content_type=unknown, message_id="mid-u-two")
        polled = (await second.ok("fleet_poll", lead))["messages"]
        await second.service.health.tick()
        polled += (await second.ok("fleet_poll", lead))["messages"]
        named = sorted(m["evidence"]["messageIds"] for m in polled if m["kind"] == "health")
        assert named == ["mid-u-one", "mid-u-two"]
    finally:
        await second_inbox.close()
