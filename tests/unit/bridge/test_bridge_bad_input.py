"""Bad input to the fleet tools gets a clear 4xx and changes no state."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.errors import InboxUnavailableError
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.records import InboxRecord, MessageKind
from fleetd.testing import LEAD_TOKEN, TestFleet, build_test_fleet, sample_document
from tests.inbox_records import typed_record


@pytest.fixture
async def fleet(tmp_path: Path) -> TestFleet:
    built = build_test_fleet(tmp_path)
    await built.service.own_lead_keys()
    return built


def _client(fleet: TestFleet, token: str | None = LEAD_TOKEN) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=create_app(fleet.service))
    return httpx.AsyncClient(transport=transport, base_url="http://fleetd", headers=headers)


def _state(fleet: TestFleet) -> tuple[Any, ...]:
    bridge = fleet.bridge
    return (
        sorted((s.session_id, s.state.value, s.turn) for s in bridge.reads.sessions()),
        sorted((t.ticket_id, t.outcome.value) for t in bridge.reads.tickets()),
        len(fleet.control.calls_to("prompt")),
    )


@pytest.mark.parametrize(
    ("tool", "body", "status", "code"),
    [
        ("fleet_nope", {}, 404, "unknown_tool"),
        ("fleet_send", {"target": 3, "prompt": "x"}, 422, "invalid_arguments"),
        ("fleet_send", {"prompt": "x"}, 422, "invalid_arguments"),
        ("fleet_send", {"target": "s-1", "prompt": "x", "extra": 1}, 422, "invalid_arguments"),
        ("fleet_send", {"target": "nobody", "prompt": "x"}, 404, "unknown_target"),
        ("fleet_send", {"target": "SID", "prompt": "x" * 100_001}, 422, "invalid_arguments"),
        ("fleet_send", {"target": "SID", "prompt": "x", "wait": -1}, 422, "invalid_arguments"),
        ("fleet_stop", {"sessionId": "a", "paneId": "b"}, 422, "invalid_arguments"),
        ("fleet_poll", {"ticket": "t-unknown"}, 404, "unknown_ticket"),
        ("fleet_poll", {"target": "lead-b"}, 403, "forbidden"),
        ("fleet_reply", {"content": "x"}, 403, "forbidden"),
        ("fleet_spawn", {"profile": "no-such"}, 422, "invalid_arguments"),
        ("fleet_poll", {"ticket": "t\u00b2-03671a-r1c1d590c"}, 404, "unknown_ticket"),
        ("fleet_spawn", {"profile": "sonnet", "name": "m1\n"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "base": "HEAD\u0000"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "repo": "/no\u0000where"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "rev\u001b[2J"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "two\nlines"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "c1\u009b"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "txt.\u202eexe"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "two\u2028lines"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "zero\u200bwidth"}, 422, "invalid_arguments"),
        ("fleet_spawn", {"profile": "sonnet", "role": "iso\u2067late"}, 422, "invalid_arguments"),
    ],
)
async def test_bad_calls_are_refused_without_side_effects(
    fleet: TestFleet, tool: str, body: dict[str, Any], status: int, code: str
) -> None:
    """Each bad call gets its status and code, and the fleet is exactly as before."""
    sid = await fleet.spawn_ready()
    body = {k: (sid if v == "SID" else v) for k, v in body.items()}
    before = _state(fleet)
    async with _client(fleet) as client:
        response = await client.post(f"/v1/tools/{tool}", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert _state(fleet) == before


async def test_unknown_target_lists_the_valid_targets(fleet: TestFleet) -> None:
    """A correctable mistake carries a recovery hint: the caller's live members."""
    sid = await fleet.spawn_ready()
    async with _client(fleet) as client:
        response = await client.post("/v1/tools/fleet_status", json={"sessionId": "nobody"})
    assert response.json()["error"]["hint"] == {"liveMembers": [sid]}


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_wrong_or_missing_token_is_401(fleet: TestFleet, token: str | None) -> None:
    """No valid bearer token: 401, no hint, nothing changes."""
    before = _state(fleet)
    async with _client(fleet, token) as client:
        response = await client.post("/v1/tools/fleet_spawn", json={"profile": "sonnet"})
    assert response.status_code == 401
    assert "hint" not in response.json()["error"]
    assert _state(fleet) == before


async def test_another_leads_member_is_not_a_target(fleet: TestFleet) -> None:
    """A lead cannot send to a member another lead owns."""
    sid = await fleet.spawn_ready()
    async with _client(fleet, LEAD_TOKEN + "-b") as client:
        response = await client.post("/v1/tools/fleet_send", json={"target": sid, "prompt": "x"})
    assert response.status_code == 404


async def test_member_cannot_reply_for_another_session(fleet: TestFleet) -> None:
    """A member token speaks only for its own session: its reply never resolves another's turn."""
    first = await fleet.spawn_ready()
    second = await fleet.spawn_ready("codex")
    ticket = (await fleet.ok("fleet_send", target=second, prompt="x"))["ticket"]
    result = await fleet.call("fleet_reply", fleet.member(first), content="not mine")
    assert result.error is not None
    assert result.error.code == "no_open_task"  # the first member has no task of its own
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"


