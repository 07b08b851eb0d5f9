"""``fleetd demo``: a simulated herdr, fleetd on embedded defaults, and two scripted leads.

Everything runs in one process on this machine: the herdr-protocol simulator on a temporary unix
socket (bundled ``demo`` scenario, members that call back into fleetd as real agents do), fleetd's
HTTP and MCP API on 127.0.0.1, and a script acting for two leads. The first lead spawns three
members (Claude Code, Codex, OpenCode profiles), sends each a task, collects the replies, and the
fleet view is printed as it changes. Then it delegates to a member that hits its usage limit and
never replies: health opens an incident for the lead that owns it, the lead's agent exits, and
the incident moves to the second lead, a healthy peer, whose collected health record is printed
with the routing (reason, recipient, generation). Last, the second lead dies too: with no healthy
lead left, the incidents go to a person, and a local webhook receiver verifies and prints each
signed event — ``open``, then ``resolved`` once the second lead is started again
(:mod:`fleetd.demo.webhook`). When an Alertmanager binary is on the PATH, a last act switches
the config file to ``health.notifications.mode: alertmanager`` (hot), loses the second lead
again and prints what a real Alertmanager reports, firing then resolved
(:mod:`fleetd.demo.alertmanager`); without one, a line says how to see it. The live fleet page's
URL and the ``fleetd top`` line are printed at the start: open the page in a browser and sign in
with the operator token to watch all this happen. Then it keeps serving until Ctrl-C (or exits
at once with ``--once``).

The demo runs on a simulated clock (:class:`~fleetd.clock.FakeClock`, moved by
:func:`~fleetd.sim.harness.drive`), so the minutes of health ticks it shows pass in seconds;
while it keeps serving, that clock follows real time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from fleetd.api.app import create_app
from fleetd.clock import Clock, FakeClock, SystemClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.config.model import NotificationMode
from fleetd.demo import alertmanager as demo_alertmanager
from fleetd.demo.webhook import DemoSink, human_act, start_demo_sink
from fleetd.sim.callback import FleetdCallbackBehaviour
from fleetd.sim.harness import drive
from fleetd.sim.run import bundled_scenario
from fleetd.sim.scenario import load_scenario
from fleetd.sim.server import HerdrSimulator
from fleetd.term.commands import fleetd_command

__all__ = ["main", "run_demo"]

Call = Callable[..., Awaitable[dict[str, Any]]]

_MEMBERS = (
    ("sonnet", "Add input validation to the signup form"),
    ("codex", "Write unit tests for the date parser"),
    ("opencode", "Update the changelog for the release"),
)
_DOOMED = ("sonnet-usage", "Migrate the billing tables")  # the scenario's *-usage* member
_SCRIPT_SECONDS = 900.0  # simulated time the script may take (it needs about four minutes)
_ACT_SECONDS = 300.0  # and each step of the alertmanager act


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleetd demo", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="API port (a free one if taken)")
    parser.add_argument("--once", action="store_true", help="exit when the scripted lead is done")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_demo(port=args.port, once=args.once))
    return 0


async def run_demo(*, port: int, once: bool, out: Any = None) -> dict[str, Any]:
    """Run the whole demo; returns the final fleet view (as the operator sees it)."""

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    with tempfile.TemporaryDirectory(prefix="fleetd-demo-") as tmp:
        root = Path(tmp)
        repo = _demo_repo(root / "repo")
        port = port if port and _port_free(port) else _free_port()
        tokens = {lead: secrets.token_urlsafe(24) for lead in ("lead", "lead-b", "operator")}
        manager = await _alertmanager(root, say)
        behind = demo_alertmanager.CLOCK_BEHIND if manager else timedelta(0)
        clock = FakeClock(SystemClock().now() - behind)
        sink = await start_demo_sink(clock, say)
        environ = {
            **sink.environ,
            **({demo_alertmanager.URL_ENV: manager.url} if manager else {}),
            "FLEETD_DEMO_LEAD_TOKEN": tokens["lead"],
            "FLEETD_DEMO_LEAD_B_TOKEN": tokens["lead-b"],
            "FLEETD_DEMO_OPERATOR_TOKEN": tokens["operator"],
        }
        document = {
            "api": {"host": "127.0.0.1", "port": port},
            "herdr": {"socketPath": str(root / "herdr.sock")},
            "operatorTokenEnv": "FLEETD_DEMO_OPERATOR_TOKEN",
            "leads": [
                {"name": "lead", "agent": "lead", "tokenEnv": "FLEETD_DEMO_LEAD_TOKEN"},
                {"name": "lead-b", "agent": "lead-b", "tokenEnv": "FLEETD_DEMO_LEAD_B_TOKEN"},
            ],
            "profiles": {
                "sonnet": {"kind": "claude", "maxLoad": 2},
                "codex": {"kind": "codex", "maxLoad": 2},
                "opencode": {"kind": "opencode"},
            },
            "worktrees": {"root": str(root / "worktrees"), "defaultRepo": str(repo)},
            "health": {
                "enabled": True,
                "snapshotIntervalSeconds": 15,
                "notifications": sink.notifications,
            },
        }
        config_file = root / "fleetd.yaml"  # JSON is YAML; rewritten to switch the sink kind
        _write_json(config_file, document)
        ref = ConfigRef.load(config_file, environ, now=clock.now())
        typed: list[tuple[str, str]] = []  # (agent, text) of every agent.prompt herdr received

        def tap(kind: str, frame: dict[str, Any]) -> None:
            if kind == "request" and frame.get("method") == "agent.prompt":
                params = frame.get("params") or {}
                typed.append((str(params.get("target")), str(params.get("text"))))

        simulator = HerdrSimulator(
            root / "herdr.sock",
            load_scenario(bundled_scenario("demo")),
            clock=clock,
            behaviour=FleetdCallbackBehaviour(),
            tap=tap,
        )
        await simulator.start()
        service = build_service(ref, environ=environ, clock=clock)
        server = uvicorn.Server(
            uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
        try:
            await drive(clock, _started(server, serving), max_seconds=60)
            base = f"http://127.0.0.1:{port}"
            say(f"fleetd is up at {base} (herdr simulator on {root / 'herdr.sock'})")
            _endpoints(say, base, tokens["operator"], sink, manager)
            final = await drive(
                clock,
                _script(base, tokens, simulator, typed, say, sink=sink),
                max_seconds=_SCRIPT_SECONDS,
            )
            if manager:
                await _alertmanager_act(
                    manager,
                    document=document,
                    config_file=config_file,
                    service=service,
                    clock=clock,
                    simulator=simulator,
                    say=say,
                )
            if not once:
                say("The demo keeps serving; press Ctrl-C to stop.")
                await _follow_real_time(clock, serving)
            return final
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await drive(clock, serving, max_seconds=60)
            await simulator.stop()
            await sink.running.stop()
            if manager:
                await manager.stop()


def _endpoints(
    say: Callable[[str], None],
    base: str,
    token: str,
    sink: DemoSink,
    manager: demo_alertmanager.DemoAlertmanager | None,
) -> None:
    """What to try while the demo runs: curl, the terminal, the live page, the sinks."""
    say(f"  fleet view:  curl -H 'Authorization: Bearer {token}' {base}/v1/fleet")
    say(f"  metrics:     curl {base}/metrics     health: curl {base}/healthz")
    say(f"  terminal:    FLEETD_URL={base} FLEETD_TOKEN={token} {fleetd_command()} top")
    say(f"  live page:   {base}/  (sign in with the operator token above)")
    say(f"  webhook:     a receiver at {sink.running.url} verifies and prints each event")
    if manager:
        behind = demo_alertmanager.CLOCK_BEHIND.seconds // 60
        say(
            f"  alertmanager: {manager.url} takes the last act's alerts (the demo's clock "
            f"starts {behind} minutes back, so that Alertmanager, on real time, sees each "
            "resolution in its past)"
        )
    else:
        say(
            "  alertmanager: none on PATH; with Debian's prometheus-alertmanager installed "
            "the demo also shows the alertmanager sink kind"
        )


async def _alertmanager_act(
    manager: demo_alertmanager.DemoAlertmanager,
    *,
    document: dict[str, Any],
    config_file: Path,
    service: Any,
    clock: FakeClock,
    simulator: HerdrSimulator,
    say: Callable[[str], None],
) -> None:
    """The last act with Alertmanager: the config file switched to alertmanager mode, reloaded
    as ``fleetd serve`` reloads it, then :func:`fleetd.demo.alertmanager.alertmanager_act`."""

    async def switch() -> None:
        health = document["health"]
        health["notifications"] = {
            "mode": "alertmanager",
            "webhookUrlEnvs": [demo_alertmanager.URL_ENV],
        }
        await asyncio.to_thread(_write_json, config_file, document)
        await service.check_config()
        mode = service.config.current.health.notifications.mode
        if mode is not NotificationMode.ALERTMANAGER:
            raise RuntimeError(f"the config reload left the sink kind {mode}")

    async def driven(step: Awaitable[None]) -> None:
        await drive(clock, step, max_seconds=_ACT_SECONDS)

    await demo_alertmanager.alertmanager_act(
        manager=manager, switch=switch, simulator=simulator, drive=driven, until=_until, say=say
    )


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


async def _alertmanager(
    root: Path, say: Callable[[str], None]
) -> demo_alertmanager.DemoAlertmanager | None:
    """A running Alertmanager when its binary is on the PATH, else ``None``."""
    binary = demo_alertmanager.alertmanager_binary()
    if binary is None:
        return None
    manager = demo_alertmanager.DemoAlertmanager(binary, root / "alertmanager", say)
    try:
        await manager.start()
    except (OSError, RuntimeError, TimeoutError) as exc:
        say(f"alertmanager ({binary}) did not start ({type(exc).__name__}); the demo goes without")
        return None
    return manager


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    while not server.started:
        if serving.done():
            await serving
            raise RuntimeError("the API server stopped during startup")
        await asyncio.sleep(0)


async def _follow_real_time(clock: FakeClock, serving: asyncio.Task[None]) -> None:
    """Move the simulated clock with real time until the server stops."""
    real = SystemClock()
    last = real.monotonic()
    while not serving.done():
        await real.sleep(0.05)
        now = real.monotonic()
        clock.advance(now - last)
        last = now


async def _script(
    base: str,
    tokens: dict[str, str],
    simulator: HerdrSimulator,
    typed: list[tuple[str, str]],
    say: Any,
    *,
    sink: DemoSink,
) -> dict[str, Any]:
    """The three acts: the first lead's delegation, its death and the peer taking over, then
    the peer's death and a person told by webhook."""
    async with (
        _client(base, tokens["lead"]) as lead,
        _client(base, tokens["lead-b"]) as peer,
        _client(base, tokens["operator"]) as operator,
    ):
        await _delegate(_caller(lead), simulator.clock, say)
        await _reroute(
            lead=_caller(lead),
            peer=_caller(peer),
            operator=_caller(operator),
            simulator=simulator,
            typed=typed,
            say=say,
        )
        await human_act(
            operator=_caller(operator), simulator=simulator, sink=sink, until=_until, say=say
        )
        return await _caller(operator)("fleet_list")


