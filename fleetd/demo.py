"""``fleetd demo``: a simulated herdr, fleetd on embedded defaults, and a scripted lead.

Everything runs in one process on this machine: the herdr-protocol simulator on a temporary unix
socket (bundled ``demo`` scenario, members that call back into fleetd as real agents do), fleetd's
HTTP and MCP API on 127.0.0.1, and a scripted lead that spawns three members (Claude Code, Codex,
OpenCode profiles), sends each a task, collects the replies, and prints the fleet view as it
changes. Then it keeps serving until Ctrl-C (or exits at once with ``--once``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from fleetd.api.app import create_app
from fleetd.clock import SystemClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config
from fleetd.sim.callback import FleetdCallbackBehaviour
from fleetd.sim.run import bundled_scenario
from fleetd.sim.scenario import load_scenario
from fleetd.sim.server import HerdrSimulator

__all__ = ["main", "run_demo"]

_MEMBERS = (
    ("sonnet", "Add input validation to the signup form"),
    ("codex", "Write unit tests for the date parser"),
    ("opencode", "Update the changelog for the release"),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleetd demo", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="API port (a free one if taken)")
    parser.add_argument("--once", action="store_true", help="exit when the scripted lead is done")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_demo(port=args.port, once=args.once))
    return 0


async def run_demo(*, port: int, once: bool, out: Any = None) -> dict[str, Any]:
    """Run the whole demo; returns the final fleet view."""

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    with tempfile.TemporaryDirectory(prefix="fleetd-demo-") as tmp:
        root = Path(tmp)
        repo = _demo_repo(root / "repo")
        port = port if port and _port_free(port) else _free_port()
        lead_token, operator_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        environ = {
            "FLEETD_DEMO_LEAD_TOKEN": lead_token,
            "FLEETD_DEMO_OPERATOR_TOKEN": operator_token,
        }
        document = {
            "api": {"host": "127.0.0.1", "port": port},
            "herdr": {"socketPath": str(root / "herdr.sock")},
            "operatorTokenEnv": "FLEETD_DEMO_OPERATOR_TOKEN",
            "leads": [{"name": "lead", "agent": "lead", "tokenEnv": "FLEETD_DEMO_LEAD_TOKEN"}],
            "profiles": {
                "sonnet": {"kind": "claude", "maxLoad": 2},
                "codex": {"kind": "codex", "maxLoad": 2},
                "opencode": {"kind": "opencode"},
            },
            "worktrees": {"root": str(root / "worktrees"), "defaultRepo": str(repo)},
            "health": {"enabled": True, "snapshotIntervalSeconds": 15},
        }
        clock = SystemClock()
        ref = ConfigRef(
            parse_config(document, environ, base_dir=root), environ=environ, now=clock.now()
        )
        simulator = HerdrSimulator(
            root / "herdr.sock",
            load_scenario(bundled_scenario("demo")),
            clock=clock,
            behaviour=FleetdCallbackBehaviour(),
        )
        await simulator.start()
        service = build_service(ref, environ=environ, clock=clock)
        server = uvicorn.Server(
            uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if serving.done():
                    await serving
                    raise RuntimeError("the API server stopped during startup")
                await asyncio.sleep(0.05)
            base = f"http://127.0.0.1:{port}"
            say(f"fleetd is up at {base} (herdr simulator on {root / 'herdr.sock'})")
            say(f"  fleet view:  curl -H 'Authorization: Bearer {operator_token}' {base}/v1/fleet")
            say(f"  metrics:     curl {base}/metrics     health: curl {base}/healthz")
            final = await _scripted_lead(base, lead_token, say)
            if not once:
                say("The demo keeps serving; press Ctrl-C to stop.")
                await serving
            return final
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            await simulator.stop()


async def _scripted_lead(base: str, token: str, say: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:

        async def call(tool: str, **args: Any) -> dict[str, Any]:
            response = await client.post(f"/v1/tools/{tool}", json=args)
            body: dict[str, Any] = response.json()
            if not body.get("ok"):
                raise RuntimeError(f"{tool} failed: {body.get('error')}")
            result: dict[str, Any] = body["result"]
            return result

        sessions = []
        for profile, _task in _MEMBERS:
            row = await call("fleet_spawn", profile=profile, role="implementer")
            sessions.append(row["sessionId"])
            say(f"lead: spawned {row['name']} ({profile}) as {row['sessionId']} — {row['state']}")
        await _until(lambda: _states(call, sessions), lambda s: all(v == "ready" for v in s), say)
        tickets = []
        for session_id, (_profile, task) in zip(sessions, _MEMBERS, strict=True):
            ticket = await call("fleet_send", target=session_id, prompt=task)
            tickets.append(ticket["ticket"])
            say(f"lead: sent {task!r} to {session_id} — ticket {ticket['ticket']}")

        async def outcomes() -> list[str]:
            return [(await call("fleet_poll", ticket=t))["status"] for t in tickets]

        await _until(outcomes, lambda s: all(v != "pending" for v in s), say)
        for t in tickets:
            result = await call("fleet_poll", ticket=t)
            say(f"lead: {t} {result['status']} via {result.get('source')}: {result.get('content')}")
        inbox = await call("fleet_poll")
        say(f"lead: inbox held {len(inbox['messages'])} message(s)")

        async def judged() -> list[str]:
            rows = (await call("fleet_list"))["members"]
            return [(m.get("health") or {}).get("state", "-") for m in rows]

        say("lead: waiting for the health monitor's next look at the fleet")
        await _until(judged, lambda s: "-" not in s, say)
        view = await call("fleet_list")
        for member in view["members"]:
            health = (member.get("health") or {}).get("state", "-")
            say(
                f"  {member['name']:<12} {member['profile']:<9} state={member['state']:<6} "
                f"herdr={member['liveStatus']} turn={member['turn']} health={health}"
            )
        coverage = view.get("healthCoverage", {})
        say(f"  incidents: {len(view.get('incidents', []))}; coverage: {coverage.get('status')}")
        return view


async def _states(call: Any, sessions: list[str]) -> list[str]:
    return [(await call("fleet_status", sessionId=s))["state"] for s in sessions]


async def _until(probe: Any, done: Any, say: Any, *, limit: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    last = None
    while True:
        value = await probe()
        if value != last:
            say(f"  fleet: {value}")
            last = value
        if done(value):
            return
        if loop.time() > deadline:
            raise RuntimeError("the demo fleet did not settle in time")
        await asyncio.sleep(0.25)


def _demo_repo(path: Path) -> Path:
    """A small git repository for the members' worktrees."""
    path.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "fleetd demo",
        "GIT_AUTHOR_EMAIL": "demo@fleetd.invalid",
        "GIT_COMMITTER_NAME": "fleetd demo",
        "GIT_COMMITTER_EMAIL": "demo@fleetd.invalid",
    }
    (path / "README.md").write_text("demo project\n", encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)  # noqa: S603, S607 — fixed argv
    return path


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
