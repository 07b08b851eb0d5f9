"""Invalid configuration fails with one ConfigError naming the dotted key (or file and line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetd.config import NotificationMode, load_config, parse_config
from fleetd.errors import ConfigError

LEAD = {"name": "alpha", "tokenEnv": "ALPHA_TOKEN"}


@pytest.mark.parametrize(
    ("document", "key", "reason"),
    [
        ({"bogus": 1}, "bogus", "unknown key"),
        ({"health": {"snapshotInterval": 30}}, "health.snapshotInterval", "unknown key"),
        (
            {"health": {"snapshot_interval_seconds": 30}},
            "health.snapshot_interval_seconds",
            "unknown key",
        ),
        (
            {"health": {"snapshotIntervalSeconds": "30"}},
            "health.snapshotIntervalSeconds",
            "integer",
        ),
        (
            {"health": {"snapshotIntervalSeconds": 30.5}},
            "health.snapshotIntervalSeconds",
            "integer",
        ),
        ({"health": {"enabled": "yes"}}, "health.enabled", "boolean"),
        ({"health": {"enabled": 1}}, "health.enabled", "boolean"),
        ({"health": 5}, "health", "dictionary"),
        ({"health": {"notifications": {"mode": "email"}}}, "health.notifications.mode", "webhook"),
        (
            {"health": {"notifications": {"requestTimeoutMs": 999}}},
            "health.notifications.requestTimeoutMs",
            "1000",
        ),
        (
            {"health": {"notifications": {"requestTimeoutMs": 30001}}},
            "health.notifications.requestTimeoutMs",
            "30000",
        ),
        ({"herdr": {"requestTimeoutMs": 99}}, "herdr.requestTimeoutMs", "100"),
        ({"herdr": {"requestTimeoutMs": 60001}}, "herdr.requestTimeoutMs", "60000"),
        ({"api": {"port": 70000}}, "api.port", "65535"),
        ({"api": {"publicUrl": "ftp://x"}}, "api.publicUrl", "scheme"),
        (
            {"profiles": {"sonnet": {"kind": "claude", "maxLoad": 0}}},
            "profiles.sonnet.maxLoad",
            "1",
        ),
        ({"profiles": {"sonnet": {"kind": "vim"}}}, "profiles.sonnet.kind", "claude"),
        ({"profiles": {"sonnet": {}}}, "profiles.sonnet.kind", "required"),
        (
            {"profiles": {"sonnet": {"kind": "claude", "args": "--x"}}},
            "profiles.sonnet.args",
            "tuple",
        ),
        ({"profiles": {"no spaces": {"kind": "claude"}}}, "profiles.no spaces", "pattern"),
        ({"leads": [LEAD, {"name": "beta"}]}, "leads[1].tokenEnv", "required"),
        ({"leads": [{**LEAD, "tokenEnv": "NOT-A-NAME"}]}, "leads[0].tokenEnv", "pattern"),
        ({"leads": [{**LEAD, "name": "Alpha"}]}, "leads[0].name", "pattern"),
        ({"leads": [{**LEAD, "extra": 1}]}, "leads[0].extra", "unknown key"),
        ({"leads": [LEAD, {**LEAD, "tokenEnv": "B"}]}, "leads[1].name", "duplicate"),
        (
            {"leads": [LEAD, {"name": "beta", "agent": "alpha", "tokenEnv": "B"}]},
            "leads[1].agent",
            "another lead",
        ),
        ({"inbox": {"backend": "kafka"}}, "inbox.backend", "memory"),
        ({"inbox": {"amqp": {"url": "http://u:p@h/"}}}, "inbox.amqp.url", "scheme"),
        ({"journal": {"url": "mysql://db"}}, "journal.url", "scheme"),
        ({"inbox": {"amqp": {"url": "amqp://u:p@h:70000/"}}}, "inbox.amqp.url", "port"),
        ({"inbox": {"amqp": {"urls": ["amqp://h:x/"]}}}, "inbox.amqp.urls[0]", "port"),
        ({"journal": {"url": "postgresql://h:99999/db"}}, "journal.url", "port"),
        ({"api": {"publicUrl": "http://h:65536/"}}, "api.publicUrl", "port"),
        ({"bridge": {"push": {"heartbeatMax": -1}}}, "bridge.push.heartbeatMax", "0"),
        ({"operatorTokenEnv": "has space"}, "operatorTokenEnv", "pattern"),
        # values the start or every spawn refused later, blaming someone else (found by a probe)
        ({"worktrees": {"defaultBase": "--orphan"}}, "worktrees.defaultBase", "option"),
        ({"api": {"host": "not a host!"}}, "api.host", "host"),
        ({"herdr": {"socketPath": ""}}, "herdr.socketPath", "empty"),
        ({"worktrees": {"root": ""}}, "worktrees.root", "empty"),
        ({"api": {"port": 9000, "standbyPort": 9000}}, "api.standbyPort", "api.port"),
    ],
)
def test_invalid_documents_name_the_key(document: dict[str, Any], key: str, reason: str) -> None:
    """Unknown keys, wrong types and out-of-range values fail with the dotted key."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, {})
    assert caught.value.key == key
    assert reason in caught.value.reason


