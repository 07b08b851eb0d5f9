"""ConfigRef: polled reload of the config file, validated before it applies."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fleetd.config.ref
from fleetd.clock import FakeClock
from fleetd.config import ConfigRef, NotificationMode, ReloadStatus, parse_config
from fleetd.config.loader import parse_config_bytes

BASE = "api:\n  port: 8765\nhealth:\n  enabled: false\n"


class ConfigFile:
    """A config file whose every write gets a distinct mtime, so tests never race the clock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime_ns = 1_700_000_000_000_000_000

    def write(self, text: str) -> None:
        self.path.write_text(text)
        self.touch()

    def touch(self) -> None:
        self._mtime_ns += 1_000_000_000
        os.utime(self.path, ns=(self._mtime_ns, self._mtime_ns))


@pytest.fixture
def file(tmp_path: Path) -> ConfigFile:
    config_file = ConfigFile(tmp_path / "fleetd.yaml")
    config_file.write(BASE)
    return config_file


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records each time ConfigRef parses the file."""
    calls: list[Path] = []
    real: Callable[..., Any] = parse_config_bytes

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["path"])
        return real(*args, **kwargs)

    monkeypatch.setattr(fleetd.config.ref, "parse_config_bytes", counting)
    return calls


def _ref(file: ConfigFile, clock: FakeClock, environ: dict[str, str] | None = None) -> ConfigRef:
    return ConfigRef.load(file.path, environ or {}, now=clock.now())


def test_valid_hot_change_applies(file: ConfigFile, clock: FakeClock) -> None:
    """A valid edit of a hot key is in effect after the next reload, and only that key changed."""
    ref = _ref(file, clock)
    file.write(BASE.replace("enabled: false", "enabled: true"))
    clock.advance(5)
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.APPLIED
    assert result.changed_keys == ("health.enabled",)
    assert result.pending_restart_keys == ()
    assert ref.current.health.enabled is True
    assert ref.status.loaded_at == clock.now()
    assert ref.status.last_error_key is None


def test_unchanged_file_is_not_reparsed(
    file: ConfigFile, clock: FakeClock, parses: list[Path]
) -> None:
    """Same stat: nothing is read; new mtime with the same bytes: read, hashed, not parsed."""
    ref = _ref(file, clock)
    before = ref.current
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    file.touch()
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert parses == []
    assert ref.current is before


def test_invalid_change_keeps_running_config(
    file: ConfigFile, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An invalid edit is reported once (result, error, counter, WARN) and changes nothing."""
    ref = _ref(file, clock)
    before = ref.current
    file.write(BASE + "  snapshotIntervalSeconds: soon\n")
    with caplog.at_level(logging.WARNING, logger="fleetd.config"):
        result = ref.reload(clock.now())
    assert result.status is ReloadStatus.REJECTED
    assert result.error is not None
    assert result.error.key == "health.snapshotIntervalSeconds"
    assert ref.current is before
    assert ref.reload_failures == 1
    assert ref.last_reload_error is result.error
    status = ref.status
    assert (status.last_error_key, status.reload_failures) == ("health.snapshotIntervalSeconds", 1)
    assert status.last_error_reason is not None
    assert len(caplog.records) == 1
    assert "health.snapshotIntervalSeconds" in caplog.records[0].getMessage()
    # The same bad version is not re-reported on later ticks.
    file.touch()
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert ref.reload_failures == 1


def test_fixing_the_file_clears_the_error(file: ConfigFile, clock: FakeClock) -> None:
    """After a rejected version, a valid one applies and clears the reported error."""
    ref = _ref(file, clock)
    file.write("bogus: 1\n")
    assert ref.reload(clock.now()).status is ReloadStatus.REJECTED
    file.write(BASE.replace("enabled: false", "enabled: true"))
    assert ref.reload(clock.now()).status is ReloadStatus.APPLIED
    assert ref.last_reload_error is None
    assert ref.reload_failures == 1
    assert ref.current.health.enabled is True


def test_malformed_yaml_on_reload_names_the_line(file: ConfigFile, clock: FakeClock) -> None:
    """A reload of YAML that does not parse reports the file and line."""
    ref = _ref(file, clock)
    file.write("health:\n  enabled: [\n")
    result = ref.reload(clock.now())
    assert result.error is not None
    assert result.error.key == str(file.path)
    assert result.error.reason.startswith("line 3:")


def test_restart_only_change_is_pending(file: ConfigFile, clock: FakeClock) -> None:
    """A changed restart-only key keeps its running value and is listed; hot keys still apply."""
    ref = _ref(file, clock)
    file.write("api:\n  port: 9000\nhealth:\n  enabled: true\n")
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.APPLIED
    assert result.pending_restart_keys == ("api.port",)
    assert result.changed_keys == ("health.enabled",)
    assert ref.current.api.port == 8765
    assert ref.current.health.enabled is True
    assert ref.status.pending_restart_keys == ("api.port",)
    # Putting the old value back clears the pending restart.
    file.write(BASE)
    reverted = ref.reload(clock.now())
    assert reverted.pending_restart_keys == ()
    assert reverted.changed_keys == ("health.enabled",)
    assert not ref.status.pending_restart_keys


def test_a_new_instance_name_waits_for_a_restart(file: ConfigFile, clock: FakeClock) -> None:
    """The state store, its lock and the journal's rows are the instance's, taken at start: a
    name changed by a reload was applied at once (hot) while the store kept writing under the
    old one, and the next start found nothing of its own — every member orphaned, every ticket
    and token of the run gone. The name now waits for a restart, and is said to."""
    ref = _ref(file, clock)
    file.write("instance: renamed-a\n" + BASE)
    result = ref.reload(clock.now())
    assert result.pending_restart_keys == ("instance",)
    assert result.changed_keys == ()
    assert ref.current.instance is None


