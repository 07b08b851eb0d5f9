"""The ``fleetd`` command: ``serve``, ``sim``, ``demo``, ``check-config``, ``migrate``, and the
terminal's ``status``, ``top`` and ``incidents`` (:mod:`fleetd.term`).

Each subcommand parses its own arguments and returns a process exit code; nothing runs at import.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from fleetd.errors import StateStoreError

__all__ = ["main", "migrate_main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "serve": _serve,
        "sim": _sim,
        "demo": _demo,
        "check-config": _check_config,
        "migrate": _migrate,
        "status": _status,
        "top": _top,
        "incidents": _incidents,
    }
    if not args or args[0] in ("-h", "--help") or args[0] not in commands:
        print(f"usage: fleetd {{{','.join(commands)}}} ...", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    return commands[args[0]](args[1:])


def _check_config(argv: list[str]) -> int:
    from fleetd.config import check_config_main  # noqa: PLC0415 — each subcommand loads its own

    return check_config_main(argv)


def _migrate(argv: list[str]) -> int:
    configure_logging("WARNING")
    return migrate_main(argv)


def migrate_main(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``fleetd migrate [--config PATH] [--check]``: 0 done, 1 journal error or behind, 2 config.

    Without ``--check`` it upgrades the configured journal to this build's head; with it, it only
    reports and exits 1 when the database is not at the head. The URL prints with its password
    masked.
    """
    from fleetd.config import load_config  # noqa: PLC0415
    from fleetd.config.fields import mask_url  # noqa: PLC0415
    from fleetd.errors import ConfigError, JournalError  # noqa: PLC0415
    from fleetd.journal.engine import journal_engine  # noqa: PLC0415
    from fleetd.journal.migrate import current_revision, head_revision, upgrade_engine  # noqa: PLC0415

    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    env = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog="fleetd migrate", description="Bring the incident journal to this build's schema."
    )
    parser.add_argument("--config", type=Path, default=None, help="config YAML (default: none)")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if behind")
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    try:
        url = load_config(args.config, env).config.journal.url.get_secret_value()
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=err)
        return 2
    try:
        engine = journal_engine(url)
        try:
            head = head_revision()
            reached = current_revision(engine) if args.check else upgrade_engine(engine)
        finally:
            engine.dispose()
    except JournalError as exc:
        print(f"journal error: {exc}", file=err)
        return 1
    print(f"journal: {mask_url(url)}", file=out)
    print(f"revision: {reached or 'none'} (head {head})", file=out)
    return 0 if reached == head else 1


def _status(argv: list[str]) -> int:
    from fleetd.term.commands import status_main  # noqa: PLC0415

    return status_main(argv)


def _top(argv: list[str]) -> int:
    from fleetd.term.commands import top_main  # noqa: PLC0415

    return top_main(argv)


def _incidents(argv: list[str]) -> int:
    from fleetd.term.commands import incidents_main  # noqa: PLC0415

    return incidents_main(argv)


def _sim(argv: list[str]) -> int:
    from fleetd.sim.run import main as sim_main  # noqa: PLC0415

    return sim_main(argv)


def _demo(argv: list[str]) -> int:
    from fleetd.demo.show import main as demo_main  # noqa: PLC0415

    return demo_main(argv)


def _serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fleetd serve", description="run fleetd")
    parser.add_argument("--config", type=Path, default=None, help="config YAML (default: none)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--discard-state",
        action="store_true",
        help="start afresh: forget the members, tickets and turns the state store holds",
    )
    parser.add_argument(
        "--standby",
        action="store_true",
        help="while another fleetd holds this instance, wait and take over when it dies",
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level)

    from fleetd.clock import SystemClock  # noqa: PLC0415
    from fleetd.config import ConfigRef  # noqa: PLC0415
    from fleetd.config.fields import mask_url  # noqa: PLC0415
    from fleetd.errors import ConfigError, StateStoreError  # noqa: PLC0415
    from fleetd.runtime import instance_name  # noqa: PLC0415
    from fleetd.serving import serve, standby_poll, wait_as_standby, wait_for_port  # noqa: PLC0415
    from fleetd.state.opening import open_state  # noqa: PLC0415

    try:
        ref = ConfigRef.load(args.config, dict(os.environ), now=SystemClock().now())
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=sys.stderr)
        return 2
    url = ref.current.state.url.get_secret_value()
    standby = args.standby or ref.current.state.standby
    if standby and args.discard_state:
        print(
            "--discard-state and a standby together would discard the store on take-over",
            file=sys.stderr,
        )
        return 2
    try:
        state = open_state(
            ref.current,
            deadline=lambda: ref.current.state.operation_timeout,
            instance=instance_name(ref.current),
            discard=args.discard_state,
            now=SystemClock().now(),
            standby=standby,
        )
    except StateStoreError as exc:
        return _state_store_error(mask_url(url), exc)
    try:
        serving = state.active
        if not serving and asyncio.run(wait_as_standby(ref, state)):
            # a holder whose lock went with its connection stops within a check: its port frees
            wait_for_port(ref.current.api.host, ref.current.api.port, 2 * standby_poll(ref) + 5)
            serving = True
        if serving and not asyncio.run(serve(ref, state=state.store, lock=state.lock)):
            return 3  # another process serves the instance: it took the lock, or the name
    except StateStoreError as exc:
        return _state_store_error(mask_url(url), exc)
    except ConfigError as exc:
        print(f"config error: {exc.key}: {exc.reason}", file=sys.stderr)
        return 2
    finally:
        state.close()
    return 0


