"""Servers the terminal tests talk to: any ASGI app on a real uvicorn, and a stand-in fleetd
whose fleet view version the test moves (``GET /v1/fleet`` long-poll included)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

STARTUP_TIMEOUT = 10.0
MAX_WAIT = 60.0


class _Server(uvicorn.Server):
    """uvicorn that says when it listens and leaves the test runner's signal handlers alone."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextlib.asynccontextmanager
async def serve(app: Any, *, lifespan: Literal["auto", "on", "off"] = "off") -> AsyncIterator[str]:
    """``app`` on uvicorn at 127.0.0.1 on a free port; its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan=lifespan)
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    done, _ = await asyncio.wait(
        {serving, listening}, timeout=STARTUP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    if listening not in done:
        listening.cancel()
        server.should_exit = True
        await serving
        pytest.fail("uvicorn did not start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        server.force_exit = True  # a long-poll still open ends with the server
        await asyncio.wait_for(serving, STARTUP_TIMEOUT)


class FakeFleetd:
    """``GET /v1/fleet`` (long-poll on ``viewVersion``), ``GET /v1/incidents`` and
    ``GET /v1/whoami`` answering recorded payloads (the token is the operator's);
    :meth:`publish` makes a new version and wakes the waiters."""

    def __init__(self, fleet: dict[str, Any], listing: dict[str, Any], token: str) -> None:
        self.fleet = copy.deepcopy(fleet)
        self.listing = listing
        self.token = token
        self.polls = 0
        self.incident_reads = 0
        self._changed = asyncio.Condition()
        self._released = False
        self.waiting = asyncio.Event()
        """Set while a long-poll waits for the next version."""
        self.app = Starlette(
            routes=[
                Route("/v1/fleet", self._fleet),
                Route("/v1/incidents", self._incidents),
                Route("/v1/whoami", self._whoami),
            ]
        )

    async def release(self) -> None:
        """Answer every waiting long-poll now, as a stopping fleetd does."""
        async with self._changed:
            self._released = True
            self._changed.notify_all()

    async def publish(self, fleet: dict[str, Any]) -> None:
        async with self._changed:
            self.fleet = {**copy.deepcopy(fleet), "viewVersion": self.fleet["viewVersion"] + 1}
            self._changed.notify_all()

    def _refused(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization") == f"Bearer {self.token}":
            return None
        error = {"code": "unauthenticated", "message": "the bearer token is not recognised"}
        return JSONResponse({"ok": False, "error": error}, status_code=401)

    async def _fleet(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        self.polls += 1
        since = request.query_params.get("sinceVersion")
        wait = min(float(request.query_params.get("wait", "0")), MAX_WAIT)
        if since is not None and wait > 0 and int(since) == self.fleet["viewVersion"]:
            async with self._changed:
                self.waiting.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._changed.wait_for(
                            lambda: self._released or self.fleet["viewVersion"] != int(since)
                        ),
                        wait,
                    )
                self.waiting.clear()
        return JSONResponse({"ok": True, "result": self.fleet})

    async def _whoami(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        return JSONResponse({"ok": True, "result": {"role": "operator", "lead": None}})

    async def _incidents(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        self.incident_reads += 1
        return JSONResponse({"ok": True, "result": self.listing})
