"""How a member process learns where fleetd is.

At spawn fleetd hands the member process ``FLEETD_URL``, ``FLEETD_TOKEN`` and ``FLEETD_SESSION`` in
its environment, plus an MCP server entry for its agent kind so that a real agent can call
``fleet_reply``. The entry never holds the token itself: it names the ``FLEETD_TOKEN`` variable,
which the agent expands from its own environment.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LaunchPlan", "model_args", "plan_launch", "write_launch_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    """Extra argv and env for one member, and the config file (if any) to write first."""

    args: tuple[str, ...]
    env: dict[str, str]
    config_file: Path | None
    config_text: str | None


def plan_launch(
    *, kind: str, base_url: str, token: str, session_id: str, session_dir: Path
) -> LaunchPlan:
    """The launch additions for an agent of ``kind``."""
    mcp_url = base_url.rstrip("/") + "/mcp"
    env = {"FLEETD_URL": base_url, "FLEETD_TOKEN": token, "FLEETD_SESSION": session_id}
    if kind == "claude":
        path = session_dir / "mcp.json"
        text = json.dumps(
            {
                "mcpServers": {
                    "fleetd": {
                        "type": "http",
                        "url": mcp_url,
                        "headers": {"Authorization": "Bearer ${FLEETD_TOKEN}"},
                    }
                }
            },
            indent=2,
        )
        return LaunchPlan(
            args=("--mcp-config", str(path)), env=env, config_file=path, config_text=text
        )
    if kind == "codex":
        return LaunchPlan(
            args=(
                "-c",
                f'mcp_servers.fleetd.url="{mcp_url}"',
                "-c",
                'mcp_servers.fleetd.bearer_token_env_var="FLEETD_TOKEN"',
            ),
            env=env,
            config_file=None,
            config_text=None,
        )
    if kind == "opencode":
        path = session_dir / "opencode.json"
        text = json.dumps(
            {
                "mcp": {
                    "fleetd": {
                        "type": "remote",
                        "url": mcp_url,
                        "headers": {"Authorization": "Bearer {env:FLEETD_TOKEN}"},
                    }
                }
            },
            indent=2,
        )
        return LaunchPlan(
            args=(), env={**env, "OPENCODE_CONFIG": str(path)}, config_file=path, config_text=text
        )
    return LaunchPlan(args=(), env=env, config_file=None, config_text=None)


def write_launch_files(plan: LaunchPlan) -> None:
    """Write the plan's config file, owner-only (it holds no secret, but it names our URL)."""
    if plan.config_file is None or plan.config_text is None:
        return
    plan.config_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(plan.config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(plan.config_text)


def model_args(kind: str, model: str | None, provider: str | None) -> tuple[str, ...]:
    """The argv that selects a profile's model, for the kinds whose flag is known."""
    if model is None:
        return ()
    if kind in ("claude", "codex"):
        return ("--model", model)
    if kind == "opencode":
        return ("--model", f"{provider}/{model}" if provider else model)
    return ()