#: Loggers of the AMQP client stack. At DEBUG they log every frame, and a frame holds the raw
#: message body (a reply, a quarantined entry); their ERROR lines may print a returned message.
#: While a broker is down they also write a line or two for every reconnect and probe (an ERROR
#: from aiormq each time, a WARNING from aio-pika each second): fleetd reports a broker's outage
#: itself, once when it starts and once when it ends (:mod:`fleetd.inbox.amqp_link`), so these
#: loggers pass only CRITICAL.
_BROKER_LOGGERS = ("aio_pika", "aiormq", "pamqp")
_BROKER_LEVEL = logging.CRITICAL


class _BrokerRecordFilter(logging.Filter):
    """Keeps the broker client's records to CRITICAL, with their arguments withheld.

    A level cap alone is not enough: a handler-level filter also covers a record that reaches the
    handler from a child logger someone else turned up, and arguments (frames, messages,
    connections) are replaced by their type names, so no body or URL is ever formatted. An attached
    exception is withheld the same way: its class name joins the line instead of a chained trace
    (aiormq logs one for every lost connection) whose text could carry a frame.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.partition(".")[0] not in _BROKER_LOGGERS:
            return True
        if record.levelno < _BROKER_LEVEL:
            return False
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(f"<{type(arg).__name__}>" for arg in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {name: f"<{type(v).__name__}>" for name, v in record.args.items()}
        if record.exc_info and record.exc_info[0] is not None:
            record.msg = f"{record.msg} ({record.exc_info[0].__name__})"
            record.exc_info = None
            record.exc_text = None
        return True


def configure_logging(level: str | int) -> None:
    """Root logging for ``serve``; the broker client logs only CRITICAL, never a body (fleetd
    reports broker outages itself), the HTTP client never logs (a webhook URL is a secret), and
    the MCP SDK only its warnings."""
    from fleetd.http_client import silence_http_logs  # noqa: PLC0415

    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    silence_http_logs()
    for handler in logging.getLogger().handlers:
        handler.addFilter(_BrokerRecordFilter())
    for name in _BROKER_LOGGERS:
        logging.getLogger(name).setLevel(_BROKER_LEVEL)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # a migration's steps are noise
    # the MCP SDK says INFO per request ("Terminating session: None": every stateless request
    # ends its session), which would be one line per member call
    logging.getLogger("mcp").setLevel(logging.WARNING)


def _state_store_error(masked_url: str, exc: StateStoreError) -> int:
    """Say why the state store cannot serve, and how to start afresh when it cannot be read: an
    SQLite file is set aside by ``--discard-state``; a PostgreSQL store's tables are emptied by
    it, or (a newer build's schema) left for that build or for the operator to drop."""
    from fleetd.state.opening import UNREADABLE  # noqa: PLC0415

    print(f"state store error: {masked_url}: {exc}", file=sys.stderr)
    if exc.reason == "no_schema":
        print(
            "the PostgreSQL schema state.url names (its search_path) does not exist: create it, "
            "or correct state.url",
            file=sys.stderr,
        )
        return 2
    if exc.reason not in UNREADABLE:
        return 2
    if masked_url.startswith("sqlite"):
        hint = (
            "fleetd serve --discard-state sets the file aside (renamed, kept beside it) and "
            "starts afresh; what it held is not taken back"
        )
    elif exc.reason == "newer_schema":
        hint = (
            "a newer fleetd wrote this store: run that build, or drop the store's tables to "
            "start afresh (fleetd never drops them)"
        )
    else:
        hint = "fleetd serve --discard-state starts afresh (what the store holds is lost)"
    print(hint, file=sys.stderr)
    return 2
