"""``fleetd status``, ``fleetd top`` and ``fleetd incidents``: a running fleetd, seen from a
terminal.

Each reads ``FLEETD_URL`` (default ``http://127.0.0.1:8765``) and ``FLEETD_TOKEN`` (the operator
token or a lead's; ``--url-env``/``--token-env`` name other variables), and returns an exit code:
0 shown, 2 no token or a bad URL, 3 fleetd unreachable, 4 token refused (401 or 403), 5 another
error answer (see :mod:`fleetd.term.client`). Who is asking (``as operator``, ``as lead NAME``) is
fleetd's own answer, ``GET /v1/whoami``. Failures are one line on stderr that never holds
the token. A screen fits the terminal (80×24 when it is not one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

from rich.console import Console

from fleetd.term.client import (
    DEFAULT_TOKEN_ENV,
    DEFAULT_URL_ENV,
    FleetdClient,
    Target,
    TermError,
)
from fleetd.term.view import fleet_all_screen, fleet_screen, identity, incident_screen

__all__ = ["fleetd_command", "incidents_main", "status_main", "top_main"]

T = TypeVar("T")


def fleetd_command() -> str:
    """How a shell here starts ``fleetd``: by name on PATH, else the script beside Python."""
    beside = Path(sys.executable).with_name("fleetd")
    if shutil.which("fleetd") or not beside.is_file():
        return "fleetd"
    return str(beside)


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--url-env", default=DEFAULT_URL_ENV, help="variable holding fleetd's URL (%(default)s)"
    )
    parser.add_argument(
        "--token-env", default=DEFAULT_TOKEN_ENV, help="variable holding the token (%(default)s)"
    )
    return parser


def _size() -> tuple[int, int]:
    size = shutil.get_terminal_size(fallback=(80, 24))
    return max(size.columns, 20), max(size.lines, 6)


def _print(lines: Sequence[Any], out: TextIO) -> None:
    console = Console(file=out, width=_size()[0], highlight=False, soft_wrap=False)
    for line in lines:
        console.print(line, overflow="crop", no_wrap=True)


def _run(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    read: Callable[[FleetdClient], Awaitable[T]],
) -> T | int:
    """Run ``read`` with a client of the environment's fleetd, or the failure's exit code."""
    try:
        target = Target.from_env(environ, url_env=args.url_env, token_env=args.token_env)

        async def go() -> T:
            async with FleetdClient(target) as client:
                return await read(client)

        return asyncio.run(go())
    except TermError as failed:
        print(f"fleetd: {failed}", file=sys.stderr)
        return failed.exit_code


def status_main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    """One screen of the fleet: who is asking, coverage, leads, members by lead, incidents;
    ``--all``: one block per fleetd sharing the journal, each with its age, down ones marked."""
    parser = _parser("fleetd status", "one screen of a running fleetd's fleet")
    parser.add_argument("--lead", help="only the members and incidents of this lead")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every fleetd sharing the journal, one block each (the operator's token)",
    )
    args = parser.parse_args(argv)

    async def read(client: FleetdClient) -> int:
        document = await client.fleet(every=args.all)
        who = identity(await client.whoami())
        width, height = _size()
        screen = fleet_all_screen if args.all else fleet_screen
        lines = screen(
            document,
            source=client.target.shown,
            who=who,
            lead=args.lead,
            width=width,
            height=height - 1,
        )
        _print(lines, sys.stdout)
        return 0

    result = _run(args, os.environ if environ is None else environ, read)
    return int(result)


def incidents_main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    """Open and recently resolved incidents with routing and delivery; ``--json`` prints the
    ``GET /v1/incidents`` result as fleetd gives it."""
    parser = _parser("fleetd incidents", "open and recent incidents of a running fleetd")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--lead", help="only the incidents that concern this lead")
    args = parser.parse_args(argv)

    async def read(client: FleetdClient) -> int:
        listing = await client.incidents()
        if args.json:
            print(json.dumps(listing, indent=2, ensure_ascii=False))
            return 0
        who = identity(await client.whoami())
        width, height = _size()
        lines = incident_screen(
            listing,
            source=client.target.shown,
            who=who,
            now=datetime.now(UTC),
            lead=args.lead,
            width=width,
            height=height - 1,
        )
        _print(lines, sys.stdout)
        return 0

    return int(_run(args, os.environ if environ is None else environ, read))


def top_main(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> int:
    """The status screen, live (keys: l lead filter, a all leads, i incidents, q quit);
    ``--all``: every fleetd sharing the journal, read again every two seconds."""
    from fleetd.term.top import TopApp  # noqa: PLC0415 — textual loads only for top

    parser = _parser("fleetd top", "the fleet of a running fleetd, live")
    parser.add_argument("--lead", help="start filtered to this lead")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every fleetd sharing the journal, one block each (the operator's token)",
    )
    args = parser.parse_args(argv)

    async def read(client: FleetdClient) -> int:
        # a refused token or a dead fleetd fails before the app
        first = await client.fleet(every=args.all)
        who = identity(await client.whoami())
        app = TopApp(client, first, who=who, lead=args.lead, every=args.all)
        await app.run_async()
        if app.failure:
            print(f"fleetd: {app.failure}", file=sys.stderr)
        return app.return_code or 0

    return int(_run(args, os.environ if environ is None else environ, read))
