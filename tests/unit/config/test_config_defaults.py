"""Defaults, key classes and the shape of the config object."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

import fleetd.config
from fleetd.config import (
    FIRST_PROBE_FLOOR,
    FLOORS,
    MAX_PANE_READS_PER_TICK,
    PANE_COOLDOWN_FLOOR,
    RESTART_KEYS,
    TWO_SNAPSHOTS,
    AgentKind,
    FleetdConfig,
    InboxBackend,
    LeadConfig,
    NotificationMode,
    load_config,
    parse_config,
)
from fleetd.config.keys import get_value, iter_keys

EXPECTED_DEFAULTS: dict[str, object] = {
    "instance": None,
    "api.host": "127.0.0.1",
    "api.port": 8765,
    "api.publicUrl": None,
    "api.maxPromptChars": 100_000,
    "api.maxConnections": 1_000,
    "api.standbyPort": None,
    "herdr.socketPath": None,
    "herdr.connectTimeoutMs": 2000,
    "herdr.requestTimeoutMs": 5000,
    "herdr.statusPollIntervalMs": 250,
    "operatorTokenEnv": None,
    "leads": (),
    "profiles": {},
    "worktrees.root": Path("var/worktrees"),
    "worktrees.defaultRepo": None,
    "worktrees.defaultBase": "HEAD",
    "bridge.readinessGraceSeconds": 120,
    "bridge.submitRetryMs": 1500,
    "bridge.maxScrapeChars": 4000,
    "bridge.maxQueuedSends": 100,
    "bridge.promptRetries": 8,
    "bridge.promptRetryBaseMs": 250,
    "bridge.ticketRetentionSeconds": 3600,
    "bridge.ticketsKept": 10000,
    "bridge.releaseOnStop": False,
    "bridge.push.maxNudgesPerItem": 3,
    "bridge.push.heartbeatIntervalSeconds": 600,
    "bridge.push.heartbeatMax": 3,
    "inbox.backend": InboxBackend.MEMORY,
    "inbox.amqp.urls": None,
    "inbox.amqp.connectTimeoutMs": 10_000,
    "inbox.amqp.operationTimeoutMs": 10_000,
    "journal.urlEnv": None,
    "journal.operationTimeoutMs": 5000,
    "journal.retentionDays": 30,
    "state.operationTimeoutMs": 2000,
    "state.standby": False,
    "health.enabled": False,
    "health.snapshotIntervalSeconds": 30,
    "health.workingSuspectAfterSeconds": 600,
    "health.paneProbeIntervalSeconds": 60,
    "health.leadUnresponsiveAfterSeconds": 300,
    "health.humanRepeatSeconds": 3600,
    "health.capacityLongIdleAfterSeconds": 900,
    "health.includePaneExcerpt": False,
    "health.notifications.mode": NotificationMode.DISABLED,
    "health.repair.codex": False,
    "health.notifications.webhookUrlEnvs": None,
    "health.notifications.webhookUrlEnv": None,
    "health.notifications.secretEnv": None,
    "health.notifications.routingKeyEnv": None,
    "health.notifications.requestTimeoutMs": 10_000,
    "health.notifications.alertmanagerRepostSeconds": 60,
    "providers": (),
    "modelHealth.probeIntervalSeconds": 300,
    "modelHealth.requestTimeoutMs": 10_000,
}
SECRET_KEYS = {"inbox.amqp.url", "journal.url", "state.url"}


def test_defaults_without_a_file() -> None:
    """With no file and no environment every key takes the spec's default and nothing warns."""
    loaded = load_config(None, {})
    specs = {spec.dotted: spec for spec in iter_keys()}
    assert set(specs) == set(EXPECTED_DEFAULTS) | SECRET_KEYS
    for key, expected in EXPECTED_DEFAULTS.items():
        assert get_value(loaded.config, specs[key].names) == expected, key
    assert loaded.config.inbox.amqp.url.get_secret_value() == "amqp://guest:guest@127.0.0.1:5672/"
    assert loaded.config.journal.url.get_secret_value() == "sqlite:///var/fleetd-journal.sqlite"
    assert loaded.warnings == ()
    assert loaded.source is None


def test_paths_default_beside_the_config_file(tmp_path: Path) -> None:
    """With a file, the worktree root and the SQLite journal sit in the file's directory."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("worktrees:\n  defaultRepo: repo\n")
    config = load_config(path, {}).config
    assert config.worktrees.root == tmp_path / "worktrees"
    assert config.worktrees.default_repo == tmp_path / "repo"
    assert config.journal.url.get_secret_value() == f"sqlite:///{tmp_path}/fleetd-journal.sqlite"
    assert config.state.url.get_secret_value() == f"sqlite:///{tmp_path}/fleetd-state.db"


def test_absolute_paths_are_kept(tmp_path: Path) -> None:
    """An absolute path in the file is used as written."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("worktrees:\n  root: /srv/trees\njournal:\n  url: postgresql://db/test\n")
    config = load_config(path, {}).config
    assert config.worktrees.root == Path("/srv/trees")
    assert config.journal.url.get_secret_value() == "postgresql://db/test"