async def test_reply_the_inbox_cannot_store_is_refused_and_the_ticket_stays_pending(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fleet_reply answers only after the reply is stored; while it cannot be, it is refused."""
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="x"))["ticket"]
    publish = fleet.inbox.publish

    async def broker_down(record: InboxRecord) -> bool:
        raise InboxUnavailableError("broker down")

    monkeypatch.setattr(fleet.inbox, "publish", broker_down)
    refused = await fleet.call("fleet_reply", fleet.member(sid), content="kept")
    assert refused.error is not None
    assert (refused.error.code, refused.error.http_status) == ("inbox_unavailable", 503)
    assert refused.error.hint["retryable"] is True
    assert "not stored" in refused.error.hint["action"]
    assert fleet.bridge.reads.unpublished == []
    assert (await fleet.ok("fleet_poll", ticket=ticket))["status"] == "pending"
    monkeypatch.setattr(fleet.inbox, "publish", publish)
    answer = await fleet.ok("fleet_reply", fleet.member(sid), content="kept")
    assert (answer["ticket"], answer["late"]) == (ticket, False)
    messages = (await fleet.ok("fleet_poll"))["messages"]
    assert [(m["ticket"], m["content"]) for m in messages] == [(ticket, "kept")]


async def test_publication_to_a_lead_owns_its_key_first(tmp_path: Path) -> None:
    """Replies reach a configured lead's inbox even before startup owned the key."""
    fleet = build_test_fleet(tmp_path)
    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    await fleet.ok("fleet_reply", fleet.member(sid), content="kept")
    assert fleet.bridge.reads.unpublished == []
    assert "lead" in fleet.bridge.lead_inboxes.owned


async def test_records_held_for_an_unreachable_inbox_are_bounded(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long outage cannot grow memory without end: a record is held once, and past the bound
    the oldest health record gives way (counted and shown), never a reply while health remains."""
    import fleetd.inbox.outbox as outbox_module  # noqa: PLC0415 — the bound is patched small

    async def broker_down(record: InboxRecord) -> bool:
        raise InboxUnavailableError("broker down")

    monkeypatch.setattr(fleet.inbox, "publish", broker_down)
    monkeypatch.setattr(outbox_module, "HELD_MAX", 3)

    for msg_id, kind in [
        ("reply-1", MessageKind.REPLY),
        ("health-1", MessageKind.HEALTH),
        ("health-1", MessageKind.HEALTH),
        ("reply-2", MessageKind.REPLY),
        ("reply-3", MessageKind.REPLY),
        ("reply-4", MessageKind.REPLY),
    ]:
        await fleet.bridge.outbox.keep(typed_record(msg_id, kind))
    assert [r.msg_id for r in fleet.bridge.reads.unpublished] == ["reply-2", "reply-3", "reply-4"]
    assert fleet.bridge.reads.held_dropped == 2
    held = (await fleet.ok("fleet_list"))["inbox"]["heldInMemory"]
    assert (held["records"], held["gaveWay"]) == (3, 2)


async def test_a_stop_tries_the_held_records_once_more_and_names_what_it_loses(
    fleet: TestFleet, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A clean stop flushes what waits in memory; what the inbox still cannot take is warned of
    (counts by kind), never dropped silently."""
    publish = fleet.inbox.publish

    async def broker_down(record: InboxRecord) -> bool:
        raise InboxUnavailableError("broker down")

    sid = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=sid, prompt="x")
    monkeypatch.setattr(fleet.inbox, "publish", broker_down)
    fleet.set_status(sid, AgentStatus.WORKING)
    await fleet.poll()
    fleet.set_status(sid, AgentStatus.DONE)
    await fleet.poll()
    await fleet.poll(1.0)  # resolved from the pane: the result waits in memory
    assert len(fleet.bridge.reads.unpublished) == 1
    with caplog.at_level(logging.WARNING, logger="fleetd"):
        await fleet.service.stop()
    assert any(
        "stopping with 1 records the inbox could not take (1 reply)" in r.getMessage()
        for r in caplog.records
    )
    monkeypatch.setattr(fleet.inbox, "publish", publish)


async def test_a_send_past_the_members_queue_bound_is_refused_and_accepts_nothing(
    tmp_path: Path,
) -> None:
    """A member at work holds at most ``bridge.maxQueuedSends`` sends waiting; one more is a
    409 conflict naming the bound, nothing of it is accepted, and once the queue moves a send is
    taken again."""
    document = sample_document(tmp_path)
    document["bridge"] = {**document.get("bridge", {}), "maxQueuedSends": 2}
    fleet = build_test_fleet(tmp_path, document=document)
    await fleet.service.own_lead_keys()
    sid = await fleet.spawn_ready()
    first = (await fleet.ok("fleet_send", target=sid, prompt="typed"))["ticket"]
    fleet.set_status(sid, AgentStatus.WORKING)
    for n in range(2):
        await fleet.ok("fleet_send", target=sid, prompt=f"waits {n}")
    before = _state(fleet)
    async with _client(fleet) as client:
        response = await client.post("/v1/tools/fleet_send", json={"target": sid, "prompt": "x"})
    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["hint"]["queued"]) == ("conflict", 2)
    assert "bridge.maxQueuedSends" in error["message"]
    assert _state(fleet) == before
    await fleet.ok("fleet_reply", fleet.member(sid), content="done")
    fleet.set_status(sid, AgentStatus.IDLE)
    await fleet.poll()
    assert (await fleet.ok("fleet_poll", ticket=first))["status"] == "done"
    await fleet.ok("fleet_send", target=sid, prompt="taken again")