def test_several_problems_report_the_first_and_a_count() -> None:
    """Only one error is raised; its reason says how many more there were."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"api": {"port": "x"}, "health": {"enabled": "x"}}, {})
    assert caught.value.key == "api.port"
    assert caught.value.reason.endswith("(and 1 more problem)")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("health:\n  enabled: true\n    bad: indent\n", 3, "mapping values are not allowed"),
        ("api: [\n", 2, "expected the node content"),
        ("health:\n  enabled: true\n  enabled: false\n", 3, "duplicate key 'enabled'"),
    ],
)
def test_malformed_yaml_names_file_and_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    """YAML that does not parse names the file, with the line in the reason."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert caught.value.key == str(path)
    assert caught.value.reason.startswith(f"line {line}: ")
    assert problem in caught.value.reason


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    """A document that is not a mapping of sections is refused, naming the file."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert caught.value.key == str(path)


@pytest.mark.parametrize(
    "text", ["", "\n  \n", "# fleetd configuration\n# leads: []\n", "---\n", "{}\n", "--- {}\n"]
)
def test_a_file_with_no_settings_is_refused_at_start(tmp_path: Path, text: str) -> None:
    """An empty, blank or comments-only file is refused naming the file, as a reload refuses it."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert caught.value.key == str(path)
    assert caught.value.reason.startswith("the file holds no settings")


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    """A file that cannot be read is a ConfigError naming the path."""
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert caught.value.key == str(path)
    assert "cannot read" in caught.value.reason


HOOK_SECRET = "whsec_" + "QUFB" * 8  # 24 bytes
WEBHOOK = {"mode": "webhook", "webhookUrlEnv": "HOOK_URL", "secretEnv": "HOOK_SECRET"}
WEBHOOK_ENV = {"HOOK_URL": "https://hooks.example/very-secret-path", "HOOK_SECRET": HOOK_SECRET}


def _webhook(**changes: Any) -> dict[str, Any]:
    notifications = {k: v for k, v in (WEBHOOK | changes).items() if v is not None}
    return {"health": {"notifications": notifications}}