def test_empty_sections_mean_defaults(tmp_path: Path) -> None:
    """A section whose keys are all commented out is that section's default config."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("health:\n  # enabled: true\nbridge:\n  push:\n")
    config = load_config(path, {}).config
    assert config.health == FleetdConfig().health
    assert config.bridge == FleetdConfig().bridge


@pytest.mark.parametrize(
    ("host", "port", "public_url", "expected"),
    [
        ("127.0.0.1", 8765, None, "http://127.0.0.1:8765"),
        ("::1", 9000, None, "http://[::1]:9000"),
        ("0.0.0.0", 8765, "https://fleet.example/", "https://fleet.example"),
    ],
)
def test_base_url(host: str, port: int, public_url: str | None, expected: str) -> None:
    """Members reach fleetd at publicUrl, else at http://host:port."""
    document = {"api": {"host": host, "port": port, "publicUrl": public_url}}
    assert parse_config(document, {}).config.api.base_url == expected


def test_durations_are_timedeltas() -> None:
    """Seconds and milliseconds keys are also offered as timedeltas named for their rule."""
    config = FleetdConfig()
    assert config.health.snapshot_interval == timedelta(seconds=30)
    assert config.health.working_suspect_after == timedelta(minutes=10)
    assert config.health.pane_probe_interval == timedelta(minutes=1)
    assert config.health.lead_unresponsive_after == timedelta(minutes=5)
    assert config.health.human_repeat == timedelta(hours=1)
    assert config.health.capacity_long_idle_after == timedelta(minutes=15)
    assert config.health.notifications.request_timeout == timedelta(seconds=10)
    assert config.herdr.request_timeout == timedelta(seconds=5)
    assert config.herdr.status_poll_interval == timedelta(milliseconds=250)
    assert config.bridge.readiness_grace == timedelta(minutes=2)
    assert config.bridge.submit_retry == timedelta(milliseconds=1500)
    assert config.bridge.push.heartbeat_interval == timedelta(minutes=10)


def test_lead_agent_defaults_to_its_name() -> None:
    """A lead without an agent name runs as the herdr agent of the same name."""
    document = {
        "leads": [
            {"name": "alpha", "tokenEnv": "ALPHA_TOKEN"},
            {"name": "beta", "agent": "beta-claude", "tokenEnv": "BETA_TOKEN"},
        ]
    }
    config = parse_config(document, {"ALPHA_TOKEN": "a-token", "BETA_TOKEN": "b-token"}).config
    assert [(lead.name, lead.agent) for lead in config.leads] == [
        ("alpha", "alpha"),
        ("beta", "beta-claude"),
    ]
    assert config.lead("beta") == LeadConfig(
        name="beta", agent="beta-claude", token_env="BETA_TOKEN"
    )
    assert config.lead("gamma") is None


def test_profiles_parse_kinds_and_caps() -> None:
    """Profiles map a name to a herdr kind, argv, model, provider and an optional load cap."""
    document = {
        "profiles": {
            "sonnet": {"kind": "claude", "args": ["--x"], "model": "sonnet", "maxLoad": 2},
            "pi": {"kind": "pi"},
        }
    }
    profiles = parse_config(document, {}).config.profiles
    assert profiles["sonnet"].kind is AgentKind.CLAUDE
    assert profiles["sonnet"].args == ("--x",)
    assert profiles["sonnet"].max_load == 2
    assert profiles["pi"].max_load is None
    assert profiles["pi"].model is None


def test_config_is_frozen() -> None:
    """The config object cannot be changed after it is built."""
    config = FleetdConfig()
    with pytest.raises(ValidationError):
        config.health.enabled = True  # type: ignore[misc]


def test_restart_keys_are_real_keys_and_health_is_hot() -> None:
    """Every restart-only key names a real leaf, and every health key is hot (M4 §11)."""
    keys = {spec.dotted for spec in iter_keys()}
    assert keys >= RESTART_KEYS
    assert not {k for k in RESTART_KEYS if k.startswith("health.")}
    assert "leads" not in RESTART_KEYS
    assert "profiles" not in RESTART_KEYS


def test_compiled_constants() -> None:
    """The limits config cannot loosen have the spec's values."""
    assert TWO_SNAPSHOTS == 2
    assert MAX_PANE_READS_PER_TICK == 2
    assert PANE_COOLDOWN_FLOOR.total_seconds() == 60
    assert FIRST_PROBE_FLOOR.total_seconds() == 300
    assert FLOORS["health.paneProbeIntervalSeconds"] == 60
    assert FLOORS["health.workingSuspectAfterSeconds"] == 300


def test_floors_module_imports_nothing_heavy() -> None:
    """Pure health code can import the floors without pulling in pydantic, YAML, logging or I/O."""
    probe = (
        "import sys; import fleetd.config.floors; "
        "heavy = {'pydantic', 'yaml', 'logging', 'socket', 'asyncio'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_public_names() -> None:
    """The package exports exactly its documented names, and each one resolves."""
    for name in fleetd.config.__all__:
        assert getattr(fleetd.config, name) is not None
    with pytest.raises(AttributeError):
        _ = fleetd.config.no_such_name
