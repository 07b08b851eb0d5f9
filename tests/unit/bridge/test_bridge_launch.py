"""What a member process is given at spawn: env, MCP entry, model flag — never a token on disk."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from fleetd.bridge.launch import model_args, plan_launch, write_launch_files

TOKEN = "member-token-abc"


@pytest.mark.parametrize("kind", ["claude", "codex", "opencode", "pi"])
def test_env_names_fleetd_and_the_token_stays_off_disk(kind: str, tmp_path: Path) -> None:
    """Every kind gets FLEETD_URL/TOKEN/SESSION; a written MCP entry references the variable."""
    plan = plan_launch(
        kind=kind, base_url="http://h:1", token=TOKEN, session_id="s-1", session_dir=tmp_path / "s"
    )
    assert plan.env["FLEETD_URL"] == "http://h:1"
    assert plan.env["FLEETD_TOKEN"] == TOKEN
    assert plan.env["FLEETD_SESSION"] == "s-1"
    assert TOKEN not in " ".join(plan.args)
    write_launch_files(plan)
    if plan.config_file is not None:
        text = plan.config_file.read_text()
        assert TOKEN not in text
        assert "FLEETD_TOKEN" in text
        assert "http://h:1/mcp" in text
        assert stat.S_IMODE(plan.config_file.stat().st_mode) == 0o600


def test_claude_gets_an_http_mcp_server_entry(tmp_path: Path) -> None:
    """Claude Code is pointed at a config naming fleetd's streamable HTTP endpoint."""
    plan = plan_launch(
        kind="claude", base_url="http://h:1/", token=TOKEN, session_id="s", session_dir=tmp_path
    )
    assert plan.args == ("--mcp-config", str(tmp_path / "mcp.json"))
    assert plan.config_text is not None
    entry = json.loads(plan.config_text)["mcpServers"]["fleetd"]
    assert entry == {
        "type": "http",
        "url": "http://h:1/mcp",
        "headers": {"Authorization": "Bearer ${FLEETD_TOKEN}"},
    }


@pytest.mark.parametrize(
    ("kind", "model", "provider", "expected"),
    [
        ("claude", "sonnet", None, ("--model", "sonnet")),
        ("codex", "gpt-5", "openai", ("--model", "gpt-5")),
        ("opencode", "m", "p", ("--model", "p/m")),
        ("opencode", "m", None, ("--model", "m")),
        ("pi", "m", None, ()),
        ("claude", None, None, ()),
    ],
)
def test_model_flag(
    kind: str, model: str | None, provider: str | None, expected: tuple[str, ...]
) -> None:
    """A profile's model becomes the agent's own flag where that flag is known."""
    assert model_args(kind, model, provider) == expected
