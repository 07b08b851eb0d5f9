"""``fleetd serve`` as a real process refuses a config it could not run as written: exit 2 with
``config error: <key>: <reason>`` on stderr, no traceback, nothing served, no token shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LEAD, OTHER, OPERATOR = "lead-token-0001", "other-token-0001", "operator-token-0001"
TWO_LEADS = (
    "api:\n  host: 127.0.0.1\n  port: 0\n"
    "operatorTokenEnv: T_OP\n"
    "leads:\n  - name: lead\n    tokenEnv: T_LEAD\n  - name: other\n    tokenEnv: T_OTHER\n"
)
TOKENS = {"T_LEAD": LEAD, "T_OTHER": OTHER, "T_OP": OPERATOR}


@pytest.mark.parametrize(
    ("text", "tokens", "key"),
    [
        pytest.param(TWO_LEADS, {"T_OTHER": None}, "leads[1].tokenEnv", id="unset-lead-token"),
        pytest.param(TWO_LEADS, {"T_OTHER": ""}, "leads[1].tokenEnv", id="empty-lead-token"),
        pytest.param(TWO_LEADS, {"T_OP": None}, "operatorTokenEnv", id="unset-operator-token"),
        pytest.param(TWO_LEADS, {"T_LEAD": "lead token"}, "leads[0].tokenEnv", id="whitespace"),
        pytest.param(TWO_LEADS, {"T_LEAD": LEAD + "\n"}, "leads[0].tokenEnv", id="newline"),
        pytest.param(TWO_LEADS, {"T_OTHER": LEAD}, "leads[1].tokenEnv", id="two-leads-share"),
        pytest.param(TWO_LEADS, {"T_OP": OTHER}, "operatorTokenEnv", id="lead-and-operator-share"),
        pytest.param(
            TWO_LEADS.replace("T_OTHER", "T_LEAD"), {}, "leads[1].tokenEnv", id="same-variable"
        ),
        pytest.param(
            TWO_LEADS + f"health:\n  snapshotIntervalSeconds: {10**300}\n",
            {},
            "health.snapshotIntervalSeconds",
            id="huge-duration",
        ),
        pytest.param(
            TWO_LEADS + "health:\n  enabled: " + "[" * 5000 + "]" * 5000 + "\n",
            {},
            "<file>",
            id="nested-5000-deep",
        ),
    ],
)
def test_serve_exits_2_naming_the_key(
    tmp_path: Path, text: str, tokens: dict[str, str | None], key: str
) -> None:
    """The process ends at once with status 2 and names the key; no token value is printed."""
    config = tmp_path / "fleetd.yaml"
    config.write_text(text, encoding="utf-8")
    env = {**os.environ, **TOKENS}
    for name, value in tokens.items():
        if value is None:
            del env[name]
        else:
            env[name] = value
    done = subprocess.run(
        [sys.executable, "-m", "fleetd", "serve", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    expected_key = str(config) if key == "<file>" else key
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"config error: {expected_key}: "), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "listening on" not in done.stderr + done.stdout
    for token in (LEAD, OTHER, OPERATOR, "lead token"):
        assert token not in done.stderr + done.stdout


@pytest.mark.parametrize("text", ["", "# fleetd configuration, every key commented out\n"])
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_a_config_file_with_no_settings_exits_2(tmp_path: Path, text: str, command: str) -> None:
    """``check-config`` and ``serve`` refuse an empty or comments-only file: status 2, the file
    named with the reason, nothing served."""
    config = tmp_path / "empty.yaml"
    config.write_text(text, encoding="utf-8")
    args = [str(config)] if command == "check-config" else ["--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "fleetd", command, *args],
        env={**os.environ, **TOKENS},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"config error: {config}: the file holds no settings")
    assert "Traceback" not in done.stderr
    assert "listening on" not in done.stderr + done.stdout
    assert done.stdout == ""
