"""The ``fleetd`` command: ``serve``, ``sim``, ``demo``, ``check-config``.

Each subcommand parses its own arguments and returns a process exit code; nothing runs at import.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from fleetd.config import ConfigRef

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "serve": _serve,
        "sim": _sim,
        "demo": _demo,
        "check-config": _check_config,
    }
    if not args or args[0] in ("-h", "--help") or args[0] not in commands:
        print("usage: fleetd {serve,sim,demo,check-config} ...", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    return commands[args[0]](args[1:])


def _check_config(argv: list[str]) -> int:
    from fleetd.config import check_config_main  # noqa: PLC0415 — each subcommand loads its own

    return check_config_main(argv)


def _sim(argv: list[str]) -> int:
    from fleetd.sim.run import main as sim_main  # noqa: PLC0415

    return sim_main(argv)


def _demo(argv: list[str]) -> int:
    from fleetd.demo import main as demo_main  # noqa: PLC0415

    return demo_main(argv)


def _serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fleetd serve", description="run fleetd")
    parser.add_argument("--config", type=Path, default=None, help="config YAML (default: none)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )

    from fleetd.clock import SystemClock  # noqa: PLC0415
    from fleetd.config import ConfigRef  # noqa: PLC0415
    from fleetd.errors import ConfigError  # noqa: PLC0415

    try:
        ref = ConfigRef.load(args.config, dict(os.environ), now=SystemClock().now())
        asyncio.run(serve(ref))
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=sys.stderr)
        return 2
    return 0


async def serve(ref: ConfigRef) -> None:
    """Serve one fleetd until SIGINT/SIGTERM; SIGHUP asks for a config reload."""
    from fleetd.api.app import create_app  # noqa: PLC0415
    from fleetd.compose import build_service  # noqa: PLC0415

    service = build_service(ref, environ=dict(os.environ))
    app = create_app(service)
    api = ref.current.api
    server = _Server(
        uvicorn.Config(app, host=api.host, port=api.port, log_level="warning", lifespan="on")
    )
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGHUP, ref.request_reload)
        for stop in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop, server.request_exit)
    await server.serve()
    logging.getLogger("fleetd").info("stopped")


class _Server(uvicorn.Server):
    """uvicorn whose signals fleetd owns: SIGTERM and SIGINT stop it, and the exit status is 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def request_exit(self) -> None:
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            config = self.config
            logging.getLogger("fleetd").info("listening on http://%s:%s", config.host, config.port)
