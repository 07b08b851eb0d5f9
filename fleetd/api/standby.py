"""What a standby fleetd answers while another process holds its instance (``serve --standby``).

A standby has no fleet yet: it waits for the instance's writer lock. Its HTTP port says so:

* ``/livez`` — 200: the process is alive (a supervisor must not restart it for waiting).
* ``/readyz`` — 503, ``application/health+json``: ``{"status": "fail", "standby": true,
  "instance": …, "holder": {…}, "output": "standby: …"}`` naming the holder it waits for.
* anything else — 503 with the same words: no tool, fleet view or journal is served until it
  takes over.

The holder is read through ``holder()`` on each request (the caller keeps it fresh while it
waits); the answer is built from that one value, nothing accumulates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["StandbyHolder", "create_standby_app"]

_HEALTH_JSON = "application/health+json"


@dataclass(frozen=True, slots=True, kw_only=True)
class StandbyHolder:
    """The process a standby waits for, as its lock's record names it."""

    pid: int
    host: str
    started_at: datetime


def _words(instance: str, holder: StandbyHolder | None) -> str:
    who = (
        f"pid {holder.pid} on {holder.host} since {holder.started_at.isoformat()}"
        if holder is not None
        else "another process"
    )
    return f"standby: instance {instance!r} is held by {who}"


def _holder_body(holder: StandbyHolder | None) -> dict[str, Any] | None:
    if holder is None:
        return None
    return {"pid": holder.pid, "host": holder.host, "since": holder.started_at.isoformat()}


def create_standby_app(instance: str, holder: Callable[[], StandbyHolder | None]) -> Starlette:
    """The ASGI app a standby serves until it takes over."""

    async def livez(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "standby": True})

    async def readyz(_request: Request) -> JSONResponse:
        current = holder()
        return JSONResponse(
            {
                "status": "fail",
                "standby": True,
                "instance": instance,
                "holder": _holder_body(current),
                "output": _words(instance, current),
            },
            status_code=503,
            media_type=_HEALTH_JSON,
        )

    async def elsewhere(_request: Request) -> JSONResponse:
        message = f"{_words(instance, holder())}; nothing is served until it takes over"
        return JSONResponse(
            {"ok": False, "error": {"code": "standby", "message": message}}, status_code=503
        )

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(
        routes=[
            Route("/livez", livez, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/{path:path}", elsewhere, methods=methods),
        ]
    )
