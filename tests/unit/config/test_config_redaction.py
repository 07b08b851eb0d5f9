"""The secrets a running config names, for redaction: every variable it reads a secret from, and
the URLs it holds."""

from __future__ import annotations

from pathlib import Path

from fleetd.clock import FakeClock
from fleetd.config import ConfigRef
from fleetd.config.loader import parse_config

HOOK_SECRET = "whsec_" + "QUFB" * 8


def test_every_named_secret_is_listed_once_and_unset_ones_are_not(tmp_path: Path) -> None:
    """secret_values lists every set secret (tokens, keys, hook URLs, broker and journal URLs)
    once, longest first, and skips unset ones."""
    document = {
        "operatorTokenEnv": "T_OP",
        "leads": [{"name": "lead", "tokenEnv": "T_LEAD"}, {"name": "b", "tokenEnv": "T_B"}],
        "providers": [
            {"name": "p", "baseUrl": "https://models.example/v1", "apiKeyEnv": "P_KEY"},
            {"name": "q", "baseUrl": "https://models.example/v2", "apiKeyEnv": "Q_KEY"},
        ],
        "inbox": {"amqp": {"url": "amqp://u:brokerpw@mq:5672/"}},
        "journal": {"url": "postgresql://j:journalpw@db/fleetd"},
        "health": {
            "notifications": {
                "mode": "webhook",
                "webhookUrlEnvs": ["HOOK_A", "HOOK_B"],
                "secretEnv": "HOOK_SECRET",
            }
        },
    }
    env = {
        "T_OP": "operator-token-1",
        "T_LEAD": "lead-token-1",
        "T_B": "lead-token-2",
        "P_KEY": "provider-key-1",
        "HOOK_A": "https://a.example/hook/tok",
        "HOOK_B": "https://b.example/hook/tok",
        "HOOK_SECRET": HOOK_SECRET,
    }
    loaded = parse_config(document, env, base_dir=tmp_path)
    ref = ConfigRef(loaded, environ=env, now=FakeClock().now())
    values = ref.secret_values()
    assert set(values) == {
        "operator-token-1",
        "lead-token-1",
        "lead-token-2",
        "provider-key-1",
        "https://a.example/hook/tok",
        "https://b.example/hook/tok",
        HOOK_SECRET,
        "amqp://u:brokerpw@mq:5672/",
        "postgresql://j:journalpw@db/fleetd",
    }
    assert len(values) == len(set(values))
    assert [len(v) for v in values] == sorted((len(v) for v in values), reverse=True)
