"""Live config: a valid change applies on the next check, an invalid one is kept out and shown."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from fleetd.api.tools import Caller, Role
from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.memory import InMemoryInbox
from tests.metric_samples import sample

ENV = {"T_LEAD": "lead-token-0001", "T_SECOND": "second-token-0001", "T_OP": "op-token-0001"}


def _write(path: Path, document: dict[str, object], stamp: int) -> None:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (stamp, stamp))


async def test_reload_applies_hot_keys_owns_new_lead_keys_and_reports_bad_files(
    tmp_path: Path,
) -> None:
    """A new lead gets its key and token live; a bad file keeps the running config, reported."""
    path = tmp_path / "fleetd.yaml"
    document: dict[str, object] = {
        "operatorTokenEnv": "T_OP",
        "leads": [{"name": "lead", "tokenEnv": "T_LEAD"}],
        "profiles": {"codex": {"kind": "codex"}},
    }
    _write(path, document, 1_000)
    clock = FakeClock()
    ref = ConfigRef.load(path, ENV, now=clock.now())
    inbox = InMemoryInbox()
    service = build_service(
        ref,
        environ=ENV,
        clock=clock,
        control=FakeAgentControl(),
        inbox=inbox,
        worktrees=FakeWorktrees(),
    )
    await service.own_lead_keys()
    assert service.bridge.lead_inboxes.owned == {"lead"}

    document["leads"] = [
        {"name": "lead", "tokenEnv": "T_LEAD"},
        {"name": "second", "tokenEnv": "T_SECOND"},
    ]
    document["bridge"] = {"submitRetryMs": 900}
    _write(path, document, 2_000)
    await service.check_config()
    assert service.config.current.bridge.submit_retry_ms == 900
    assert service.bridge.lead_inboxes.owned == {"lead", "second"}
    second = service.authenticator.authenticate("Bearer second-token-0001")
    assert (second.role, second.name) == (Role.LEAD, "second")

    path.write_text("bridge:\n  submitRetryMs: [oops]\n", encoding="utf-8")
    os.utime(path, (3_000, 3_000))
    await service.check_config()
    assert service.config.current.bridge.submit_retry_ms == 900
    operator = Caller(role=Role.OPERATOR, name="operator")
    view = await service.view.build(operator)
    assert view["config"]["lastReloadErrorKey"] == "bridge.submitRetryMs"
    assert view["config"]["reloadFailures"] == 1
    assert sample(service.metrics.config_reloads_total, outcome="rejected") == 1


async def test_no_file_version_written_over_a_running_config_locks_callers_out(
    tmp_path: Path,
) -> None:
    """Every prefix of the running file (a truncated or half-written save), a file without
    leads, and one naming an unset token variable: the lead and the operator still authenticate,
    and each refused version is counted and shown in the fleet view."""
    path = tmp_path / "fleetd.yaml"
    text = (
        "operatorTokenEnv: T_OP\n"
        "profiles:\n  codex:\n    kind: codex\n"
        "bridge:\n  submitRetryMs: 900\n"
        "leads:\n  - name: lead\n    agent: lead\n    tokenEnv: T_LEAD\n"
    )
    path.write_text(text, encoding="utf-8")
    clock = FakeClock()
    ref = ConfigRef.load(path, ENV, now=clock.now())
    service = build_service(
        ref,
        environ=ENV,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
    )
    await service.own_lead_keys()
    operator = Caller(role=Role.OPERATOR, name="operator")
    versions = [text[:end] for end in range(len(text))]
    versions += [
        "bridge:\n  submitRetryMs: 900\n",
        text.replace("T_LEAD", "T_UNSET"),
        text.replace("900", str(10**300)),
    ]
    for stamp, version in enumerate(versions, start=2_000):
        path.write_text(version, encoding="utf-8")
        os.utime(path, (stamp, stamp))
        await service.check_config()
        lead = service.authenticator.authenticate("Bearer lead-token-0001")
        assert (lead.role, lead.name) == (Role.LEAD, "lead"), repr(version)
        ops = service.authenticator.authenticate("Bearer op-token-0001")
        assert ops.role is Role.OPERATOR, repr(version)
        assert service.config.current.lead("lead") is not None
        assert service.bridge.lead_inboxes.owned == {"lead"}
    rejected = sample(service.metrics.config_reloads_total, outcome="rejected")
    assert rejected == service.config.reload_failures >= 3
    view = await service.view.build(operator)
    assert view["config"]["lastReloadErrorKey"] == "bridge.submitRetryMs"
    assert view["config"]["reloadFailures"] == rejected


async def test_a_reload_repoints_the_broker_list_and_a_bad_one_keeps_it(tmp_path: Path) -> None:
    """A changed inbox.amqp.urls reaches the running inbox at the next check; a file setting
    url and urls together is refused by key and the running list stays."""
    path = tmp_path / "fleetd.yaml"
    document: dict[str, object] = {
        "leads": [{"name": "lead", "tokenEnv": "T_LEAD"}],
        "inbox": {"backend": "amqp", "amqp": {"urls": ["amqp://a:1/", "amqp://b:1/"]}},
    }
    _write(path, document, 1_000)
    clock = FakeClock()
    ref = ConfigRef.load(path, ENV, now=clock.now())
    service = build_service(
        ref, environ=ENV, clock=clock, control=FakeAgentControl(), worktrees=FakeWorktrees()
    )
    inbox = service.inbox
    assert isinstance(inbox, AmqpInbox)
    assert len(inbox.broker_report().pool.endpoints) == 2
    try:
        document["inbox"] = {
            "backend": "amqp",
            "amqp": {"urls": ["amqp://b:1/", "amqp://c:1/", "amqp://d:1/"]},
        }
        _write(path, document, 2_000)
        await service.check_config()
        assert len(inbox.broker_report().pool.endpoints) == 3

        document["inbox"] = {
            "backend": "amqp",
            "amqp": {"url": "amqp://e:1/", "urls": ["amqp://f:1/"]},
        }
        _write(path, document, 3_000)
        await service.check_config()
        assert service.config.last_reload_error is not None
        assert service.config.last_reload_error.key == "inbox.amqp"
        assert service.config.current.inbox.amqp.endpoints == (
            "amqp://b:1/",
            "amqp://c:1/",
            "amqp://d:1/",
        )
        assert len(inbox.broker_report().pool.endpoints) == 3
    finally:
        await inbox.close()
