"""The API side: the leads' tokens read from the environment, and the tool registry with the
hooks the root hangs on it (a member's contact is its presence; every call that changed
something ends with a new fleet view version, and a call that changed nothing — a refusal, an
empty drain, a poll of an unknown ticket — moves no version, wakes no long-poll and breaks no
``ETag``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar

from fleetd.api.fleet_tools import register_fleet_tools
from fleetd.api.tools import ToolRegistry, ToolResult
from fleetd.bridge.answers import SessionRow
from fleetd.bridge.marks import SESSIONS_DIR
from fleetd.bridge.service import Bridge
from fleetd.bridge.spawn import SpawnRequest
from fleetd.clock import Clock
from fleetd.config import ConfigRef, FleetdConfig
from fleetd.identity import Caller, Role
from fleetd.runtime.fleet_versions import FleetViews

__all__ = ["lead_tokens", "tool_registry"]

_log = logging.getLogger("fleetd")

#: Tools that change nothing: every other call ends with a new fleet view version if it did.
_READ_TOOLS = frozenset({"fleet_list", "fleet_status"})

#: The fleet view's change key when the call under way began (each request runs in a context
#: of its own, so concurrent calls each keep theirs).
_CALL_BEGAN: ContextVar[tuple[object, ...] | None] = ContextVar("fleetd_call_began", default=None)


def tool_registry(
    *,
    config: ConfigRef,
    clock: Clock,
    bridge: Bridge,
    views: FleetViews,
    mint_token: Callable[[str, str], str],
) -> ToolRegistry:
    """The fleet tools, served by ``bridge`` and the fleet view, with the contact and settle
    hooks."""
    registry = ToolRegistry()
    manifest_root = config.current.worktrees.root

    async def spawn(request: SpawnRequest) -> SessionRow:
        # placement refuses a benched profile (its model is gone: the lead picks another one)
        session = await bridge.spawn(
            request,
            mint_token=mint_token,
            base_url=config.current.api.base_url,
            session_root=manifest_root / SESSIONS_DIR,
        )
        return bridge.view.session_row(session, now=clock.now())

    register_fleet_tools(registry, bridge=bridge, fleet_view=views.view, spawn=spawn)

    async def on_contact(caller: Caller) -> None:
        _CALL_BEGAN.set(views.change_key())  # before the presence below, which is the call's
        if caller.role is Role.MEMBER and caller.session_id is not None:
            bridge.presence(caller.session_id)

    def settle(tool: str | None, _result: ToolResult) -> None:
        if tool is not None and tool not in _READ_TOOLS:
            views.touched(since=_CALL_BEGAN.get())

    registry.on_contact.append(on_contact)
    registry.on_result.append(settle)
    return registry


def lead_tokens(settings: FleetdConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """Each configured lead's token, read from the variable it names; a lead without one is
    logged and left out (it cannot call until a reload finds its token)."""
    tokens = {}
    for lead in settings.leads:
        token = environ.get(lead.token_env)
        if token:
            tokens[lead.name] = token
        else:
            _log.warning("lead %s has no token: %s is not set", lead.name, lead.token_env)
    return tokens
