"""``journal.urlEnv``: the journal URL, password included, comes from a named variable."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from fleetd.config import RESTART_KEYS, load_config, parse_config
from fleetd.config.render import check_config_main
from fleetd.errors import ConfigError

PG = "postgresql://fleetd:hunter2@db:5432/fleet"


def test_url_env_names_the_variable_that_holds_the_url(tmp_path: Path) -> None:
    """The URL is read from the variable at load time; check-config prints it masked."""
    path = tmp_path / "fleetd.yaml"
    path.write_text("journal:\n  urlEnv: FLEETD_JOURNAL_URL\n")
    environ = {"FLEETD_JOURNAL_URL": PG}
    journal = load_config(path, environ).config.journal
    assert journal.url_env == "FLEETD_JOURNAL_URL"
    assert journal.url.get_secret_value() == PG
    out = io.StringIO()
    assert check_config_main([str(path)], environ=environ, stdout=out, stderr=io.StringIO()) == 0
    printed = yaml.safe_load(out.getvalue())["journal"]
    assert printed == {
        "urlEnv": "FLEETD_JOURNAL_URL",
        "url": "postgresql://fleetd:***@db:5432/fleet",
        "operationTimeoutMs": 5000,
        "retentionDays": 30,
    }
    assert "hunter2" not in out.getvalue()


def test_url_env_can_come_from_an_override() -> None:
    """FLEETD_JOURNAL__URL_ENV names the variable the journal URL is read from."""
    environ = {"FLEETD_JOURNAL__URL_ENV": "DB_URL", "DB_URL": "sqlite:////srv/j.sqlite"}
    journal = parse_config(None, environ).config.journal
    assert journal.url.get_secret_value() == "sqlite:////srv/j.sqlite"


@pytest.mark.parametrize(
    ("document", "environ", "key", "words"),
    [
        ({"urlEnv": "DB_URL"}, {}, "journal.urlEnv", "DB_URL is not set"),
        ({"urlEnv": "DB_URL"}, {"DB_URL": "mysql://x"}, "journal.urlEnv", "must hold"),
        ({"urlEnv": "DB_URL", "url": "sqlite:///x"}, {"DB_URL": PG}, "journal.url", "not both"),
        ({"urlEnv": "not a name"}, {}, "journal.urlEnv", "pattern"),
    ],
)
def test_a_bad_url_env_names_its_key(
    document: dict[str, str], environ: dict[str, str], key: str, words: str
) -> None:
    """Malformed journal settings are refused naming the key; the URL never appears."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"journal": document}, environ)
    assert caught.value.key == key
    assert words in caught.value.reason
    assert "hunter2" not in str(caught.value)


def test_journal_keys_need_a_restart() -> None:
    """journal.url and journal.urlEnv are restart keys, never applied by a reload."""
    assert {"journal.url", "journal.urlEnv"} <= RESTART_KEYS


@pytest.mark.parametrize(
    ("document", "key", "words"),
    [
        ({"operationTimeoutMs": 60_001}, "journal.operationTimeoutMs", "less than or equal to"),
        ({"operationTimeoutMs": "5s"}, "journal.operationTimeoutMs", "valid integer"),
        ({"retentionDays": 3651}, "journal.retentionDays", "less than or equal to 3650"),
        ({"retentionDays": 1.5}, "journal.retentionDays", "valid integer"),
    ],
)
def test_a_bad_deadline_or_retention_names_its_key(
    document: dict[str, object], key: str, words: str
) -> None:
    """Above its bound or not an integer: refused, naming the key and why."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"journal": document}, {})
    assert caught.value.key == key
    assert words in caught.value.reason


def test_the_deadline_and_the_retention_are_hot_and_floored() -> None:
    """Neither needs a restart; below its floor each runs at the floor, with one warning."""
    assert {"journal.operationTimeoutMs", "journal.retentionDays"}.isdisjoint(RESTART_KEYS)
    loaded = parse_config({"journal": {"operationTimeoutMs": 10, "retentionDays": 0}}, {})
    journal = loaded.config.journal
    assert (journal.operation_timeout_ms, journal.retention_days) == (1000, 1)
    assert len(loaded.warnings) == 2


@pytest.mark.parametrize("section", ["journal", "state"])
def test_a_relative_sqlite_path_is_beside_the_config_and_only_a_password_is_masked(
    tmp_path: Path, section: str
) -> None:
    """``sqlite:///rel.db`` named a file in whatever directory fleetd was started from, so a
    start from elsewhere found an empty store (every member orphaned, every ticket gone); it is
    beside the config, as every other relative path is. check-config printed ``state.url`` as
    stars whatever it held; it now masks only a password, as for ``journal.url``."""
    path = tmp_path / "fleetd.yaml"
    path.write_text(f"{section}:\n  url: sqlite:///var/{section}.sqlite\n")
    loaded = getattr(load_config(path, {}).config, section).url.get_secret_value()
    assert loaded == f"sqlite:///{tmp_path / 'var' / f'{section}.sqlite'}"
    absolute = "sqlite:////srv/x.sqlite"
    path.write_text(f"{section}:\n  url: {absolute}\n")
    assert getattr(load_config(path, {}).config, section).url.get_secret_value() == absolute
    path.write_text(f"{section}:\n  url: {PG}\n")
    out = io.StringIO()
    assert check_config_main([str(path)], environ={}, stdout=out, stderr=io.StringIO()) == 0
    assert yaml.safe_load(out.getvalue())[section]["url"] == "postgresql://fleetd:***@db:5432/fleet"
    assert "hunter2" not in out.getvalue()
