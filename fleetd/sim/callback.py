"""Simulated members that call back into fleetd, as real agents do.

A real member (Claude Code with fleetd's MCP entry) connects to fleetd's MCP server when it starts
— that ``initialize`` is its presence — and calls ``fleet_reply`` at the end of its turn.
:class:`FleetdCallbackBehaviour` does the same from the simulator: it reads ``FLEETD_URL``,
``FLEETD_TOKEN`` and ``FLEETD_SESSION`` from the environment fleetd gave the pane, sends an MCP
``initialize`` once the agent is ready, and posts ``fleet_reply`` with the turn's answer — unless
the scenario makes the agent mute, in which case fleetd must fall back to reading the pane.
Agents started without those variables (the leads of a scenario) behave as plain scripted agents.
"""

from __future__ import annotations

import logging

import httpx

from fleetd.sim.agent import SimAgent
from fleetd.sim.behaviour import ScriptedBehaviour

__all__ = ["FleetdCallbackBehaviour"]

_log = logging.getLogger("fleetd.sim")

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fleetd-sim-member", "version": "1"},
    },
}


REPLY_ATTEMPTS = 60
REPLY_RETRY_SECONDS = 0.5


class FleetdCallbackBehaviour(ScriptedBehaviour):
    """Scripted turns, plus presence and ``fleet_reply`` over fleetd's own API."""

    def __init__(self, *, timeout: float = 10.0) -> None:
        self._timeout = timeout

    async def on_launch(self, agent: SimAgent) -> None:
        await super().on_launch(agent)
        endpoint = _endpoint(agent)
        if endpoint is None or not agent.alive or not agent.interactive_ready:
            return  # an agent whose launch failed never starts its MCP client
        url, token = endpoint
        await self._post(
            f"{url}/mcp",
            token,
            _INITIALIZE,
            headers={"Accept": "application/json, text/event-stream"},
        )

    async def deliver_reply(self, agent: SimAgent, text: str, answer: str) -> None:
        """Call ``fleet_reply``; while no answer comes back (fleetd is restarting), try again
        every half second for a while, as a member's MCP client would."""
        endpoint = _endpoint(agent)
        if endpoint is None:
            return
        url, token = endpoint
        for _ in range(REPLY_ATTEMPTS):
            if await self._post(f"{url}/v1/tools/fleet_reply", token, {"content": answer}):
                return
            await agent.sleep(REPLY_RETRY_SECONDS)

    async def _post(
        self, url: str, token: str, body: object, *, headers: dict[str, str] | None = None
    ) -> bool:
        """POST once; False when no answer came back (fleetd down, or it died with the call)."""
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(
                    url,
                    json=body,
                    headers={"Authorization": f"Bearer {token}", **(headers or {})},
                )
        except httpx.HTTPError as exc:
            # no answer: fleetd is down or died with the call. The call is made again; a reply
            # that did land meanwhile makes the next one a late reply (or a refusal), never a
            # second result for its ticket.
            _log.warning("simulated member could not reach fleetd: %s", type(exc).__name__)
            return False
        if response.status_code >= 400:
            _log.warning("simulated member call answered %d", response.status_code)
        return True


def _endpoint(agent: SimAgent) -> tuple[str, str] | None:
    env = agent.env
    url, token = env.get("FLEETD_URL"), env.get("FLEETD_TOKEN")
    if not url or not token:
        return None
    return url.rstrip("/"), token
