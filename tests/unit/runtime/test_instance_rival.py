"""Two processes serving one instance name on a shared journal (two configs naming one
instance, each with its own state store, which no lock of the store sees): found from the
instance's row within a renewal, the one that started later stops, the other says so once; a
restart or a standby taking over a dead run's row is no rival."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

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


async def test_the_later_of_two_processes_on_one_name_stops_the_other_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``first`` and ``second`` both call themselves ``a``. Each renewal of one overwrites the
    other's: by its second renewal each sees a run that is not its own. The later (start, run)
    is displaced once — an ERROR naming the other's run and host, ``on_displaced`` called
    with the other's row — and the earlier logs one WARNING, however many passes follow."""
    journal = InMemoryJournal()
    first = shared_fleet(tmp_path / "first", journal, "a")
    second = shared_fleet(tmp_path / "second", journal, "a")
    stops = {"first": _watching(first), "second": _watching(second)}
    caplog.set_level(logging.WARNING, logger="fleetd.instances")
    await _pass(first, second)  # the first renewal of each: a row it never wrote is no rival's
    assert stops == {"first": [], "second": []}
    for _ in range(4):
        await _pass(first, second)
    watches = {"first": first.service.instances, "second": second.service.instances}
    later = max(watches, key=lambda n: (watches[n].started_at, watches[n].run))
    earlier = "first" if later == "second" else "second"
    [rival] = stops[later]
    assert rival.run == watches[earlier].run
    assert stops[earlier] == []
    assert watches[later].displaced_by == rival
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1
    assert watches[earlier].run in errors[0]
    assert "this one started later and stops" in errors[0]
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
