"""A subscription survives one event line it cannot read."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from fleetd.clock import SystemClock
from fleetd.sim.client import SimClient
from fleetd.sim.events import Subscription


async def test_malformed_event_is_skipped_and_the_stream_goes_on() -> None:
    """An event missing a field fleetd needs is dropped; the next good one still arrives."""
    path = Path(tempfile.mkdtemp(prefix="fstr")) / "h.sock"
    handled = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = json.loads(await reader.readline())
        frames = [
            {"id": request["id"], "result": {"type": "subscription_started"}},
            {"event": "pane.agent_status_changed", "data": {"agent_status": "idle"}},
            {
                "event": "pane.agent_status_changed",
                "data": {"pane_id": "w1:p1", "workspace_id": "w1", "agent_status": "done"},
            },
        ]
        for frame in frames:
            writer.write(json.dumps(frame).encode() + b"\n")
        await writer.drain()
        await reader.read()  # hold the connection until the client goes
        writer.close()
        await writer.wait_closed()
        handled.set()

    server = await asyncio.start_unix_server(serve, path=str(path))
    client = SimClient(path, clock=SystemClock(), request_timeout=5)
    stream = client.events_subscribe([Subscription.status_changes("w1:p1")], max_attempts=0)
    try:
        event = await asyncio.wait_for(anext(aiter(stream)), 5)
        assert getattr(event, "pane_id", None) == "w1:p1"
        assert getattr(event, "agent_status", None) is not None
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
        await asyncio.wait_for(handled.wait(), 5)
        server.close()
        await server.wait_closed()
