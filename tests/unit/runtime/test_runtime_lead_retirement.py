"""A lead removed from the config, on the service ``fleetd serve`` builds: the monitor keeps its
identity for two successful snapshots (its lead view built from config, as every lead's is), then
retires it and releases its empty inbox key."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.herdr.fake import FakeAgentControl
from fleetd.herdr.model import AgentStatus
from fleetd.inbox.memory import InMemoryInbox

ENV = {"T_LEAD": "lead-token-0001", "T_SECOND": "second-token-0001"}


def _write(path: Path, document: dict[str, object], stamp: int) -> None:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (stamp, stamp))


async def test_a_lead_removed_from_the_config_is_retired_after_two_snapshots(
    tmp_path: Path,
) -> None:
    """Still running in herdr, the removed lead is kept one snapshot, retired on the second, and
    its inbox key released."""
    path = tmp_path / "fleetd.yaml"
    two = [{"name": "lead", "tokenEnv": "T_LEAD"}, {"name": "second", "tokenEnv": "T_SECOND"}]
    document: dict[str, object] = {
        "leads": two,
        "profiles": {"codex": {"kind": "codex"}},
        "health": {"enabled": True, "snapshotIntervalSeconds": 15},
    }
    _write(path, document, 1_000)
    clock = FakeClock()
    control = FakeAgentControl()
    for name in ("lead", "second"):
        control.add_agent(name, kind="claude", status=AgentStatus.IDLE)
    service = build_service(
        ConfigRef.load(path, ENV, now=clock.now()),
        environ=ENV,
        clock=clock,
        control=control,
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
    )
    await service.own_lead_keys()
    health = service.health
    await health.tick()
    second = health.state.leads["second"]
    assert (second.configured, second.discovered) == (True, False)

    document["leads"] = two[:1]
    _write(path, document, 2_000)
    await service.check_config()
    clock.advance(15)
    await health.tick()
    assert health.state.leads["second"].identity_missing == 1
    assert "second" in service.bridge.lead_inboxes.owned
    clock.advance(15)
    await health.tick()
    assert "second" not in health.state.leads
    assert service.bridge.lead_inboxes.owned == {"lead"}
