"""FLEETD_<SECTION>__<KEY> environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetd.config import InboxBackend, NotificationMode, env_name, load_config, parse_config
from fleetd.config.env import override_names
from fleetd.errors import ConfigError


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("health.enabled", "FLEETD_HEALTH__ENABLED"),
        ("health.snapshotIntervalSeconds", "FLEETD_HEALTH__SNAPSHOT_INTERVAL_SECONDS"),
        ("health.notifications.webhookUrlEnv", "FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENV"),
        ("health.notifications.webhookUrlEnvs", "FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENVS"),
        ("inbox.amqp.url", "FLEETD_INBOX__AMQP__URL"),
        ("api.port", "FLEETD_API__PORT"),
        ("operatorTokenEnv", "FLEETD_OPERATOR_TOKEN_ENV"),
    ],
)
def test_names_derive_from_keys(key: str, name: str) -> None:
    """Variable names are the dotted key in upper snake case, sections joined by __."""
    assert env_name(key) == name
    assert override_names()[name].dotted == key


def test_overrides_take_their_key_type() -> None:
    """Text values become the key's type: bool, int, enum, string, secret, path, null."""
    environ = {
        "FLEETD_HEALTH__ENABLED": "true",
        "FLEETD_HEALTH__SNAPSHOT_INTERVAL_SECONDS": "20",
        "FLEETD_INBOX__BACKEND": "amqp",
        "FLEETD_INBOX__AMQP__URL": "amqps://u:p@broker:5671/vh",
        "FLEETD_API__PORT": " 9000 ",
        "FLEETD_API__HOST": "0.0.0.0",
        "FLEETD_HERDR__SOCKET_PATH": "/run/herdr.sock",
        "FLEETD_OPERATOR_TOKEN_ENV": "OPS_TOKEN",
        "OPS_TOKEN": "ops-token",
        "FLEETD_HEALTH__NOTIFICATIONS__MODE": "webhook",
        "FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENV": "HOOK",
        "HOOK": "https://hooks.example/x",
        "FLEETD_HEALTH__NOTIFICATIONS__SECRET_ENV": "HOOK_SECRET",
        "HOOK_SECRET": "whsec_" + "A" * 32,
    }
    config = parse_config(None, environ).config
    assert config.health.enabled is True
    assert config.health.snapshot_interval_seconds == 20
    assert config.inbox.backend is InboxBackend.AMQP
    assert config.inbox.amqp.url.get_secret_value() == "amqps://u:p@broker:5671/vh"
    assert config.api.port == 9000
    assert config.api.host == "0.0.0.0"
    assert config.herdr.socket_path == Path("/run/herdr.sock")
    assert config.operator_token_env == "OPS_TOKEN"
    assert config.health.notifications.mode is NotificationMode.WEBHOOK


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("0", False),
        ("No", False),
        ("off", False),
    ],
)
def test_boolean_spellings(text: str, expected: bool) -> None:
    """Booleans accept the usual spellings, case-insensitively."""
    config = parse_config(None, {"FLEETD_HEALTH__INCLUDE_PANE_EXCERPT": text}).config
    assert config.health.include_pane_excerpt is expected


@pytest.mark.parametrize("text", ["", "null", "None"])
def test_null_for_optional_keys(text: str) -> None:
    """An optional key is cleared by an empty or null value."""
    document = {"api": {"publicUrl": "http://fleet:1"}}
    config = parse_config(document, {"FLEETD_API__PUBLIC_URL": text}).config
    assert config.api.public_url is None


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    """An override replaces the file's value for that key and leaves its siblings alone."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("health:\n  enabled: false\n  humanRepeatSeconds: 7200\n")
    config = load_config(path, {"FLEETD_HEALTH__ENABLED": "1"}).config
    assert config.health.enabled is True
    assert config.health.human_repeat_seconds == 7200


@pytest.mark.parametrize(
    ("name", "text", "key", "reason"),
    [
        ("FLEETD_API__PORT", "eighty", "api.port", "FLEETD_API__PORT must be an integer"),
        ("FLEETD_HEALTH__ENABLED", "maybe", "health.enabled", "must be true or false"),
        ("FLEETD_INBOX__BACKEND", "kafka", "inbox.backend", "'memory' or 'amqp'"),
        ("FLEETD_API__PORT", "99999", "api.port", "65535"),
    ],
)
def test_bad_values_name_the_key(name: str, text: str, key: str, reason: str) -> None:
    """A value that does not fit its key fails naming the key."""
    with pytest.raises(ConfigError) as caught:
        parse_config(None, {name: text})
    assert caught.value.key == key
    assert reason in caught.value.reason
    assert text not in caught.value.reason


@pytest.mark.parametrize(
    "name",
    [
        "FLEETD_HEALTH__SNAPSHOT_INTERVAL",
        "FLEETD_HEALTH__NOTIFICATIONS",
        "FLEETD_BOGUS__KEY",
        "FLEETD_LEADS__0__NAME",
        "FLEETD_PROFILES__SONNET__MAX_LOAD",
    ],
)
def test_unknown_override_fails_naming_it(name: str) -> None:
    """A FLEETD_ variable with __ that names no settable key is an error naming the variable."""
    with pytest.raises(ConfigError) as caught:
        parse_config(None, {name: "1"})
    assert caught.value.key == name


@pytest.mark.parametrize("name", ["FLEETD_URL", "FLEETD_TOKEN", "FLEETD_SESSION", "FLEETDX__Y"])
def test_member_variables_are_not_overrides(name: str) -> None:
    """Plain FLEETD_ variables (what members receive) and look-alikes are ignored."""
    assert parse_config(None, {name: "x"}).config == parse_config(None, {}).config


def test_override_into_a_non_mapping_section_fails() -> None:
    """An override cannot descend into a section the file wrote as a scalar."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"health": 3}, {"FLEETD_HEALTH__ENABLED": "true"})
    assert caught.value.key == "health"
