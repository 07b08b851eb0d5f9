"""A local webhook receiver: verifies each request the Standard Webhooks way and prints the event.

For ``make demo`` and tests, and as a reference for whoever writes the real receiver. It uses
fleetd's own verification (:func:`fleetd.notify.core.signing.verify`), reads the body as a v1
:class:`~fleetd.notify.payload.IncidentEvent`, drops duplicates on ``webhook-id`` (delivery is at
least once) and prints one line per request::

    open inc_0123456789abcdef01234567 revision 1 (evt_fc2c735859843c8263b71c5227d23024)
    duplicate open inc_0123456789abcdef01234567 revision 1 (evt_fc2c735859843c8263b71c5227d23024)
    refused no_matching_signature

Answers: 200 for an event (new or duplicate), 401 for a signature that does not verify, 400 for
a signed body that is not a v1 event (or whose ``eventId`` is not its ``webhook-id``), 413 past
:data:`MAX_BODY_BYTES`. From a shell::

    FLEETD_WEBHOOK_SECRET=whsec_... python -m fleetd.demo.receiver --port 8799
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fleetd.clock import Clock, SystemClock
from fleetd.model.events import EventType
from fleetd.notify.core.signing import DEFAULT_TOLERANCE, Verification, WebhookSecret, verify
from fleetd.notify.payload import IncidentEvent

__all__ = [
    "MAX_BODY_BYTES",
    "ReceivedEvent",
    "RunningReceiver",
    "WebhookReceiver",
    "create_receiver_app",
    "main",
    "start_receiver",
]

MAX_BODY_BYTES: Final = 64 * 1024
DEFAULT_PORT: Final = 8799
DEFAULT_SECRET_ENV: Final = "FLEETD_WEBHOOK_SECRET"  # noqa: S105 - a variable's name
_REMEMBERED: Final = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedEvent:
    """What the receiver took from one verified request."""

    event_id: str
    event_type: EventType
    incident_id: str
    revision: int
    duplicate: bool

    def describe(self) -> str:
        """The printed line."""
        prefix = "duplicate " if self.duplicate else ""
        return (
            f"{prefix}{self.event_type} {self.incident_id} revision {self.revision} "
            f"({self.event_id})"
        )


class WebhookReceiver:
    """Verification, decoding and dedupe of received requests; no transport."""

    def __init__(
        self,
        secret: WebhookSecret,
        *,
        clock: Clock,
        report: Callable[[str], None] = lambda line: None,
        tolerance: timedelta = DEFAULT_TOLERANCE,
    ) -> None:
        self._secret = secret
        self._clock = clock
        self._report = report
        self._tolerance = tolerance
        self._seen: OrderedDict[str, None] = OrderedDict()
        self.events: list[ReceivedEvent] = []

    def receive(self, headers: Mapping[str, str], body: bytes) -> int:
        """Handle one request; the HTTP status to answer."""
        verdict = verify(
            self._secret, headers, body, now=self._clock.now(), tolerance=self._tolerance
        )
        if verdict is not Verification.VERIFIED:
            self._report(f"refused {verdict}")
            return 401
        try:
            event = IncidentEvent.model_validate_json(body)
        except ValidationError:
            self._report("refused invalid_payload")
            return 400
        if {k.lower(): v for k, v in headers.items()}.get("webhook-id") != event.event_id:
            self._report("refused id_mismatch")
            return 400
        received = ReceivedEvent(
            event_id=event.event_id,
            event_type=event.event_type,
            incident_id=event.incident.id,
            revision=event.event_revision,
            duplicate=event.event_id in self._seen,
        )
        self._remember(event.event_id)
        self.events.append(received)
        del self.events[:-_REMEMBERED]
        self._report(received.describe())
        return 200

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        self._seen.move_to_end(event_id)
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)


def create_receiver_app(receiver: WebhookReceiver) -> Starlette:
    """An ASGI app that hands every POST (any path) to ``receiver``."""

    async def hook(request: Request) -> Response:
        declared = request.headers.get("content-length", "0")
        if not (declared.isascii() and declared.isdigit()) or int(declared) > MAX_BODY_BYTES:
            return Response(status_code=413)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return Response(status_code=413)
        return Response(status_code=receiver.receive(dict(request.headers), bytes(body)))

    return Starlette(routes=[Route("/{path:path}", hook, methods=["POST"])])


class _EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves the host process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(slots=True)
class RunningReceiver:
    """A receiver serving in this event loop; ``url`` accepts connections from the start."""

    url: str
    receiver: WebhookReceiver
    _server: uvicorn.Server
    _task: asyncio.Task[None]

    async def stop(self) -> None:
        self._server.should_exit = True
        await self._task


async def start_receiver(
    receiver: WebhookReceiver, *, host: str = "127.0.0.1", port: int = 0
) -> RunningReceiver:
    """Serve ``receiver`` on ``host:port`` (0: any free port) until :meth:`RunningReceiver.stop`.

    The socket is bound and listening before this returns, so the URL can be used at once.
    """
    sock = socket.create_server((host, port))
    bound_host, bound_port = sock.getsockname()[:2]
    config = uvicorn.Config(
        create_receiver_app(receiver), log_level="warning", access_log=False, lifespan="off"
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    return RunningReceiver(
        url=f"http://{bound_host}:{bound_port}/", receiver=receiver, _server=server, _task=task
    )


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run a printing receiver until interrupted; 2 when the secret is missing or malformed."""
    parser = argparse.ArgumentParser(prog="python -m fleetd.demo.receiver")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--secret-env", default=DEFAULT_SECRET_ENV, help="variable with whsec_...")
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    try:
        secret = WebhookSecret.parse(env.get(args.secret_env, ""))
    except ValueError as error:
        sys.stderr.write(f"{args.secret_env}: {error}\n")
        return 2

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    receiver = WebhookReceiver(secret, clock=SystemClock(), report=say)
    say(f"receiving fleetd webhooks on http://{args.host}:{args.port}/")
    config = uvicorn.Config(
        create_receiver_app(receiver),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
