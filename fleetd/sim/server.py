"""A herdr-protocol server on a Unix socket, backed by the simulated session.

Connection model as herdr's (``src/api/server.rs``): the first line is the request (the client
has 5 s to send it; an empty line gets no answer), one answer line is written, the connection
closes. ``events.subscribe`` keeps the connection for pushed events; ``agent.wait`` and
``agent.prompt`` with ``wait`` hold it until they answer, polling every 100 ms and giving up
silently when the client hangs up. Server faults: ``unresponsive`` reads requests and never
answers; ``latency_seconds`` delays every answer. All time is the injected clock's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fleetd.clock import Clock, SystemClock
from fleetd.errors import HerdrError
from fleetd.herdr.model import AgentStatus
from fleetd.sim import screens
from fleetd.sim.agent import AgentBehaviour, SimAgent
from fleetd.sim.behaviour import ScriptedBehaviour
from fleetd.sim.handlers import Dispatcher
from fleetd.sim.requests import Params, Request, parse_request
from fleetd.sim.scenario import ExistingPane, Fault, Scenario
from fleetd.sim.state import AgentState, JsonObject
from fleetd.sim.subscriptions import TICK_SECONDS, build_entries
from fleetd.sim.waits import Waits
from fleetd.sim.world import World

__all__ = ["HerdrSimulator"]

_log = logging.getLogger(__name__)
_REQUEST_DEADLINE = 5.0
_LINE_LIMIT = 1024 * 1024 + 1

FrameTap = Callable[[str, JsonObject], None]


class HerdrSimulator:
    """A simulated herdr listening on ``socket_path``; ``await start()``, ``await stop()``."""

    def __init__(
        self,
        socket_path: str | Path,
        scenario: Scenario | None = None,
        *,
        clock: Clock | None = None,
        behaviour: AgentBehaviour | None = None,
        tap: FrameTap | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.scenario = scenario or Scenario()
        self.clock = clock or SystemClock()
        settings = self.scenario.server
        self.world = World(
            socket_path=str(self.socket_path), version=settings.version, protocol=settings.protocol
        )
        self.dispatcher = Dispatcher(
            world=self.world,
            scenario=self.scenario,
            clock=self.clock,
            behaviour=behaviour or ScriptedBehaviour(),
        )
        self.waits = Waits(self.world, self.dispatcher.agents, self.clock)
        self.unresponsive = settings.unresponsive
        self.latency_seconds = settings.latency_seconds
        self._tap = tap
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the scenario's panes and listen (socket file mode 0600)."""
        for existing in self.scenario.existing:
            self._populate(existing)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self.socket_path), limit=_LINE_LIMIT
        )
        os.chmod(self.socket_path, 0o600)

    async def stop(self) -> None:
        """Stop listening, drop every open connection mid-call, stop every agent."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for agent in self.world.agents():
            agent.stop()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def __aenter__(self) -> HerdrSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _populate(self, existing: ExistingPane) -> None:
        _, _, pane = self.world.create_workspace(
            cwd=existing.cwd, label=existing.label, env=existing.env, focus=False
        )
        if existing.kind is None:
            return
        agent = self.dispatcher.agents.spawn_agent(
            pane, name=existing.name, kind=existing.kind, overrides=existing.overrides
        )
        agent.mark_ready()
        if existing.status is AgentStatus.WORKING:
            agent.submit("Continue the task from before.")
        else:
            self.set_status(agent.pane_id, existing.status)

    # -- test and demo controls ----------------------------------------------------------

    def agent(self, target: str) -> SimAgent:
        """A simulated agent by name or pane id."""
        return self.world.resolve_agent(target)

    def set_status(self, target: str, status: AgentStatus) -> None:
        """Force an agent's status now (a running turn is abandoned)."""
        agent = self.agent(target)
        agent.stop()
        if status is AgentStatus.BLOCKED:
            agent.hold_blocked(agent.last_prompt)
            return
        if status is AgentStatus.WORKING:
            screen = screens.working(agent.kind, agent.last_prompt, frame=0, elapsed=0.0)
            agent.set_state(AgentState.WORKING, screen)
            return
        if status is AgentStatus.UNKNOWN:
            agent.set_state(AgentState.UNKNOWN)
            return
        if status is AgentStatus.DONE and agent.status is not AgentStatus.DONE:
            agent.set_state(AgentState.WORKING)
        agent.set_state(AgentState.IDLE)
        if status is AgentStatus.IDLE:
            agent.mark_seen()

    def start_by_hand(self, name: str, kind: str = "claude", cwd: str | None = None) -> SimAgent:
        """A person starts agent ``name`` in a new workspace, at its prompt (as a lead is
        relaunched by hand after its pane died)."""
        self._populate(ExistingPane(name=name, kind=kind, cwd=cwd, label=name))
        return self.agent(name)

    def unlist(self, target: str, *, unlisted: bool = True) -> None:
        """Make ``agent.list`` leave the agent out (or show it again, ``unlisted=False``) while
        it keeps running and answering by name — a list that misses a live agent."""
        pane_id = self.agent(target).pane_id
        if unlisted:
            self.world.unlisted.add(pane_id)
        else:
            self.world.unlisted.discard(pane_id)

    def inject_fault(self, target: str, fault: Fault) -> None:
        """Make ``fault`` hit the agent's next turn only."""
        self.agent(target).next_turn_faults.add(fault)

    # -- connections ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._one_request(reader, writer)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _first_line(self, reader: asyncio.StreamReader) -> bytes | None:
        read = asyncio.ensure_future(reader.readline())
        timer = asyncio.ensure_future(self.clock.sleep(_REQUEST_DEADLINE))
        try:
            await asyncio.wait({read, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not read.done():
                read.cancel()
            await asyncio.gather(read, timer, return_exceptions=True)
        if read.cancelled():
            return None
        if read.exception() is not None:
            return b"\x00"  # longer than herdr accepts: answered as invalid
        return read.result()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        line = await self._first_line(reader)
        if line is None or not line.strip():
            return
        hangup = asyncio.ensure_future(reader.read())
        try:
            if self.unresponsive:
                await hangup
                return
            if self.latency_seconds > 0:
                await self._until(self.clock.sleep(self.latency_seconds), hangup)
            parsed = parse_request(line)
            if isinstance(parsed, tuple):
                request_id, error = parsed
                await self._write(writer, _error(request_id, error))
                return
            self._record(
                "request", {"id": parsed.id, "method": parsed.method, "params": parsed.params}
            )
            await self._dispatch(parsed, reader, writer, hangup)
        finally:
            hangup.cancel()

    async def _dispatch(
        self,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        hangup: asyncio.Future[bytes],
    ) -> None:
        params = Params(request.params)
        try:
            if request.method == "events.subscribe":
                await self._subscribe(request.id, params, writer, hangup)
                return
            if request.method == "agent.wait":
                result = await self.waits.agent_wait(params, hangup)
            elif request.method == "agent.prompt" and request.params.get("wait") is not None:
                result = await self.waits.prompt_and_wait(params, hangup)
            else:
                result = self.dispatcher.handle(request.method, request.params)
        except HerdrError as exc:
            await self._write(writer, _error(request.id, exc))
            return
        if result is not None:
            await self._write(writer, {"id": request.id, "result": result})

    async def _subscribe(
        self,
        request_id: str,
        params: Params,
        writer: asyncio.StreamWriter,
        hangup: asyncio.Future[bytes],
    ) -> None:
        built = build_entries(self.world, request_id, params)
        if isinstance(built, tuple):
            probe_id, error = built
            await self._write(writer, _error(probe_id, error))
            return
        await self._write(writer, {"id": request_id, "result": {"type": "subscription_started"}})
        while not hangup.done():
            for entry in built:
                try:
                    event = entry.poll(self.world)
                except HerdrError as exc:
                    await self._write(writer, _error(request_id, exc))
                    return
                if event is not None:
                    await self._write(writer, event)
            await self._until(self.clock.sleep(TICK_SECONDS), hangup)

    async def _until(self, aw: Awaitable[None], hangup: asyncio.Future[bytes]) -> None:
        """Await ``aw`` unless the client hangs up first."""
        work = asyncio.ensure_future(aw)
        try:
            either: set[asyncio.Future[Any]] = {work, hangup}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)

    async def _write(self, writer: asyncio.StreamWriter, frame: JsonObject) -> None:
        self._record("frame", frame)
        writer.write(json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        await writer.drain()

    def _record(self, kind: str, frame: JsonObject) -> None:
        if self._tap is not None:
            self._tap(kind, frame)


def _error(request_id: str, error: HerdrError) -> JsonObject:
    return {"id": request_id, "error": {"code": error.code, "message": error.message}}
