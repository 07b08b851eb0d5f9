"""An end-to-end fleet: the herdr simulator, fleetd on uvicorn, real HTTP and MCP clients.

Everything runs in this process on one :class:`~fleetd.clock.FakeClock`: the simulator's agents,
fleetd's loops and its herdr client. :func:`~fleetd.sim.harness.drive` moves the clock in small
steps and lets socket I/O flow between steps, so no test waits on real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
import yaml

from fleetd.api.app import create_app
from fleetd.bridge.sessions import Session
from fleetd.clock import FakeClock
from fleetd.compose import Fleetd, build_service
from fleetd.config import ConfigRef
from fleetd.errors import HerdrError
from fleetd.herdr.control import HerdrAgentControl
from fleetd.runtime import instance_name
from fleetd.sim.callback import FleetdCallbackBehaviour
from fleetd.sim.harness import drive
from fleetd.sim.scenario import parse_scenario
from fleetd.sim.server import HerdrSimulator
from fleetd.state.opening import OpenedState, open_state

T = TypeVar("T")
LEAD_TOKEN = "e2e-lead-token-0001"
OPERATOR_TOKEN = "e2e-operator-token-0001"
LEAD_TOKENS = {
    "lead": ("T_LEAD", LEAD_TOKEN),
    "lead-b": ("T_LEAD_B", "e2e-lead-b-token-0001"),
    "lead-c": ("T_LEAD_C", "e2e-lead-c-token-0001"),
}
"""Lead name -> (its token's variable, the token); each lead's herdr agent has its name."""

SCENARIO: dict[str, Any] = {
    "version": 1,
    "defaults": {
        "start_seconds": 0.5,
        "react_seconds": 0.2,
        "turn_seconds": 2.0,
        "frame_seconds": 0.5,
        "answer": "Finished {prompt}.",
    },
    "agents": {
        "*mute*": {"faults": ["mute"]},
        "*exit*": {"faults": ["exit"]},
        "*instant*": {"faults": ["instant", "mute"]},
        "*slow*": {"faults": ["slow_start"], "slow_start_seconds": 25},
        "*never*": {"faults": ["never_ready"]},
        "*usage*": {"faults": ["error_screen", "mute"], "error_signature": "usage-limit"},
    },
}


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


@dataclass
class E2EFleet:
    clock: FakeClock
    service: Fleetd
    simulator: HerdrSimulator
    base_url: str
    server: _Server
    serving: asyncio.Task[None]
    config_path: Path
    state: OpenedState  # the state store (fleetd-state.db beside the config) and its lock
    requests: list[dict[str, Any]] = field(default_factory=list)  # herdr requests, in order

    @property
    def herdr_requests(self) -> list[dict[str, Any]]:
        """Every request the simulator received, in order (across a restart too)."""
        return self.requests

    def session(self, session_id: str) -> Session:
        """The member as the bridge holds it now (a session is a value: read it again after
        anything that may change it)."""
        session = self.service.bridge.reads.session(session_id)
        assert session is not None, f"no session {session_id}"
        return session

    def requests_to(self, method: str) -> list[dict[str, Any]]:
        """The recorded herdr requests of one method (``agent.prompt``, ``pane.read`` ...)."""
        return [r for r in self.requests if r["method"] == method]

    async def stop(self) -> None:
        """A clean stop, as SIGTERM asks for one: uvicorn's lifespan stops the service."""
        self.server.should_exit = True
        await asyncio.wait_for(self.serving, timeout=15)  # uvicorn shuts down on real time
        self.state.close()  # the process ends: its store connections and its lock go

    async def crash(self) -> None:
        """The process dies: the loops and the API end, and nothing is released or failed.

        Await it directly, not under :meth:`run`: no simulated time passes while the process
        dies. Listeners, open connections and loops all end before anything awaits: uvicorn's
        shutdown takes real time, and a fleetd left answering or deciding meanwhile would act
        for a dead process (a member's reply taken, a turn settled)."""
        self.server.force_exit = True  # uvicorn then skips the lifespan shutdown
        self.server.should_exit = True
        for listener in self.server.servers:  # no new connection from here on
            listener.close()
        for connection in list(self.server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:  # an open connection dies with the process
                transport.abort()
        await self.service.scheduler.stop()
        await asyncio.wait_for(self.serving, timeout=15)
        self.state.close()  # what was committed stays; the lock goes with the process

    async def run(self, aw: Awaitable[T], *, max_seconds: float = 120.0) -> T:
        return await drive(self.clock, aw, max_seconds=max_seconds)

    async def until(self, predicate: Callable[[], bool], *, max_seconds: float = 120.0) -> None:
        async def wait() -> None:
            while not predicate():  # noqa: ASYNC110 — the fake clock moves between these yields
                await asyncio.sleep(0)

        await self.run(wait(), max_seconds=max_seconds)

    async def advance(self, seconds: float) -> None:
        async def nothing() -> None:
            await self.clock.sleep(seconds)

        await self.run(nothing(), max_seconds=seconds + 1)

    def as_lead(self, name: str) -> httpx.AsyncClient:
        """An HTTP client holding lead ``name``'s token."""
        return self.http(LEAD_TOKENS[name][1])

    def prompts_to(self, agent: str) -> list[tuple[str, str | None]]:
        """What fleetd typed into ``agent`` with ``agent.prompt``, in order: each text with the
        agent's herdr status at that moment."""
        return [
            (str(r["params"]["text"]), r["status"])
            for r in self.requests
            if r["method"] == "agent.prompt" and r["params"].get("target") == agent
        ]

    def http(self, token: str = LEAD_TOKEN) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    async def tool(self, client: httpx.AsyncClient, tool: str, **args: Any) -> dict[str, Any]:
        response = await self.run(client.post(f"/v1/tools/{tool}", json=args))
        body: dict[str, Any] = response.json()
        assert body["ok"], body
        result: dict[str, Any] = body["result"]
        return result


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _repo(path: Path) -> Path:
    if path.exists():
        return path  # a restart on the same state
    path.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t.invalid",
    }
    (path / "README.md").write_text("x\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


@pytest.fixture
async def e2e(tmp_path: Path) -> AsyncIterator[E2EFleet]:
    async with start_e2e(tmp_path) as fleet:
        yield fleet


@contextlib.asynccontextmanager
async def start_e2e(
    tmp_path: Path,
    overrides: dict[str, Any] | None = None,
    *,
    agents: dict[str, Any] | None = None,
    leads: tuple[str, ...] = ("lead",),
    restart_of: E2EFleet | None = None,
    discard_state: bool = False,
) -> AsyncIterator[E2EFleet]:
    """Simulator + fleetd on uvicorn; ``overrides`` replace top-level config sections, ``agents``
    adds scenario profiles by agent-name pattern (applied after the default ones), ``leads``
    names the configured leads (of :data:`LEAD_TOKENS`), each already running in herdr as an
    agent of its own name. Every herdr request the simulator reads lands in ``requests``.

    ``restart_of`` starts a new fleetd on the herdr, clock, port and state that an earlier one
    (stopped or crashed) left; the simulator then stays up for the earlier fleet to stop. Every
    request the simulator receives is kept in ``herdr_requests`` (across a restart too). The state
    store is the SQLite file beside the config, opened and locked as ``fleetd serve`` does;
    ``discard_state`` starts afresh as ``fleetd serve --discard-state`` does.
    """
    if restart_of is None:
        clock = FakeClock()
        short = Path(tempfile.mkdtemp(prefix="fe2e"))
        socket_path = short / "herdr.sock"
        existing = [
            {"name": name, "kind": "claude", "cwd": "/tmp", "label": name} for name in leads
        ]
        scenario = parse_scenario(
            {**SCENARIO, "agents": {**SCENARIO["agents"], **(agents or {})}, "existing": existing}
        )
        requests: list[dict[str, Any]] = []

        def tap(kind: str, frame: dict[str, Any]) -> None:
            if kind != "request":
                return
            # the target's status as herdr saw it when the request arrived
            target = frame["params"].get("target")
            try:
                status = simulator.agent(target).status.value if target else None
            except HerdrError:
                status = None
            requests.append({**frame, "status": status})

        simulator = HerdrSimulator(
            socket_path, scenario, clock=clock, behaviour=FleetdCallbackBehaviour(), tap=tap
        )
        await simulator.start()
        port = _free_port()
    else:
        clock, simulator = restart_of.clock, restart_of.simulator
        requests = restart_of.requests
        socket_path = simulator.socket_path
        port = int(restart_of.base_url.rsplit(":", 1)[1])
    env = {"T_OP": OPERATOR_TOKEN, **dict(LEAD_TOKENS.values())}
    document = {
        "api": {"host": "127.0.0.1", "port": port},
        "herdr": {"socketPath": str(socket_path)},
        "operatorTokenEnv": "T_OP",
        "leads": [{"name": n, "agent": n, "tokenEnv": LEAD_TOKENS[n][0]} for n in leads],
        "profiles": {"sonnet": {"kind": "claude"}, "codex": {"kind": "codex"}},
        "worktrees": {"root": str(tmp_path / "wt"), "defaultRepo": str(_repo(tmp_path / "repo"))},
    }
    document.update(overrides or {})
    config_path = tmp_path / "fleetd.yaml"
    config_path.write_text(yaml.safe_dump(document), encoding="utf-8")
    ref = ConfigRef.load(config_path, env, now=clock.now())  # as `fleetd serve` does: warnings log
    control = HerdrAgentControl.for_socket(socket_path, clock=clock, request_timeout=2.0)
    state = open_state(
        ref.current,
        deadline=lambda: ref.current.state.operation_timeout,
        instance=instance_name(ref.current),
        discard=discard_state,
        now=clock.now(),
    )
    service = build_service(ref, environ=env, clock=clock, control=control, state=state.store)
    app = create_app(service)
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    serving = asyncio.create_task(server.serve())

    async def started() -> None:
        while not server.started:
            if serving.done():
                await serving
            await asyncio.sleep(0)

    await drive(clock, started(), max_seconds=30)
    fleet = E2EFleet(
        clock=clock,
        service=service,
        simulator=simulator,
        base_url=f"http://127.0.0.1:{port}",
        server=server,
        serving=serving,
        config_path=config_path,
        state=state,
        requests=requests,
    )
    try:
        yield fleet
    finally:
        if not serving.done():
            await fleet.stop()
        fleet.state.close()
        if restart_of is None:
            await simulator.stop()