def test_secret_restart_key_is_named_not_shown(file: ConfigFile, clock: FakeClock) -> None:
    """A changed journal URL is pending by key; neither password appears in the result."""
    ref = _ref(file, clock)
    before = ref.current.journal.url.get_secret_value()
    file.write(BASE + "journal:\n  url: postgresql://u:hunter2@db/test\n")
    result = ref.reload(clock.now())
    assert result.pending_restart_keys == ("journal.url",)
    assert "hunter2" not in repr(result)
    assert ref.current.journal.url.get_secret_value() == before


def test_broker_urls_apply_live_and_stay_masked(file: ConfigFile, clock: FakeClock) -> None:
    """The broker list is hot (the inbox repoints at a safe boundary); no password shows."""
    ref = _ref(file, clock)
    file.write(BASE + "inbox:\n  amqp:\n    urls: [amqp://u:hunter2@a/, amqp://u:hunter2@b/]\n")
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.APPLIED
    assert "inbox.amqp.urls" in result.changed_keys
    assert result.pending_restart_keys == ()
    assert "hunter2" not in repr(result)
    assert ref.current.inbox.amqp.endpoints == ("amqp://u:hunter2@a/", "amqp://u:hunter2@b/")


def test_leads_and_profiles_apply_live(file: ConfigFile, clock: FakeClock) -> None:
    """Adding a lead and a profile is a hot change."""
    ref = _ref(file, clock, {"ALPHA_TOKEN": "alpha-token"})
    file.write(
        BASE
        + "leads:\n  - name: alpha\n    tokenEnv: ALPHA_TOKEN\n"
        + "profiles:\n  sonnet:\n    kind: claude\n    maxLoad: 2\n"
    )
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.APPLIED
    assert set(result.changed_keys) >= {"leads", "profiles.sonnet.kind", "profiles.sonnet.maxLoad"}
    assert ref.current.lead("alpha") is not None
    assert ref.current.profiles["sonnet"].max_load == 2


def test_reload_reports_floor_warnings(
    file: ConfigFile, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A reloaded value below its floor runs at the floor, with the warning returned and logged."""
    ref = _ref(file, clock)
    file.write(BASE + "  snapshotIntervalSeconds: 1\n")
    with caplog.at_level(logging.WARNING, logger="fleetd.config"):
        result = ref.reload(clock.now())
    assert ref.current.health.snapshot_interval_seconds == 15
    assert result.warnings == ("health.snapshotIntervalSeconds=1 is below its floor 15; using 15",)
    assert [r.getMessage() for r in caplog.records] == list(result.warnings)


def test_request_reload_forces_a_reparse(
    file: ConfigFile, clock: FakeClock, parses: list[Path]
) -> None:
    """After request_reload (SIGHUP) the next reload parses the file even though it is unchanged."""
    ref = _ref(file, clock)
    ref.request_reload()
    result = ref.reload(clock.now())
    assert parses == [file.path]
    assert result.status is ReloadStatus.APPLIED
    assert result.changed_keys == ()
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert len(parses) == 1


def test_missing_file_is_reported_once(file: ConfigFile, clock: FakeClock) -> None:
    """A vanished file keeps the running config, is reported once, and clears when it returns."""
    ref = _ref(file, clock)
    file.path.unlink()
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.REJECTED
    assert ref.status.last_error_key == str(file.path)
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert ref.reload_failures == 1
    file.write(BASE)
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert ref.last_reload_error is None


def test_config_without_a_file_never_changes(clock: FakeClock) -> None:
    """A ConfigRef built from a document has nothing to reload."""
    ref = ConfigRef(parse_config({"health": {"enabled": True}}, {}), environ={}, now=clock.now())
    ref.request_reload()
    assert ref.reload(clock.now()).status is ReloadStatus.UNCHANGED
    assert ref.status.path is None
    assert ref.current.health.enabled is True


def test_environment_applies_on_reload(file: ConfigFile, clock: FakeClock) -> None:
    """Overrides given at start keep winning over the file after a reload."""
    ref = _ref(file, clock, {"FLEETD_HEALTH__HUMAN_REPEAT_SECONDS": "1800"})
    file.write(BASE + "  humanRepeatSeconds: 7200\n")
    ref.reload(clock.now())
    assert ref.current.health.human_repeat_seconds == 1800


def test_bad_notification_config_leaves_the_running_detector(
    file: ConfigFile, clock: FakeClock
) -> None:
    """A reload into webhook mode without its secret is refused naming the key; detection stays on
    and notifications stay as they were until the variables are set (M4 Unit 5, criterion 3)."""
    running = BASE.replace("enabled: false", "enabled: true")
    file.write(running)
    environ = {"HOOK_URL": "https://hooks.example/x"}
    ref = _ref(file, clock, environ)
    before = ref.current
    webhook = "  notifications:\n    mode: webhook\n    webhookUrlEnv: HOOK_URL\n"
    file.write(running + webhook + "    secretEnv: HOOK_SECRET\n")
    result = ref.reload(clock.now())
    assert result.status is ReloadStatus.REJECTED
    assert result.error is not None
    assert result.error.key == "health.notifications.secretEnv"
    assert ref.current is before
    assert ref.current.health.enabled is True
    assert ref.current.health.notifications.mode is NotificationMode.DISABLED
