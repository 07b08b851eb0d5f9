"""Two processes serving one instance name on a shared journal (two configs naming one
instance, each with its own state store, which no lock of the store sees): found from the
instance's row within a renewal, the one that started later stops, the other says so once; a
restart or a standby taking over a dead run's row is no rival."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from fleetd.errors import JournalError
from fleetd.health.states import Scope
from fleetd.journal.memory import InMemoryJournal
from fleetd.journal.values import InstanceRecord
from fleetd.testing import TestFleet
from tests.unit.api.test_fleet_all_get import shared_fleet


def _watching(fleet: TestFleet) -> list[InstanceRecord]:
    displaced: list[InstanceRecord] = []
    fleet.service.instances.on_displaced = displaced.append
    return displaced


async def _pass(*fleets: TestFleet) -> None:
    for fleet in fleets:
        fleet.clock.advance(15)
        await fleet.service.scheduler.run_once("instances")


@pytest.mark.parametrize("second_clock", [0, -7200, 7200])
async def test_the_later_of_two_processes_on_one_name_stops_the_other_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, second_clock: int
) -> None:
    """``first`` and ``second`` both call themselves ``a``; ``second`` starts while ``first``
    serves, its clock right, two hours behind or ahead (no clock is compared: a newcomer whose
    clock ran behind made the long-running one stop). Each renewal of one overwrites the
    other's: by its second renewal each sees a run that is not its own. ``second``, whose first
    renewal found ``first``'s run in the row, is displaced once — an ERROR naming ``first``'s
    run and host, ``on_displaced`` called with its row — and ``first`` logs one WARNING,
    however many passes follow."""
    journal = InMemoryJournal()
    first = shared_fleet(tmp_path / "first", journal, "a")
    await _pass(first)
    second = shared_fleet(tmp_path / "second", journal, "a")
    second.service.instances.started_at += timedelta(seconds=second_clock)
    stops = {"first": _watching(first), "second": _watching(second)}
    caplog.set_level(logging.WARNING, logger="fleetd.instances")
    await _pass(second)  # its first renewal: a row it never wrote is no rival's
    assert stops == {"first": [], "second": []}
    for _ in range(4):
        await _pass(first, second)
    [rival] = stops["second"]
    assert rival.run == first.service.instances.run
    assert stops["first"] == []
    assert second.service.instances.displaced_by == rival
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1
    assert first.service.instances.run in errors[0]
    assert "so this one stops" in errors[0]
    assert len([w for w in warnings if "also served by run" in w]) == 1


async def test_a_restart_and_a_dead_runs_row_are_no_rival(tmp_path: Path) -> None:
    """A process renews, dies; another run of the same instance starts and renews over the dead
    run's row, again and again: never displaced, nothing logged as a rival."""
    journal = InMemoryJournal()
    dead = shared_fleet(tmp_path / "dead", journal, "a")
    await _pass(dead)
    restarted = shared_fleet(tmp_path / "restarted", journal, "a")
    stops = _watching(restarted)
    for _ in range(4):
        await _pass(restarted)
    assert stops == []
    [row] = await journal.instances()
    assert row.run == restarted.service.instances.run


async def _instance_incidents(journal: InMemoryJournal) -> dict[str, str]:
    snapshot = await journal.load_open()
    return {
        kept.incident.subject: kept.incident.id
        for kept in snapshot.open_incidents
        if kept.incident.scope is Scope.INSTANCE
    }


async def _watch(*fleets: TestFleet, seconds: int = 15) -> None:
    for fleet in fleets:
        fleet.clock.advance(seconds)
        await fleet.service.scheduler.run_once("instances")
        await fleet.service.scheduler.run_once("webhook")


async def _dead_paged(
    tmp_path: Path,
) -> tuple[InMemoryJournal, TestFleet, TestFleet, dict[str, str]]:
    """``a``, ``b`` and ``dead`` renew once; ``dead`` stops, and ``a`` pages it."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    b = shared_fleet(tmp_path / "b", journal, "b")
    dead = shared_fleet(tmp_path / "dead", journal, "dead")
    await _watch(a, b, dead)
    for _ in range(4):
        await _watch(a, b)
    opened = await _instance_incidents(journal)
    assert list(opened) == ["dead"]
    return journal, a, b, opened


async def test_a_journal_outage_neither_clears_a_down_instance_nor_pages_a_live_one(
    tmp_path: Path,
) -> None:
    """``dead`` renews once and stops; ``a`` pages it. The journal then fails for ten
    intervals, for everyone: ``b`` cannot renew either. When it answers again, ``a`` neither
    resolves ``dead``'s incident (its row did not change: a false ``resolved`` and a second page
    followed every outage) nor pages ``b``, which renews within its interval."""
    journal, a, b, opened = await _dead_paged(tmp_path)
    journal.fail_with = JournalError("instances", "timeout")
    for _ in range(10):
        await _watch(a, b)
    journal.fail_with = None
    await _watch(a)  # back: a reads first, before b could renew
    assert await _instance_incidents(journal) == opened
    for _ in range(3):
        await _watch(a, b)
    assert await _instance_incidents(journal) == opened


async def test_before_its_first_read_an_instance_leaves_the_others_incidents_alone(
    tmp_path: Path,
) -> None:
    """``late``, its clock two hours ahead, starts while ``a``'s INSTANCE_DOWN incident for
    ``dead`` is open: its delivery passes before its first read of the rows record nothing for
    ``a``'s incident (a reminder went out 0.3 s after such a start), nor after it (``a`` is
    live: its incident is its to remind)."""
    journal = InMemoryJournal()
    a = shared_fleet(tmp_path / "a", journal, "a")
    dead = shared_fleet(tmp_path / "dead", journal, "dead")
    await _watch(a, dead)
    for _ in range(4):
        await _watch(a)
    [incident_id] = (await _instance_incidents(journal)).values()
    before = await journal.get(incident_id)
    late = shared_fleet(tmp_path / "late", journal, "late")
    late.clock.advance(2 * 3600)
    assert not late.service.instances.sweeps("a")
    for loop in ("webhook", "webhook", "instances", "webhook"):
        await late.service.scheduler.run_once(loop)
    assert not late.service.instances.sweeps("a")
    assert late.service.instances.sweeps("late")
    after = await journal.get(incident_id)
    assert after is not None
    assert before is not None
    assert [e.type for e in after.events] == [e.type for e in before.events]


async def test_a_restarted_opener_neither_clears_a_down_instance_nor_pages_it_again(
    tmp_path: Path,
) -> None:
    """``a`` pages ``dead``; ``a`` restarts (a new process of the same instance). Its first
    reads see ``dead``'s row afresh: the incident stands — no ``resolved`` — and nobody opens
    another for it (a restart of the opener resolved it at once, and it was paged again two
    intervals later)."""
    journal, a, b, opened = await _dead_paged(tmp_path)
    again = shared_fleet(tmp_path / "a-again", journal, "a")
    again.clock.advance((a.clock.now() - again.clock.now()).total_seconds())
    for _ in range(6):
        await _watch(again, b)
        assert await _instance_incidents(journal) == opened