def _client(base: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def _caller(client: httpx.AsyncClient) -> Call:
    async def call(tool: str, **args: Any) -> dict[str, Any]:
        response = await client.post(f"/v1/tools/{tool}", json=args)
        body: dict[str, Any] = response.json()
        if not body.get("ok"):
            raise RuntimeError(f"{tool} failed: {body.get('error')}")
        result: dict[str, Any] = body["result"]
        return result

    return call


async def _delegate(call: Call, clock: Clock, say: Any) -> None:
    """Act one: the lead spawns three members, sends each a task and collects the replies."""
    sessions = []
    for profile, _task in _MEMBERS:
        row = await call("fleet_spawn", profile=profile, role="implementer")
        sessions.append(row["sessionId"])
        say(f"lead: spawned {row['name']} ({profile}) as {row['sessionId']} — {row['state']}")
    await _until(clock, lambda: _states(call, sessions), _all_ready, say)
    tickets = []
    for session_id, (_profile, task) in zip(sessions, _MEMBERS, strict=True):
        ticket = await call("fleet_send", target=session_id, prompt=task)
        tickets.append(ticket["ticket"])
        say(f"lead: sent {task!r} to {session_id} — ticket {ticket['ticket']}")

    async def outcomes() -> list[str]:
        return [(await call("fleet_poll", ticket=t))["status"] for t in tickets]

    await _until(clock, outcomes, lambda s: all(v != "pending" for v in s), say)
    for t in tickets:
        result = await call("fleet_poll", ticket=t)
        say(f"lead: {t} {result['status']} via {result.get('source')}: {result.get('content')}")
    inbox = await call("fleet_poll")
    say(f"lead: inbox held {len(inbox['messages'])} message(s)")

    async def judged() -> list[str]:
        rows = (await call("fleet_list"))["members"]
        return [(m.get("health") or {}).get("state", "-") for m in rows]

    say("lead: waiting for the health monitor's next look at the fleet")
    await _until(clock, judged, lambda s: "-" not in s, say)
    view = await call("fleet_list")
    for member in view["members"]:
        health = (member.get("health") or {}).get("state", "-")
        say(
            f"  {member['name']:<12} {member['profile']:<9} state={member['state']:<6} "
            f"herdr={member['liveStatus']} turn={member['turn']} health={health}"
        )
    coverage = view.get("healthCoverage", {})
    say(f"  incidents: {len(view.get('incidents', []))}; coverage: {coverage.get('status')}")


async def _reroute(
    *,
    lead: Call,
    peer: Call,
    operator: Call,
    simulator: HerdrSimulator,
    typed: list[tuple[str, str]],
    say: Any,
) -> None:
    """Act two: a member of the lead fails, the lead dies, the peer lead takes the incident."""
    clock = simulator.clock
    name, task = _DOOMED
    row = await lead("fleet_spawn", profile="sonnet", name=name)
    sid = row["sessionId"]
    say(f"lead: spawned {name} as {sid}; it will hit its usage limit and never reply")
    await _until(clock, lambda: _states(lead, [sid]), _all_ready, say)
    ticket = (await lead("fleet_send", target=sid, prompt=task))["ticket"]
    say(f"lead: sent {task!r} to {sid} — ticket {ticket}")

    async def routed() -> list[str]:
        rows = (await operator("fleet_list"))["incidents"]
        return [_route_line(i) for i in rows if i["subject"] == sid]

    await _until(clock, routed, bool, say, label="routing")
    say("herdr: the agent of lead exits; its pane is gone")
    simulator.agent("lead").exit()
    await _until(clock, routed, _all_with("lead-b"), say, label="routing")
    view = await operator("fleet_list")
    for row in view["leads"]:
        health = row.get("health") or {}
        say(
            f"  lead {row['name']:<7} health={health.get('state')} "
            f"holds {health.get('assignedForeignIncidents', 0)} incident(s) for another lead"
        )

    async def nudges() -> list[str]:
        return [text for agent, text in typed if agent == "lead-b"]

    await _until(clock, nudges, bool, say, label="herdr typed into lead-b")
    messages = (await peer("fleet_poll", target="lead-b"))["messages"]
    say(f'lead-b: fleet_poll(target="lead-b") -> {len(messages)} message(s)')
    for message in messages:
        evidence = message.get("evidence") or {}
        say(
            f"  {message['kind']} {message.get('state')} of {message.get('subjectTerminal')}: "
            f"{evidence.get('routingReason')}, generation {evidence.get('routingGeneration')}, "
            f"on behalf of {evidence.get('onBehalfOf')}"
        )
        say(f"    {message.get('content')}")
    coverage = view.get("healthCoverage", {})
    say(f"  incidents: {len(view.get('incidents', []))}; coverage: {coverage.get('status')}")


def _route_line(incident: dict[str, Any]) -> str:
    """One incident's routing: state, recipient, reason, generation, on whose behalf."""
    routing = incident.get("routing") or {}
    recipient = incident.get("recipient") or "a person"
    line = (
        f"{incident['state']} -> {recipient} ({routing.get('reason')}, "
        f"generation {routing.get('generation')}"
    )
    behalf = routing.get("onBehalfOf")
    return line + (f", on behalf of {behalf})" if behalf else ")")


def _all_with(recipient: str) -> Callable[[list[str]], bool]:
    """Done once every routing line names ``recipient``."""
    return lambda lines: bool(lines) and all(f"-> {recipient} " in line for line in lines)


def _all_ready(states: list[str]) -> bool:
    return all(state == "ready" for state in states)


async def _states(call: Call, sessions: list[str]) -> list[str]:
    return [(await call("fleet_status", sessionId=s))["state"] for s in sessions]


async def _until(
    clock: Clock, probe: Any, done: Any, say: Any, *, label: str = "fleet", limit: float = 300.0
) -> None:
    """Print ``probe()`` (as ``label``) each time it changes until ``done`` holds, looking every
    quarter of a second of ``clock``; give up after ``limit`` seconds of it."""
    deadline = clock.monotonic() + limit
    last = None
    while True:
        value = await probe()
        if value != last and value:  # nothing yet is not news
            say(f"  {label}: {value}")
            last = value
        if done(value):
            return
        if clock.monotonic() > deadline:
            raise RuntimeError("the demo fleet did not settle in time")
        await clock.sleep(0.25)


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
