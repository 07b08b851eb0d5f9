"""render_effective and the `fleetd check-config PATH` command."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from fleetd.config import check_config_main, parse_config, render_effective

EXAMPLE = Path(__file__).resolve().parents[3] / "fleetd.example.yaml"


def _run(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = check_config_main(argv, environ=environ or {}, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_valid_file_prints_the_effective_config(tmp_path: Path) -> None:
    """A valid file exits 0 and prints YAML that loads back to the same config."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("health:\n  enabled: true\n  notifications:\n    requestTimeoutMs: 2000\n")
    code, out, _ = _run([str(path)])
    assert code == 0
    printed = yaml.safe_load(out)
    assert printed["health"]["enabled"] is True
    assert printed["health"]["notifications"]["requestTimeoutMs"] == 2000
    assert printed["worktrees"]["root"] == str(tmp_path / "worktrees")


def test_warnings_go_to_stderr(tmp_path: Path) -> None:
    """Floor warnings are printed, one line each, and do not change the exit code."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("health:\n  snapshotIntervalSeconds: 5\n")
    code, out, err = _run([str(path)])
    assert code == 0
    assert yaml.safe_load(out)["health"]["snapshotIntervalSeconds"] == 15
    assert err == "warning: health.snapshotIntervalSeconds=5 is below its floor 15; using 15\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("health:\n  bogus: 1\n", "config error: health.bogus: unknown key\n"),
        ("api:\n  port: x\n", "config error: api.port: Input should be a valid integer\n"),
        (
            "leads:\n  - name: alpha\n    tokenEnv: ALPHA_TOKEN\n",
            "config error: leads[0].tokenEnv: environment variable ALPHA_TOKEN is not set\n",
        ),
    ],
)
def test_invalid_file_exits_2(tmp_path: Path, text: str, expected: str) -> None:
    """An invalid file prints `config error: <key>: <reason>` to stderr and exits 2."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(text)
    code, out, err = _run([str(path)])
    assert (code, out, err) == (2, "", expected)


def test_malformed_yaml_exits_2_with_the_line(tmp_path: Path) -> None:
    """Malformed YAML reports the file and the line."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("api:\n  port: [\n")
    code, _, err = _run([str(path)])
    assert code == 2
    assert err.startswith(f"config error: {path}: line 3: ")


def test_missing_argument_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a path the command prints its usage and exits 2."""
    assert _run([])[0] == 2
    assert "usage: fleetd check-config" in capsys.readouterr().err


def test_secrets_are_masked(tmp_path: Path) -> None:
    """URL passwords print as ***; token variables print by name, their values never."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(
        "inbox:\n  amqp:\n    url: amqp://fleet:hunter2@broker:5672/vh\n"
        "journal:\n  url: postgresql://app:hunter3@db:5432/test\n"
        "leads:\n  - name: alpha\n    tokenEnv: ALPHA_TOKEN\n"
        "health:\n  notifications:\n    mode: webhook\n    webhookUrlEnv: HOOK\n"
        "    secretEnv: HOOK_SECRET\n"
    )
    environ = {
        "ALPHA_TOKEN": "tok-hunter4",
        "HOOK": "https://hooks.example/hunter5",
        "HOOK_SECRET": "whsec_aHVudGVyNmh1bnRlcjZodW50ZXI2aHVudGVyNg==",
    }
    code, out, err = _run([str(path)], environ)
    assert code == 0
    assert "hunter" not in out + err
    printed = yaml.safe_load(out)
    assert printed["inbox"]["amqp"]["url"] == "amqp://fleet:***@broker:5672/vh"
    assert printed["journal"]["url"] == "postgresql://app:***@db:5432/test"
    assert printed["leads"][0]["tokenEnv"] == "ALPHA_TOKEN"
    assert printed["health"]["notifications"]["webhookUrlEnv"] == "HOOK"
    assert printed["health"]["notifications"]["secretEnv"] == "HOOK_SECRET"
    assert "aHVudGVy" not in out + err


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
        ("amqp://127.0.0.1/", "amqp://127.0.0.1/"),
        ("amqps://:pw@host/", "amqps://:***@host/"),
    ],
)
def test_render_masks_amqp_passwords(url: str, shown: str) -> None:
    """The rendered broker URL keeps user, host and path and hides only the password."""
    config = parse_config({"inbox": {"amqp": {"url": url}}}, {}).config
    assert yaml.safe_load(render_effective(config))["inbox"]["amqp"]["url"] == shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://u@127.0.0.1:1/db?password=s3cretpw",
            "postgresql://u@127.0.0.1:1/db?password=***",
        ),
        (
            "postgresql://db/test?user=u&PassWord=s3cretpw&sslmode=require",
            "postgresql://db/test?user=u&PassWord=***&sslmode=require",
        ),
        ("postgresql://u@db/test?sslmode=require", "postgresql://u@db/test?sslmode=require"),
    ],
)
def test_render_masks_a_password_in_the_query_too(url: str, shown: str) -> None:
    """libpq takes a password as a query parameter as well: it is hidden like the one before
    ``@``; other parameters stay as written."""
    config = parse_config({"journal": {"url": url}}, {}).config
    assert yaml.safe_load(render_effective(config))["journal"]["url"] == shown
    assert "s3cretpw" not in render_effective(config)


def test_example_checks_clean() -> None:
    """The shipped example passes check-config with no warnings."""
    environ = {"FLEETD_LEAD_TOKEN": "lead-token-1", "FLEETD_OPERATOR_TOKEN": "op-token-1"}
    code, out, err = _run([str(EXAMPLE)], environ)
    assert (code, err) == (0, "")
    assert "guest:***@" in out