@pytest.mark.parametrize(
    ("document", "environ", "key", "reason"),
    [
        (_webhook(webhookUrlEnv=None), WEBHOOK_ENV, "webhookUrlEnv", "required"),
        (_webhook(secretEnv=None), WEBHOOK_ENV, "secretEnv", "required"),
        (_webhook(), {"HOOK_SECRET": HOOK_SECRET}, "webhookUrlEnv", "HOOK_URL is not set"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_URL": ""}, "webhookUrlEnv", "HOOK_URL is not set"),
        (_webhook(), {"HOOK_URL": "https://h.example/"}, "secretEnv", "HOOK_SECRET is not set"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_URL": "ftp://h.example/x"}, "webhookUrlEnv", "http(s)"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_URL": "h.example/x"}, "webhookUrlEnv", "http(s)"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_URL": "https://"}, "webhookUrlEnv", "http(s)"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_URL": "http://[::1/x"}, "webhookUrlEnv", "http(s)"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_SECRET": "hunter2-plain"}, "secretEnv", "whsec_"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_SECRET": "whsec_aHVudGVy"}, "secretEnv", "24 bytes"),
        (_webhook(), WEBHOOK_ENV | {"HOOK_SECRET": "whsec_hunter2!!"}, "secretEnv", "HOOK_SECRET"),
    ],
)
def test_bad_webhook_config_names_the_key_not_the_value(
    document: dict[str, Any], environ: dict[str, str], key: str, reason: str
) -> None:
    """Webhook mode needs both variables named and set, an http(s) URL and a whsec_ secret; the
    error names the key (and variable), never the value."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, environ)
    assert caught.value.key == f"health.notifications.{key}"
    assert reason in caught.value.reason
    for value in environ.values():
        if value:
            assert value not in str(caught.value)


def test_webhook_mode_with_both_variables_set() -> None:
    """Webhook mode is valid once the named variables hold a URL and a secret; neither is stored."""
    config = parse_config(_webhook(), WEBHOOK_ENV).config
    notifications = config.health.notifications
    assert notifications.mode is NotificationMode.WEBHOOK
    assert (notifications.webhook_url_env, notifications.secret_env) == ("HOOK_URL", "HOOK_SECRET")
    for value in WEBHOOK_ENV.values():
        assert value not in config.model_dump_json()
        assert value not in repr(config)


LISTED_ENV = WEBHOOK_ENV | {"HOOK_URL_2": "http://127.0.0.1:8099/also-secret"}


def _listed(*names: str, **changes: Any) -> dict[str, Any]:
    return _webhook(webhookUrlEnv=None, webhookUrlEnvs=list(names), **changes)


def test_webhook_url_envs_lists_the_receivers_primary_first() -> None:
    """webhookUrlEnvs names the receivers in failover order; webhookUrlEnv is a list of one."""
    config = parse_config(_listed("HOOK_URL_2", "HOOK_URL"), LISTED_ENV).config
    assert config.health.notifications.receiver_envs == ("HOOK_URL_2", "HOOK_URL")
    one = parse_config(_webhook(), WEBHOOK_ENV).config
    assert one.health.notifications.receiver_envs == ("HOOK_URL",)
    assert parse_config(None, {}).config.health.notifications.receiver_envs == ()


def test_webhook_url_envs_come_comma_separated_from_the_environment() -> None:
    """FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENVS lists the variables separated by commas."""
    environ = LISTED_ENV | {
        "FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENVS": "HOOK_URL, HOOK_URL_2"
    }
    config = parse_config(_webhook(webhookUrlEnv=None), environ).config
    assert config.health.notifications.receiver_envs == ("HOOK_URL", "HOOK_URL_2")


@pytest.mark.parametrize(
    ("document", "environ", "key", "reason"),
    [
        (
            _webhook(webhookUrlEnvs=["HOOK_URL_2"]),
            LISTED_ENV,
            "health.notifications",
            "health.notifications.webhookUrlEnv and health.notifications.webhookUrlEnvs",
        ),
        (
            _listed("HOOK_URL_2"),
            LISTED_ENV | {"FLEETD_HEALTH__NOTIFICATIONS__WEBHOOK_URL_ENV": "HOOK_URL"},
            "health.notifications",
            "both set",
        ),
        (_listed("HOOK_URL", "HOOK_URL_3"), LISTED_ENV, "webhookUrlEnvs", "HOOK_URL_3 is not set"),
        (
            _listed("HOOK_URL", "HOOK_URL_2"),
            LISTED_ENV | {"HOOK_URL_2": "ftp://h.example/secret"},
            "webhookUrlEnvs",
            "HOOK_URL_2 does not hold an http(s) URL",
        ),
        (
            _listed("HOOK_URL", "HOOK_URL_2"),
            LISTED_ENV | {"HOOK_URL_2": WEBHOOK_ENV["HOOK_URL"]},
            "webhookUrlEnvs",
            "HOOK_URL and HOOK_URL_2 hold the same URL",
        ),
        (_listed("HOOK_URL", "HOOK_URL"), LISTED_ENV, "webhookUrlEnvs", "listed once"),
        (_listed(), LISTED_ENV, "webhookUrlEnvs", "at least 1"),
        (_listed(*[f"HOOK_{n}" for n in range(9)]), LISTED_ENV, "webhookUrlEnvs", "at most 8"),
    ],
)
def test_bad_receiver_lists_name_the_keys_and_variables_never_the_values(
    document: dict[str, Any], environ: dict[str, str], key: str, reason: str
) -> None:
    """Both keys set, an unset or non-URL variable, one URL twice, a variable twice, an empty or
    overlong list: refused naming the key(s) and variable(s), never a value."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, environ)
    full = key if key.startswith("health.") else f"health.notifications.{key}"
    assert caught.value.key == full
    assert reason in caught.value.reason
    for value in environ.values():
        if "://" in value:
            assert value not in str(caught.value)


def test_a_disabled_sink_may_name_unset_receivers() -> None:
    """While notifications are disabled the listed variables need not be set."""
    document = _listed("NOT_SET_1", "NOT_SET_2", mode="disabled")
    notifications = parse_config(document, {}).config.health.notifications
    assert notifications.receiver_envs == ("NOT_SET_1", "NOT_SET_2")


def test_disabled_mode_does_not_need_the_variables() -> None:
    """Naming the webhook variables is fine while notifications are disabled, set or not."""
    document = _webhook(mode="disabled")
    notifications = parse_config(document, {"HOOK_SECRET": "bad"}).config.health.notifications
    assert notifications.mode is NotificationMode.DISABLED
    assert notifications.webhook_url_env == "HOOK_URL"


def test_health_without_a_sink_warns_about_coverage() -> None:
    """Enabled health with notifications disabled warns once that human escalation is off."""
    loaded = parse_config({"health": {"enabled": True}}, {})
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith("health.notifications.mode=disabled")


TWO_LEADS = {
    "leads": [
        {"name": "lead", "agent": "lead", "tokenEnv": "T_A"},
        {"name": "lead-b", "agent": "lead-b", "tokenEnv": "T_B"},
    ]
}


@pytest.mark.parametrize(
    ("document", "environ", "warning"),
    [
        (
            {"health": {"enabled": True}, **TWO_LEADS},
            {},
            "health.notifications.mode=disabled: human escalation is unavailable; "
            "fleet health coverage is partial",
        ),
        (
            {"health": {"enabled": True}, "leads": TWO_LEADS["leads"][:1]},
            {},
            "health.notifications.mode=disabled: human escalation is unavailable; fleet health "
            "coverage is partial; with a single lead, a lead failure has no active notification "
            "or recovery",
        ),
        ({"health": {"enabled": True, "notifications": WEBHOOK}, **TWO_LEADS}, WEBHOOK_ENV, None),
        ({"health": {"notifications": WEBHOOK}, **TWO_LEADS}, WEBHOOK_ENV, None),
    ],
)
def test_the_coverage_warning_says_what_this_build_and_the_lead_count_leave_out(
    document: dict[str, Any], environ: dict[str, str], warning: str | None
) -> None:
    """One WARN while detection runs without a human sink (and for a sole lead, that its failure
    has no recovery); none in webhook mode, none with detection off."""
    environ = {"T_A": "token-aaaa-0001", "T_B": "token-bbbb-0001", **environ}
    loaded = parse_config(document, environ)
    assert list(loaded.warnings) == ([] if warning is None else [warning])


@pytest.mark.parametrize(
    "document",
    [
        {"inbox": {"amqp": {"url": "http://user:hunter2-secret@broker/"}}},
        {"inbox": {"amqp": {"url": 5}, "backend": "hunter2-secret"}},
        {"journal": {"url": "mysql://user:hunter2-secret@db/x"}},
        {"leads": [{"name": "hunter2-secret!", "tokenEnv": "T"}]},
    ],
)
def test_errors_never_carry_values(document: dict[str, Any]) -> None:
    """Error text names keys and rules, never the offending value (it may be a secret)."""
    with pytest.raises(ConfigError) as caught:
        parse_config(document, {})
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(caught.value)


def test_yaml_errors_never_carry_the_line_text(tmp_path: Path) -> None:
    """A YAML error reports its line and problem, not a snippet of the file."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("inbox:\n  amqp:\n    url: amqp://u:hunter2-secret@h/\n  : [\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "hunter2" not in str(caught.value)
