"""The bare side of ``benchmarks/fleet_list.py``: FastAPI serving saved bytes on ``GET /v1/fleet``.

Run as ``python benchmarks/support/bare_fleet.py PORT BODY_FILE``; uvicorn's settings are those
of ``fleetd serve`` (h11, ``log_level=warning``, lifespan on, 10 s graceful shutdown).
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import Response


def serve_bare(port: int, body_file: Path) -> None:
    """The bare side: FastAPI answering ``GET /v1/fleet`` with the saved bytes."""
    body = body_file.read_bytes()
    app = FastAPI()

    @app.get("/v1/fleet")
    async def fleet() -> Response:
        return Response(content=body, media_type="application/json")

    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    serve_bare(int(sys.argv[1]), Path(sys.argv[2]))
