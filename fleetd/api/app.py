"""The HTTP service shell: probes, metrics, the tool routes and MCP.

* ``/livez`` — the event loop answers and every scheduler loop still runs. No dependency checks.
* ``/readyz`` — ``application/health+json``; only what serving needs (the service has started,
  its tools are registered, and the reply inbox is reachable: without it no reply can be stored
  and no poll answered). With several brokers that means one of them: while every broker is
  down it is not ready (RFC 0018 §6), and ``dependencies.inbox`` says which broker is in use
  (by index) and whether all are down. herdr being down does not make fleetd unready: it must
  still answer ``fleet_list`` and say so; nor does a model provider, whose probe fails open.
* ``/healthz`` — HTTP 200 while alive, with nested component status (``controlLink``, ``inbox``
  — records held in memory for an unreachable inbox and decode failures, counts only —
  ``config``, and ``fleetHealth`` once the health monitor runs). ``controlLink.state`` is the
  health monitor's classification (§4.3), ``controlLink.lastCall`` the last herdr call's outcome,
  ``controlLink.status`` its health+json word (``up`` pass, ``down`` fail, ``unknown`` warn).
  The top-level ``status`` is ``warn`` while any component says ``warn`` or ``fail`` (a down
  control link, an unreachable inbox, a rejected config), else ``pass``; never ``fail``: the
  health+json draft ties ``fail`` to a 4xx/5xx answer, and M4 §10.2/§13 keep this endpoint's
  HTTP liveness result unchanged (a supervisor that restarts fleetd on it would not bring herdr
  back, and would drop what fleetd holds in memory). ``/readyz`` is the endpoint that fails.
* ``/metrics`` — the service's own registry, never the process-global one.
* ``POST /v1/tools/<name>``, ``GET /v1/fleet`` and ``/mcp`` — the fleet tools.
* ``GET /v1/incidents`` and ``POST /v1/incidents/{id}/replay`` — the incident journal
  (:mod:`fleetd.api.incident_routes`).
* ``GET /v1/whoami`` — who a token stands for (:mod:`fleetd.api.whoami`); the page and the
  terminal ask it.
* ``/``, ``/page.css`` and ``/page.js`` — the live fleet page (:mod:`fleetd.api.page`), not in
  ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from fleetd.api.http_tools import install_tool_routes
from fleetd.api.incident_routes import install_incident_routes
from fleetd.api.mcp_server import install_mcp
from fleetd.api.page import install_page
from fleetd.api.service import FleetService
from fleetd.api.whoami import install_whoami
from fleetd.bridge.answers import wire

__all__ = ["create_app"]

_HEALTH_JSON = "application/health+json"


class _HealthJSON(JSONResponse):
    """How ``/openapi.json`` names the health probes' media type (they build their answers)."""

    media_type = _HEALTH_JSON


class _Exposition(Response):
    """How ``/openapi.json`` names the metrics media type."""

    media_type = CONTENT_TYPE_LATEST


_UNHEALTHY: dict[int | str, dict[str, Any]] = {503: {"description": "not alive, or not ready"}}
_LINK_STATUS = {"up": "pass", "down": "fail", "unknown": "warn"}


def _overall(components: dict[str, Any]) -> str:
    """``/healthz``'s top-level status: ``warn`` while a component warns or fails (alive, but not
    all is well), else ``pass``; ``fleetHealth`` speaks coverage words (§10.2), not statuses."""
    statuses = {
        component.get("status")
        for name, component in components.items()
        if name != "fleetHealth" and isinstance(component, dict)
    }
    return "warn" if statuses & {"warn", "fail"} else "pass"


def create_app(service: FleetService) -> FastAPI:
    """The ASGI app of one service; its lifespan starts and stops the service.

    ``service`` is the composition root's ``Fleetd`` in production, or any :class:`FleetService`.
    """
    mcp_running = None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        assert mcp_running is not None
        await service.start()
        try:
            async with mcp_running:
                yield
        finally:
            await service.stop()

    app = FastAPI(title="fleetd", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.get("/livez", responses=_UNHEALTHY)
    async def livez() -> JSONResponse:
        alive = service.scheduler.alive()
        return JSONResponse(
            {"status": "ok" if alive else "fail"}, status_code=200 if alive else 503
        )

    @app.get("/readyz", response_class=_HealthJSON, responses=_UNHEALTHY)
    async def readyz() -> JSONResponse:
        inbox = service.bridge.inbox.reachable()
        ready = service.started and bool(service.registry.names()) and inbox
        body: dict[str, Any] = {"status": "pass" if ready else "fail", "inboxReachable": inbox}
        if service.view.dependencies is not None:
            body["dependencies"] = wire(service.view.dependencies.readiness())
        return JSONResponse(
            body,
            status_code=200 if ready else 503,
            media_type=_HEALTH_JSON,
        )

    @app.get("/healthz", response_class=_HealthJSON)
    async def healthz() -> JSONResponse:
        link = service.health.link_view(service.link)
        components: dict[str, Any] = {
            "controlLink": {"status": _LINK_STATUS[link.state], **wire(link)},
            "inbox": service.view.inbox_component(),
            "config": {
                "status": "warn" if service.config.status.last_error_key else "pass",
                "pendingRestartKeys": list(service.config.status.pending_restart_keys),
            },
            "loops": [
                {"name": s.name, "steps": s.steps, "failures": s.failures}
                for s in service.scheduler.status()
            ],
            "fleetHealth": service.health.component(),
        }
        return JSONResponse(
            {"status": _overall(components), "components": components}, media_type=_HEALTH_JSON
        )

    @app.get("/metrics", response_class=_Exposition)
    async def metrics() -> Response:
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    install_tool_routes(
        app,
        service.registry,
        service.authenticator,
        fleet=service.views,
        run=service.run,
        across=service.across,
    )
    install_incident_routes(app, service, service.authenticator)
    mcp_running = install_mcp(app, service.registry, service.authenticator)
    install_whoami(app, service.authenticator)
    install_page(app)
    return app
