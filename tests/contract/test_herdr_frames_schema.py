"""Every frame a live simulator session exchanges is valid for herdr's own schema.

One scripted session drives the client through every method it has, every subscription kind
and the simulator's refusals; the simulator's tap records each request it receives (what the
client sent) and each frame it writes (responses, errors, pushed events). All of them are
validated against ``../shared/herdr/herdr-api.schema.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import pytest

from fleetd.errors import HerdrError
from fleetd.herdr.calls import PromptWait
from fleetd.herdr.model import AgentStatus, ReadSource, SplitDirection
from fleetd.sim.events import GLOBAL_KINDS, Subscription
from fleetd.sim.harness import SimHarness
from fleetd.sim.scenario import Fault, parse_scenario
from tests.contract.herdr_schema import herdr_schema

pytestmark = pytest.mark.herdr_schema

SCENARIO = parse_scenario(
    {
        "defaults": {"start_seconds": 1.0, "turn_seconds": 1.0},
        "existing": [
            {"name": "lead", "kind": "claude", "cwd": "/tmp/lead"},
            {"name": "rev", "kind": "opencode", "status": "done"},
            {"shell": True},
        ],
    }
)

RAW_LINES = [
    b"this is not json\n",
    b'{"id": 7, "method": "ping", "params": {}}\n',
    b'{"id": "r1", "method": "pane.teleport", "params": {}}\n',
    b'{"id": "r2", "method": "pane.get", "params": {}}\n',
    b'{"id": "r3", "method": "events.subscribe", "params": {"subscriptions": '
    b'[{"type": "pane.agent_status_changed", "pane_id": "w9:p9"}]}}\n',
]


RAW_IDS = {"r1", "r2", "r3"}  # deliberately bad lines written by the test, not the client


async def _raw(h: SimHarness, line: bytes) -> None:
    reader, writer = await asyncio.open_unix_connection(str(h.socket_path))
    writer.write(line)
    await writer.drain()
    await reader.readline()
    writer.close()


async def _session(h: SimHarness) -> None:
    c = h.client
    subscriptions = [Subscription.lifecycle(kind) for kind in sorted(GLOBAL_KINDS)]
    subscriptions += [
        Subscription.status_changes("w1:p1"),
        Subscription.status_changes("w2:p1", AgentStatus.DONE),
        Subscription(type="pane.scroll_changed", pane_id="w1:p1"),
    ]
    stream = c.events_subscribe(subscriptions)
    pump = asyncio.ensure_future(_drain(stream))
    await h.run(c.ping())
    await h.run(c.session_snapshot())
    created = await h.run(c.workspace_create(cwd="/tmp/m1", label="m1", env={"T": "1"}))
    pane = created.root_pane.pane_id
    await h.run(c.tab_create(workspace_id=created.workspace.workspace_id, focus=True))
    split = await h.run(c.pane_split(SplitDirection.DOWN, target_pane_id=pane, focus=True))
    await h.run(c.agent_start("m1", "codex", pane, ["--full-auto"], 10000))
    await h.advance(1.2)
    call: Coroutine[Any, Any, object]
    for call in (c.agent_list(), c.agent_get("m1"), c.pane_list(), c.pane_get(pane)):
        await h.run(call)
    await h.run(c.agent_prompt("m1", "first"))
    await h.run(c.agent_wait("m1", [AgentStatus.DONE]))
    for source in ReadSource:
        await h.run(c.pane_read(pane, source, 10))
        await h.run(c.agent_read("m1", source))
    await h.run(c.agent_focus("m1"))
    await h.run(c.agent_prompt("m1", "second", PromptWait(timeout_ms=20000)))
    h.sim.inject_fault("m1", Fault.BLOCKED)
    await h.run(c.agent_prompt("m1", "third"))
    await h.advance(1.0)
    for call in (
        c.agent_prompt("m1", "refused"),
        c.agent_get("ghost"),
        c.pane_read("w9:p9", ReadSource.VISIBLE),
    ):
        with contextlib.suppress(HerdrError):
            await h.run(call)
    await h.run(c.agent_send_keys("m1", ["y"]))
    await h.run(c.pane_send_input(pane, "fourth", ["Enter"]))
    await h.run(c.pane_send_text(pane, "x"))
    await h.run(c.pane_send_keys(pane, ["esc"]))
    await h.run(c.pane_process_info(pane))
    await h.run(c.pane_process_info(split.pane_id))
    with contextlib.suppress(HerdrError):
        await h.run(c.agent_wait("m1", [AgentStatus.BLOCKED], timeout_ms=500))
    await h.run(c.pane_close(split.pane_id))
    h.sim.agent("m1").exit()
    await h.run(c.pane_close("w3:p1"))
    for line in RAW_LINES:
        await h.run(_raw(h, line))
    await h.advance(6.0)
    pump.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pump
    await stream.aclose()  # type: ignore[attr-defined]


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def test_every_frame_of_a_full_session_matches_herdrs_schema() -> None:
    """Client requests and every simulator frame validate against herdr's schema."""
    schema = herdr_schema()
    recorded: list[tuple[str, dict[str, Any]]] = []
    async with SimHarness(SCENARIO, tap=lambda kind, frame: recorded.append((kind, frame))) as h:
        await _session(h)
    requests = [f for kind, f in recorded if kind == "request" and f["id"] not in RAW_IDS]
    frames = [f for kind, f in recorded if kind == "frame"]
    methods = {f["method"] for f in requests}
    assert {"agent.start", "agent.wait", "events.subscribe", "pane.split"} <= methods
    events = {f["event"] for f in frames if "event" in f}
    assert {"pane_exited", "pane_closed", "workspace_closed", "pane.agent_status_changed"} <= events
    assert any(f.get("id") == "" for f in frames)
    assert any(str(f.get("id")).endswith(":sub:0:probe") for f in frames)
    for frame in requests:
        schema.check(frame, sent_by_client=True)
    for frame in frames:
        schema.check(frame)
