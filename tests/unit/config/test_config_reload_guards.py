"""ConfigRef refuses a new file version that would lock callers out or break the loops."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from fleetd.clock import FakeClock
from fleetd.config import ConfigRef, ReloadStatus

ENV = {"T_ALPHA": "alpha-token-0001", "T_BETA": "beta-token-0001", "T_OP": "op-token-0001"}
RUNNING = (
    "operatorTokenEnv: T_OP\n"
    "health:\n  enabled: true\n"
    "leads:\n  - name: alpha\n    tokenEnv: T_ALPHA\n  - name: beta\n    tokenEnv: T_BETA\n"
)


class ConfigFile:
    """A config file whose every write gets a distinct mtime, so tests never race the clock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime_ns = 1_700_000_000_000_000_000

    def write(self, text: str) -> None:
        self.path.write_text(text)
        self._mtime_ns += 1_000_000_000
        os.utime(self.path, ns=(self._mtime_ns, self._mtime_ns))


@pytest.fixture
def file(tmp_path: Path) -> ConfigFile:
    config_file = ConfigFile(tmp_path / "fleetd.yaml")
    config_file.write(RUNNING)
    return config_file


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _nested(depth: int) -> str:
    return "health:\n  enabled: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param("", "<file>", id="empty"),
        pytest.param("\n  \n", "<file>", id="blank"),
        pytest.param("# fleetd example configuration\n", "<file>", id="comments-only"),
        pytest.param(RUNNING[: RUNNING.index("leads:")], "leads", id="truncated-before-leads"),
        pytest.param(
            RUNNING[: RUNNING.index("T_ALPHA") + 4], "leads[0].tokenEnv", id="truncated-mid-name"
        ),
        pytest.param("health:\n  enabled: false\n", "leads", id="no-leads"),
        pytest.param(RUNNING.replace("T_BETA", "T_GAMMA"), "leads[1].tokenEnv", id="unset-token"),
        pytest.param(RUNNING.replace("T_OP", "T_NONE"), "operatorTokenEnv", id="unset-operator"),
        pytest.param(RUNNING.replace("T_BETA", "T_ALPHA"), "leads[1].tokenEnv", id="shared-token"),
        pytest.param(
            RUNNING.replace("enabled: true", f"snapshotIntervalSeconds: {10**300}"),
            "health.snapshotIntervalSeconds",
            id="huge-duration",
        ),
        pytest.param(_nested(5000), "<file>", id="nested-5000-deep"),
        pytest.param(RUNNING + "#" * 2_000_000 + "\n", "<file>", id="two-megabytes"),
    ],
)
def test_a_version_that_would_lock_callers_out_is_rejected(
    file: ConfigFile, clock: FakeClock, caplog: pytest.LogCaptureFixture, text: str, key: str
) -> None:
    """The running config stays, and the rejection names the key (or the file) and is logged."""
    ref = ConfigRef.load(file.path, ENV, now=clock.now())
    running = ref.current
    file.write(text)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fleetd.config"):
        result = ref.reload(clock.now())
    expected_key = str(file.path) if key == "<file>" else key
    assert result.status is ReloadStatus.REJECTED
    assert result.error is not None
    assert result.error.key == expected_key
    assert ref.current is running
    assert (ref.status.last_error_key, ref.reload_failures) == (expected_key, 1)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert expected_key in caplog.records[0].getMessage()
    for token in ENV.values():
        assert token not in caplog.text


def test_a_version_that_cannot_be_read_is_rejected_once_not_at_every_check(
    file: ConfigFile, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The file becomes a directory (it can be listed, not read): the reload is rejected and
    warned once; the checks after it find the same version and say nothing more, until SIGHUP
    asks for it again."""
    ref = ConfigRef.load(file.path, ENV, now=clock.now())
    file.path.unlink()
    file.path.mkdir()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fleetd.config"):
        results = [ref.reload(clock.now()).status for _ in range(5)]
        assert (results[0], set(results[1:])) == (ReloadStatus.REJECTED, {ReloadStatus.UNCHANGED})
        assert (ref.reload_failures, len(caplog.records)) == (1, 1)
        ref.request_reload()
        assert ref.reload(clock.now()).status is ReloadStatus.REJECTED
    assert ref.reload_failures == 2


def test_removing_some_leads_still_applies(file: ConfigFile, clock: FakeClock) -> None:
    """Dropping one of two leads is an edit, not a lock-out: it applies."""
    ref = ConfigRef.load(file.path, ENV, now=clock.now())
    file.write(RUNNING[: RUNNING.index("  - name: beta")])
    assert ref.reload(clock.now()).status is ReloadStatus.APPLIED
    assert [lead.name for lead in ref.current.leads] == ["alpha"]


def test_a_fleet_started_without_leads_may_reload_without_leads(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The every-lead guard protects running leads; a lead-less fleet edits freely."""
    config = ConfigFile(tmp_path / "fleetd.yaml")
    config.write("health:\n  enabled: false\n")
    ref = ConfigRef.load(config.path, {}, now=clock.now())
    config.write("health:\n  enabled: true\n")
    assert ref.reload(clock.now()).status is ReloadStatus.APPLIED
    assert ref.current.health.enabled is True
