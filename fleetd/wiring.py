"""Wiring the composition root hands off: the metrics fed from the running parts and the leads'
tokens read from the environment."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fleetd.api.tools import ToolRegistry, ToolResult
from fleetd.bridge.service import Bridge
from fleetd.config import FleetdConfig
from fleetd.metrics import Metrics
from fleetd.runtime.link import LinkState
from fleetd.runtime.monitor import FleetHealthMonitor

__all__ = ["feed_metrics", "lead_tokens"]

_log = logging.getLogger("fleetd")


def feed_metrics(
    metrics: Metrics,
    *,
    registry: ToolRegistry,
    bridge: Bridge,
    link: LinkState,
    health: FleetHealthMonitor,
) -> None:
    """Count tool calls as they end; read live sessions, the link's state and the health
    coverage at each scrape."""

    def count_call(tool: str | None, result: ToolResult) -> None:
        outcome = "ok" if result.error is None else result.error.code
        metrics.tool_calls_total.labels(tool=tool or "unknown", outcome=outcome).inc()

    def count_sessions() -> None:
        counts: dict[tuple[str, str], int] = {}
        for session in bridge.live_members():
            key = (session.profile, session.state.value)
            counts[key] = counts.get(key, 0) + 1
        metrics.sessions.clear()
        for (profile, state), count in sorted(counts.items()):
            metrics.sessions.labels(profile=profile, state=state).set(count)

    def link_up() -> float:
        return 1.0 if health.link_view(link)["state"] == "up" else 0.0

    def capability() -> None:
        mode = health.config.current.health.notifications.mode.value
        metrics.notification_capability.clear()
        metrics.notification_capability.labels(mode=mode, status=health.coverage()["status"]).set(1)

    registry.on_result.append(count_call)
    metrics.before_scrape.append(count_sessions)
    metrics.before_scrape.append(capability)
    metrics.control_link_up.set_function(link_up)


def lead_tokens(settings: FleetdConfig, environ: Mapping[str, str]) -> dict[str, str]:
    tokens = {}
    for lead in settings.leads:
        token = environ.get(lead.token_env)
        if token:
            tokens[lead.name] = token
        else:
            _log.warning("lead %s has no token: %s is not set", lead.name, lead.token_env)
    return tokens
