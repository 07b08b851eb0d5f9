"""The herdr side: the socket client, whose connect and request watchdogs are read from the
live config at each call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fleetd.clock import Clock
from fleetd.config import ConfigRef
from fleetd.herdr.control import AgentControl, HerdrAgentControl
from fleetd.herdr.discovery import resolve_socket_path

__all__ = ["herdr_control"]


def herdr_control(config: ConfigRef, environ: Mapping[str, str], clock: Clock) -> AgentControl:
    """The herdr socket client; its two watchdogs are read from the live config at each call."""
    path = resolve_socket_path(
        environ=environ,
        home=Path(environ.get("HOME") or Path.home()),
        explicit=config.current.herdr.socket_path,
    )

    def request_limit() -> float:
        return config.current.herdr.request_timeout.total_seconds()

    def connect_limit() -> float:
        return config.current.herdr.connect_timeout.total_seconds()

    return HerdrAgentControl.for_socket(
        path, clock=clock, request_timeout=request_limit, connect_timeout=connect_limit
    )
