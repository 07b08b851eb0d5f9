"""7b: the service runs a retention pass that deletes resolved history past
``journal.retentionDays``, in bounded batches, and a failing journal only ends the pass."""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from fleetd.bridge.worktrees import FakeWorktrees
from fleetd.clock import FakeClock
from fleetd.compose import build_service
from fleetd.config import ConfigRef
from fleetd.errors import JournalUnavailableError
from fleetd.health.incidents import ResolveReason
from fleetd.herdr.fake import FakeAgentControl
from fleetd.inbox.memory import InMemoryInbox
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.retention import JournalRetention
from fleetd.journal.values import IncidentChange
from fleetd.testing import sample_document
from tests.contract.journal_cases import make_incident

DAY = timedelta(days=1)
ENVIRON = {"T_LEAD": "lead-token", "T_LEAD_B": "lead-b-token", "T_OPERATOR": "op-token"}


async def resolved_at(journal: InMemoryJournal, subject: str, at: datetime) -> str:
    change = IncidentChange(incident=make_incident(subject, opened_at=at - DAY))
    await journal.record(change, now=at - DAY)
    done = dataclasses.replace(change, resolved_at=at, resolve_reason=ResolveReason.CLEARED)
    await journal.record(done, now=at)
    return change.incident.id


def write_config(path: Path, retention_days: int, stamp: int) -> None:
    document = {**sample_document(path.parent), "journal": {"retentionDays": retention_days}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.utime(path, (stamp, stamp))


async def test_the_service_purges_what_is_older_than_the_configured_retention(
    tmp_path: Path,
) -> None:
    """The ``journal-retention`` loop of a built service deletes incidents resolved more than
    ``retentionDays`` ago and keeps younger ones; a reload of the key applies to the next pass."""
    path = tmp_path / "fleetd.yaml"
    write_config(path, 7, 1_000)
    clock = FakeClock()
    journal = InMemoryJournal()
    service = build_service(
        ConfigRef.load(path, ENVIRON, now=clock.now()),
        environ=ENVIRON,
        clock=clock,
        control=FakeAgentControl(),
        inbox=InMemoryInbox(),
        worktrees=FakeWorktrees(),
        journal=journal,
    )
    now = clock.now()
    old = await resolved_at(journal, "sess_old", now - 8 * DAY)
    young = await resolved_at(journal, "sess_young", now - 6 * DAY)
    await service.scheduler.run_once("journal-retention")
    assert await journal.get(old) is None
    assert await journal.get(young) is not None
    write_config(path, 5, 2_000)
    await service.scheduler.run_once("config")
    assert service.config.current.journal.retention_days == 5
    await service.scheduler.run_once("journal-retention")
    assert await journal.get(young) is None


async def test_a_pass_deletes_in_bounded_batches() -> None:
    """At most ``batches`` purges of ``batch`` incidents per pass; the rest waits for the next."""
    clock = FakeClock()
    journal = InMemoryJournal()
    for n in range(5):
        await resolved_at(journal, f"sess_{n}", clock.now() - 40 * DAY + n * timedelta(minutes=1))
    retention = JournalRetention(
        journal, retention=lambda: 30 * DAY, clock=clock, batch=2, batches=2
    )
    assert await retention.step() == 4
    assert await retention.step() == 1
    assert await retention.step() == 0


async def test_a_failing_journal_ends_the_pass_without_raising() -> None:
    """The journal's own health reports the failure; the pass deletes nothing and returns."""
    clock = FakeClock()
    journal = InMemoryJournal()
    await resolved_at(journal, "sess_old", clock.now() - 40 * DAY)
    journal.fail_with = JournalUnavailableError("purge", "unreachable")
    retention = JournalRetention(journal, retention=lambda: 30 * DAY, clock=clock)
    assert await retention.step() == 0
    journal.fail_with = None
    assert await retention.step() == 1
