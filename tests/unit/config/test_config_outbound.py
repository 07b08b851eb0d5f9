"""Outbound dependencies in the config: broker lists, watchdogs, providers and the probe."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetd.config import parse_config
from fleetd.errors import ConfigError


def _amqp(**amqp: Any) -> dict[str, Any]:
    return {"inbox": {"amqp": amqp}}


def test_one_url_is_the_one_endpoint() -> None:
    """Without urls, the endpoint list is the one url (the default broker when unset)."""
    assert parse_config(None, {}).config.inbox.amqp.endpoints == (
        "amqp://guest:guest@127.0.0.1:5672/",
    )
    config = parse_config(_amqp(url="amqps://u:p@b/"), {}).config
    assert config.inbox.amqp.endpoints == ("amqps://u:p@b/",)


def test_urls_keep_their_order() -> None:
    """urls lists the brokers primary first."""
    config = parse_config(_amqp(urls=["amqp://b/", "amqp://a/"]), {}).config
    assert config.inbox.amqp.endpoints == ("amqp://b/", "amqp://a/")


def test_url_and_urls_together_are_refused_naming_both_keys() -> None:
    """Setting both is an error naming inbox.amqp.url and inbox.amqp.urls."""
    with pytest.raises(ConfigError) as caught:
        parse_config(_amqp(url="amqp://a/", urls=["amqp://b/"]), {})
    assert caught.value.key == "inbox.amqp"
    assert "inbox.amqp.url " in caught.value.reason
    assert "inbox.amqp.urls" in caught.value.reason


def test_an_env_url_with_urls_in_the_file_is_refused() -> None:
    """An override counts as set: FLEETD_INBOX__AMQP__URL beside urls in the file is refused."""
    with pytest.raises(ConfigError):
        parse_config(_amqp(urls=["amqp://b/"]), {"FLEETD_INBOX__AMQP__URL": "amqp://a/"})


@pytest.mark.parametrize(
    ("urls", "key"),
    [
        ([], "inbox.amqp.urls"),
        (["amqp://a/", "amqp://a/"], "inbox.amqp.urls"),
        ([f"amqp://h{n}/" for n in range(9)], "inbox.amqp.urls"),
        (["amqp://a/", "http://u:secret@b/"], "inbox.amqp.urls[1]"),
    ],
)
def test_bad_broker_lists_name_the_key(urls: list[str], key: str) -> None:
    """An empty, repeating, too long or wrongly schemed list is refused by key, never shown."""
    with pytest.raises(ConfigError) as caught:
        parse_config(_amqp(urls=urls), {})
    assert caught.value.key == key
    assert "secret" not in str(caught.value)


def test_urls_from_the_environment_are_comma_separated() -> None:
    """FLEETD_INBOX__AMQP__URLS lists brokers separated by commas."""
    config = parse_config(None, {"FLEETD_INBOX__AMQP__URLS": " amqp://a/, amqp://b/ "}).config
    assert config.inbox.amqp.endpoints == ("amqp://a/", "amqp://b/")


def test_broker_passwords_print_masked() -> None:
    """The JSON form of the config masks every broker password."""
    config = parse_config(_amqp(urls=["amqp://u:hunter2@a/", "amqp://b/"]), {}).config
    text = json.dumps(config.model_dump(mode="json"))
    assert "hunter2" not in text
    assert config.model_dump(mode="json")["inbox"]["amqp"]["urls"] == [
        "amqp://u:***@a/",
        "amqp://b/",
    ]


def test_watchdogs_default_and_convert() -> None:
    """Each outbound call has a watchdog: herdr connect and request, AMQP connect and operation,
    the catalog request."""
    config = parse_config(None, {}).config
    assert config.herdr.connect_timeout.total_seconds() == 2.0
    assert config.herdr.request_timeout.total_seconds() == 5.0
    assert config.inbox.amqp.connect_timeout.total_seconds() == 10.0
    assert config.inbox.amqp.operation_timeout.total_seconds() == 10.0
    assert config.model_health.request_timeout.total_seconds() == 10.0
    assert config.model_health.probe_interval.total_seconds() == 300.0


def test_providers_are_named_once_and_found_by_name() -> None:
    """Provider names are unique; a trailing slash of a base URL is dropped."""
    document = {
        "providers": [
            {"name": "openrouter", "baseUrl": "https://openrouter.ai/api/v1/", "apiKeyEnv": "K"},
            {"name": "local", "baseUrl": "http://127.0.0.1:9/v1"},
        ]
    }
    config = parse_config(document, {}).config
    provider = config.provider("openrouter")
    assert provider is not None
    assert (provider.base_url, provider.api_key_env) == ("https://openrouter.ai/api/v1", "K")
    assert config.provider("absent") is None
    assert config.provider(None) is None
    document["providers"].append({"name": "local", "baseUrl": "http://x/"})
    with pytest.raises(ConfigError) as caught:
        parse_config(document, {})
    assert caught.value.key == "providers"


@pytest.mark.parametrize(
    "base",
    ["ftp://x/", "https://user:key@x/v1", "https:///v1", "not a url"],
)
def test_a_provider_base_url_is_plain_http(base: str) -> None:
    """A base URL is http(s) with a host and never carries credentials (the key has its
    variable); the error names the key and never shows the value."""
    with pytest.raises(ConfigError) as caught:
        parse_config({"providers": [{"name": "p", "baseUrl": base}]}, {})
    assert caught.value.key == "providers[0].baseUrl"
    assert "key@" not in str(caught.value)


def test_a_profile_may_state_its_context_window() -> None:
    """contextWindow is a positive token count; past 100 million it is refused."""
    document: dict[str, Any] = {"profiles": {"p": {"kind": "codex", "contextWindow": 200_000}}}
    assert parse_config(document, {}).config.profiles["p"].context_window == 200_000
    document["profiles"]["p"]["contextWindow"] = 100_000_001
    with pytest.raises(ConfigError) as caught:
        parse_config(document, {})
    assert caught.value.key == "profiles.p.contextWindow"
