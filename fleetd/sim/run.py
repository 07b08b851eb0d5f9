"""Running the simulator as a process: ``fleetd sim --socket PATH --scenario FILE``.

:func:`run_sim` serves until cancelled (Ctrl-C / SIGTERM) on the system clock; :func:`main` is
the argv entry the CLI calls and returns a process exit code. Nothing starts at import.

Its members behave as in ``fleetd demo``: one started with fleetd's ``FLEETD_URL`` /
``FLEETD_TOKEN`` in its environment calls fleetd back (MCP ``initialize`` once ready, then
``fleet_reply`` at the end of each turn), so a ``fleetd serve`` pointed at this socket sees its
members become ready and answer. Agents started without those variables act as plain scripted ones.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from fleetd.clock import SystemClock
from fleetd.errors import ConfigError
from fleetd.sim.callback import FleetdCallbackBehaviour
from fleetd.sim.scenario import Scenario, load_scenario
from fleetd.sim.server import HerdrSimulator

__all__ = ["bundled_scenario", "main", "run_sim"]


def bundled_scenario(name: str) -> Path:
    """Path of a scenario shipped in ``fleetd/sim/scenarios`` (``demo``, ``faults``)."""
    path = Path(str(resources.files("fleetd.sim") / "scenarios" / f"{name}.yaml"))
    if not path.is_file():
        raise ConfigError("scenario", f"no bundled scenario named {name!r}")
    return path


def _resolve(scenario_path: str | Path | None) -> Scenario:
    if scenario_path is None:
        return Scenario()
    path = Path(scenario_path)
    if not path.exists() and path.suffix == "" and path.parent == Path("."):
        path = bundled_scenario(str(path))
    return load_scenario(path)


async def run_sim(
    socket_path: str | Path,
    scenario_path: str | Path | None,
    *,
    ready: asyncio.Event | None = None,
    prompt_log: Path | None = None,
) -> None:
    """Serve a simulated herdr on ``socket_path`` until cancelled.

    ``scenario_path`` is a YAML file or the name of a bundled scenario (``demo``, ``faults``);
    ``None`` starts an empty session. ``ready`` is set once the socket accepts connections.
    ``prompt_log`` (a test aid) gets one line per ``agent.prompt`` received: the target and the
    text, tab-separated, so a test in another process can count what was typed into each pane.
    """
    simulator = HerdrSimulator(
        socket_path,
        _resolve(scenario_path),
        clock=SystemClock(),
        behaviour=FleetdCallbackBehaviour(),
        tap=_prompt_tap(prompt_log) if prompt_log is not None else None,
    )
    await simulator.start()
    if ready is not None:
        ready.set()
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await simulator.stop()


def _prompt_tap(path: Path) -> Callable[[str, dict[str, Any]], None]:
    def tap(kind: str, frame: dict[str, Any]) -> None:
        if kind != "request" or frame.get("method") != "agent.prompt":
            return
        params = frame.get("params") or {}
        text = str(params.get("text", "")).replace("\t", " ").replace("\n", " ")
        with path.open("a", encoding="utf-8") as log:
            log.write(f"{params.get('target')}\t{text}\n")

    return tap


def main(argv: Sequence[str] | None = None) -> int:
    """``fleetd sim``: parse ``--socket`` and ``--scenario`` and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="fleetd sim", description="simulated herdr socket")
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument(
        "--scenario", default="demo", help="scenario YAML file or bundled name (default: demo)"
    )
    parser.add_argument(
        "--prompt-log",
        type=Path,
        default=None,
        help="append one line per agent.prompt received (target, text): a test aid",
    )
    args = parser.parse_args(argv)
    try:
        _resolve(args.scenario)
    except ConfigError as exc:
        print(f"fleetd sim: {exc}", file=sys.stderr)
        return 2

    async def serve() -> None:
        ready = asyncio.Event()
        server = asyncio.ensure_future(
            run_sim(args.socket, args.scenario, ready=ready, prompt_log=args.prompt_log)
        )
        announce = asyncio.ensure_future(_announce(ready, args.socket))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, server.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await server
        finally:
            announce.cancel()

    try:
        asyncio.run(serve())
    except OSError as exc:
        print(f"fleetd sim: cannot listen on {args.socket} ({type(exc).__name__})", file=sys.stderr)
        return 1
    return 0


async def _announce(ready: asyncio.Event, socket_path: str) -> None:
    await ready.wait()
    print(f"fleetd sim: listening on {socket_path}", flush=True)
