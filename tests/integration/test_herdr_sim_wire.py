"""The simulator keeps herdr's wire rules on a raw Unix socket."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleetd.herdr.model import AgentStatus
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import parse_scenario

SCENARIO = parse_scenario({"existing": [{"name": "lead", "kind": "claude"}]})


@pytest.fixture
async def h() -> AsyncIterator[SimHarness]:
    async with SimHarness(SCENARIO) as harness:
        yield harness


async def _exchange(h: SimHarness, payload: bytes) -> tuple[list[dict[str, Any]], bool]:
    """Write ``payload`` on one connection; return every answer line and whether it closed."""
    reader, writer = await asyncio.open_unix_connection(str(h.socket_path))
    writer.write(payload)
    await writer.drain()
    lines: list[dict[str, Any]] = []
    closed = False
    while True:
        line = await h.run(reader.readline(), max_seconds=1)
        if not line:
            closed = True
            break
        lines.append(json.loads(line))
        if len(lines) > 3:
            break
    writer.close()
    return lines, closed


async def test_socket_file_is_private(h: SimHarness) -> None:
    """The socket is created with mode 0600, like herdr's."""
    assert stat.S_IMODE(h.socket_path.stat().st_mode) == 0o600


async def test_one_request_per_connection(h: SimHarness) -> None:
    """Two request lines on one connection get one answer, then the connection closes."""
    two = b'{"id":"a","method":"ping","params":{}}\n{"id":"b","method":"ping","params":{}}\n'
    answers, closed = await _exchange(h, two)
    assert [a["id"] for a in answers] == ["a"]
    assert closed


@pytest.mark.parametrize(
    ("line", "expected_id"),
    [
        (b"{not json\n", ""),
        (b'{"id":42,"method":"ping","params":{}}\n', ""),
        (b'{"id":"k","method":"pane.teleport","params":{}}\n', "k"),
        (b'{"id":"m","method":"pane.get","params":{}}\n', "m"),
    ],
)
async def test_unparseable_request_is_invalid_request(
    h: SimHarness, line: bytes, expected_id: str
) -> None:
    """Bad lines answer invalid_request, with id "" unless a string id could be recovered."""
    (answer,), _ = await _exchange(h, line)
    assert answer["id"] == expected_id
    assert answer["error"]["code"] == "invalid_request"


async def test_empty_line_gets_no_answer(h: SimHarness) -> None:
    """An empty first line is dropped without an answer."""
    answers, closed = await _exchange(h, b"\n")
    assert answers == []
    assert closed


async def test_results_are_snake_case_and_ok_is_bare(h: SimHarness) -> None:
    """result.type is snake_case; a command that only acts answers {"type":"ok"}."""
    (listed,), _ = await _exchange(h, b'{"id":"1","method":"agent.list","params":{}}\n')
    assert listed["result"]["type"] == "agent_list"
    (ok,), _ = await _exchange(
        h, b'{"id":"2","method":"pane.send_keys","params":{"pane_id":"w1:p1","keys":["esc"]}}\n'
    )
    assert ok == {"id": "2", "result": {"type": "ok"}}


async def test_not_found_codes_are_resource_prefixed(h: SimHarness) -> None:
    """Errors use `<resource>_not_found`, never a bare not_found."""
    (answer,), _ = await _exchange(
        h, b'{"id":"3","method":"pane.read","params":{"pane_id":"w7:p1","source":"visible"}}\n'
    )
    assert answer["error"]["code"] == "pane_not_found"


async def test_subscription_acks_then_pushes_id_less_events(h: SimHarness) -> None:
    """events.subscribe answers subscription_started, then id-less lines on the same connection."""
    reader, writer = await asyncio.open_unix_connection(str(h.socket_path))
    writer.write(
        b'{"id":"s","method":"events.subscribe","params":{"subscriptions":'
        b'[{"type":"pane.created"},{"type":"pane.agent_status_changed","pane_id":"w1:p1"}]}}\n'
    )
    await writer.drain()
    ack = json.loads(await h.run(reader.readline()))
    assert ack == {"id": "s", "result": {"type": "subscription_started"}}
    replayed = json.loads(await h.run(reader.readline()))
    assert "id" not in replayed
    assert replayed["event"] == "pane_created"
    assert replayed["data"]["type"] == "pane_created"
    h.sim.set_status(
        "lead", __import__("fleetd.herdr.model", fromlist=["AgentStatus"]).AgentStatus.WORKING
    )
    pushed = json.loads(await h.run(reader.readline()))
    assert pushed["event"] == "pane.agent_status_changed"
    assert "type" not in pushed["data"]
    assert pushed["data"]["agent_status"] == "working"
    writer.close()


async def test_wait_holds_the_connection_until_it_answers(h: SimHarness) -> None:
    """agent.wait keeps its connection open with no answer until the status is reached."""
    reader, writer = await asyncio.open_unix_connection(str(h.socket_path))
    writer.write(
        b'{"id":"w","method":"agent.wait","params":{"target":"lead","until":["blocked"]}}\n'
    )
    await writer.drain()
    pending = asyncio.ensure_future(reader.readline())
    await h.advance(2.0)
    assert not pending.done()
    h.sim.set_status("lead", AgentStatus.BLOCKED)
    answer = json.loads(await h.run(pending))
    assert answer["result"]["agent"]["agent_status"] == "blocked"
    writer.close()


async def test_client_hangup_ends_a_wait_silently(h: SimHarness) -> None:
    """A wait whose client hangs up is dropped: the server keeps serving others."""
    _, writer = await asyncio.open_unix_connection(str(h.socket_path))
    writer.write(
        b'{"id":"w","method":"agent.wait","params":{"target":"lead","until":["blocked"]}}\n'
    )
    await writer.drain()
    await h.advance(0.3)
    writer.close()
    await h.advance(0.3)
    assert (await h.run(h.client.ping())).protocol == 20
