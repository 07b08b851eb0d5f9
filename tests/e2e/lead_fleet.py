"""What the lead-routing suites share: a member incident to route, and the user's surfaces.

Every check reads what a user reads — ``fleet_list`` as the operator, ``fleet_poll`` as a lead,
``/healthz``, ``/metrics`` and the herdr requests the simulator recorded — never fleetd's memory.
"""

from __future__ import annotations

import re
from typing import Any

from fleetd.bridge.sessions import SessionState
from fleetd.health.states import MemberState
from tests.e2e.e2e_fleet import OPERATOR_TOKEN, E2EFleet

HEALTH = {"health": {"enabled": True, "snapshotIntervalSeconds": 15}}
AT_PROMPT = frozenset({"idle", "done"})
LIFECYCLE = frozenset(
    {
        "agent.start",
        "workspace.create",
        "tab.create",
        "pane.split",
        "pane.close",
        "tab.close",
        "workspace.close",
    }
)
"""herdr requests that start, replace or close an agent or its pane."""


async def member_incident(e2e: E2EFleet, lead: Any, name: str = "m-usage-1") -> str:
    """``lead`` delegates to a member whose turn ends on a usage-limit screen (and no
    ``fleet_reply``): ERROR_ON_SCREEN opens, owned by that lead. Returns the session id."""
    sid: str = (await e2e.tool(lead, "fleet_spawn", profile="sonnet", name=name))["sessionId"]
    bridge = e2e.service.bridge
    await e2e.until(lambda: bridge.reads.session(sid).state is SessionState.READY)  # type: ignore[union-attr]
    await e2e.tool(lead, "fleet_send", target=sid, prompt="ship the release")
    health = e2e.service.health
    await e2e.until(
        lambda: any(
            i.subject == sid and i.state is MemberState.ERROR_ON_SCREEN
            for i in health.state.incidents.values()
        )
    )
    return sid


async def ticks(e2e: E2EFleet, count: int) -> None:
    """Let ``count`` more health ticks run."""
    health = e2e.service.health
    target = health.ticks + count
    await e2e.until(lambda: health.ticks >= target, max_seconds=15.0 * count + 15)


async def fleet(e2e: E2EFleet) -> dict[str, Any]:
    """``fleet_list`` as the operator sees it."""
    async with e2e.http(OPERATOR_TOKEN) as operator:
        return await e2e.tool(operator, "fleet_list")


def incidents(listed: dict[str, Any], *, subject: str) -> dict[str, dict[str, Any]]:
    """The open incidents about ``subject``, by state."""
    return {i["state"]: i for i in listed["incidents"] if i["subject"] == subject}


def routing(row: dict[str, Any]) -> tuple[str | None, str, str, int, str | None]:
    """An incident row's recipient and routing: (recipient, route, reason, generation, on
    behalf of)."""
    r = row["routing"]
    return (row["recipient"], r["route"], r["reason"], r["generation"], r["onBehalfOf"])


def lead_row(listed: dict[str, Any], name: str) -> dict[str, Any]:
    row: dict[str, Any]
    [row] = [lead for lead in listed["leads"] if lead["name"] == name]
    return row


async def poll(e2e: E2EFleet, lead: Any, name: str) -> list[dict[str, Any]]:
    """What ``fleet_poll(target="<name>")`` hands lead ``name`` now."""
    polled = await e2e.tool(lead, "fleet_poll", target=name)
    assert polled["inbox"] == name
    messages: list[dict[str, Any]] = polled["messages"]
    return messages


async def healthz(e2e: E2EFleet) -> dict[str, Any]:
    async with e2e.http() as client:
        response = await e2e.run(client.get("/healthz"))
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def metrics(e2e: E2EFleet) -> str:
    async with e2e.http() as client:
        response = await e2e.run(client.get("/metrics"))
    return response.text


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of series ``name`` with exactly ``labels`` in a Prometheus exposition."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match and ",".join(sorted((match.group(1) or "").split(","))) == wanted:
            return float(match.group(2))
    return None


def lifecycle_since(e2e: E2EFleet, index: int) -> list[str]:
    """herdr requests after ``index`` that start, replace or close an agent or pane."""
    return [r["method"] for r in e2e.requests[index:] if r["method"] in LIFECYCLE]


def prompted_while_busy(e2e: E2EFleet, agent: str) -> list[str | None]:
    """The statuses ``agent`` had when fleetd typed into it other than at its prompt."""
    return [status for _, status in e2e.prompts_to(agent) if status not in AT_PROMPT]
