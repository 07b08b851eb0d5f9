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
  Both bodies are built from the models of :mod:`fleetd.api.probes`, which the routes name, so
  ``/openapi.json`` describes them.
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
from fleetd.api.probes import (
    ConfigComponent,
    HealthzAnswer,
    HealthzComponents,
    LoopComponent,
    ReadyzAnswer,
    control_link_component,
    healthz_answer,
)
from fleetd.api.service import FleetService
from fleetd.api.whoami import install_whoami
from fleetd.bridge.answers import wire
from fleetd.runtime import DependencyReadiness

__all__ = ["create_app"]

_HEALTH_JSON = "application/health+json"


class _HealthJSON(JSONResponse):
    """How ``/openapi.json`` names the health probes' media type (they build their answers)."""

    media_type = _HEALTH_JSON


class _Exposition(Response):
    """How ``/openapi.json`` names the metrics media type."""

    media_type = CONTENT_TYPE_LATEST


_UNHEALTHY: dict[int | str, dict[str, Any]] = {503: {"description": "not alive, or not ready"}}
_READYZ: dict[int | str, dict[str, Any]] = {
    200: {"model": ReadyzAnswer, "description": "ready"},
    503: {"model": ReadyzAnswer, "description": "not ready"},
}
_HEALTHZ: dict[int | str, dict[str, Any]] = {
    200: {"model": HealthzAnswer, "description": "alive, with each component's status"}
}


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

    @app.get("/readyz", response_class=_HealthJSON, responses=_READYZ)
    async def readyz() -> JSONResponse:
        inbox = service.bridge.inbox.reachable()
        ready = service.started and bool(service.registry.names()) and inbox
        parts: dict[str, DependencyReadiness] = {}
        if service.view.dependencies is not None:
            parts["dependencies"] = service.view.dependencies.readiness()
        answer = ReadyzAnswer.of(status="pass" if ready else "fail", inbox_reachable=inbox, **parts)
        return JSONResponse(
            wire(answer), status_code=200 if ready else 503, media_type=_HEALTH_JSON
        )

    @app.get("/healthz", response_class=_HealthJSON, responses=_HEALTHZ)
    async def healthz() -> JSONResponse:
        config = service.config.status
        components = HealthzComponents.of(
            control_link=control_link_component(service.health.link_view(service.link)),
            inbox=service.view.inbox_component(),
            config=ConfigComponent.of(
                status="warn" if config.last_error_key else "pass",
                pending_restart_keys=list(config.pending_restart_keys),
            ),
            loops=[
                LoopComponent.of(name=s.name, steps=s.steps, failures=s.failures)
                for s in service.scheduler.status()
            ],
            fleet_health=service.health.component(),
        )
        return JSONResponse(wire(healthz_answer(components)), media_type=_HEALTH_JSON)

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
