"""The pane budget (M4 §6.1): compiled brakes config cannot loosen, and fair rotation."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from fleetd.config.floors import MAX_PANE_READS_PER_TICK
from fleetd.health import (
    HealthSettings,
    LiveStatus,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    Scope,
    SessionState,
)
from fleetd.health.pane_budget import ProbeCandidate, ProbeReason, allocate
from fleetd.health.settings import Effective
from tests.unit.health.health_fleet import T0, TICK, Run, agent, live, member, turn

COOLDOWN = timedelta(seconds=60)


def candidate(target: str, reason: ProbeReason = ProbeReason.WORKING_SUSPECT) -> ProbeCandidate:
    return ProbeCandidate(
        target=target,
        pane_id=f"w1:{target}",
        source=None,
        reason=reason,
        scope=Scope.MEMBER,
        subject=f"s-{target}",
    )


def test_at_most_two_reads_one_per_target() -> None:
    """Ten eligible targets, two candidates for one of them: two grants, distinct targets."""
    candidates = [candidate(f"t{i}") for i in range(10)] + [
        candidate("t0", ProbeReason.LOST_BOUNDARY),
        candidate("t0", ProbeReason.SUSTAINED_UNKNOWN),
    ]
    granted, _, recent = allocate(candidates, cursor="", recent={}, now=T0, cooldown=COOLDOWN)
    assert len(granted) == MAX_PANE_READS_PER_TICK == 2
    assert len({g.target for g in granted}) == 2
    assert granted[0].reason is ProbeReason.LOST_BOUNDARY
    assert recent == {g.target: T0 for g in granted}


def test_rotation_is_fair_and_wraps() -> None:
    """Targets are served in name order after the cursor, wrapping around."""
    names = ["a", "b", "c", "d", "e"]
    cursor, served = "", []
    for _ in range(5):
        granted, cursor, _ = allocate(
            [candidate(n) for n in names], cursor=cursor, recent={}, now=T0, cooldown=COOLDOWN
        )
        served += [g.target for g in granted]
    assert served == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]


def test_cooldown_blocks_a_recent_target_and_expires() -> None:
    """A target granted less than the cooldown ago is skipped; old grants leave the map."""
    recent = {"a": T0 - timedelta(seconds=59), "old": T0 - timedelta(seconds=600)}
    granted, cursor, kept = allocate(
        [candidate("a")], cursor="z", recent=recent, now=T0, cooldown=COOLDOWN
    )
    assert granted == ()
    assert cursor == "z"
    assert kept == {"a": T0 - timedelta(seconds=59)}
    later = T0 + timedelta(seconds=1)
    granted, _, kept = allocate(
        [candidate("a")], cursor="z", recent=kept, now=later, cooldown=COOLDOWN
    )
    assert [g.target for g in granted] == ["a"]
    assert kept == {"a": later}


def test_a_subject_that_returns_does_not_reset_its_pane_cooldown() -> None:
    """The cooldown belongs to the pane target, so a member leaving the view cannot reset it."""
    run = Run()
    busy = member(state=SessionState.BUSY, turn=turn())
    blocked = live(agent("m1", LiveStatus.BLOCKED))
    run.tick(blocked, [busy])
    run.tick(blocked, [busy], advance=timedelta(seconds=5))
    assert run.reads() == 1
    run.tick(blocked, [], advance=timedelta(seconds=5))
    run.tick(blocked, [busy], advance=timedelta(seconds=5))
    run.tick(blocked, [busy], advance=timedelta(seconds=5))
    assert run.reads() == 0
    run.tick(blocked, [busy], advance=timedelta(seconds=45))
    assert run.reads() == 1


def test_floors_raise_config_values() -> None:
    """Zero or tiny config values are raised to the compiled floors, never the other way."""
    eff = Effective.of(
        HealthSettings(
            working_suspect_after=timedelta(0),
            pane_probe_interval=timedelta(seconds=1),
            lead_unresponsive_after=timedelta(0),
            capacity_long_idle_after=timedelta(0),
        )
    )
    assert eff.pane_cooldown == timedelta(seconds=60)
    assert eff.working_suspect_after == timedelta(seconds=300)
    assert eff.lead_unresponsive_after == timedelta(seconds=120)
    assert eff.long_idle_after == timedelta(seconds=300)
    generous = Effective.of(HealthSettings(pane_probe_interval=timedelta(seconds=600)))
    assert generous.pane_cooldown == timedelta(seconds=600)


def test_negative_settings_are_rejected() -> None:
    """A negative duration is a bug at the edge, not a setting."""
    with pytest.raises(ValueError, match="pane_probe_interval"):
        HealthSettings(pane_probe_interval=timedelta(seconds=-1))


def test_first_progress_read_waits_three_hundred_seconds_whatever_the_config() -> None:
    """A working pane is not read before five minutes even when config says zero."""
    run = Run(settings=HealthSettings(working_suspect_after=timedelta(0)))
    busy = member(state=SessionState.BUSY, turn=turn(at=T0))
    ages = []
    for _ in range(12):
        run.tick(live(agent("m1", LiveStatus.WORKING)), [busy])
        if run.reads():
            ages.append(run.now - T0)
    assert ages[0] == timedelta(seconds=300)


def test_per_target_cooldown_holds_whatever_the_config() -> None:
    """With a one-second interval configured, one pane is still read at most once a minute."""
    run = Run(settings=HealthSettings(pane_probe_interval=timedelta(seconds=1)))
    busy = member(state=SessionState.BUSY, turn=turn(at=T0))
    read_at = []
    for _ in range(60):
        run.tick(live(agent("m1", LiveStatus.WORKING)), [busy], advance=timedelta(seconds=15))
        if run.reads():
            read_at.append(run.now)
    gaps = {b - a for a, b in itertools.pairwise(read_at)}
    assert gaps == {timedelta(seconds=60)}


def test_lost_boundary_repairs_spend_the_same_budget() -> None:
    """Three stable lost boundaries: two repairs now, the third next tick."""
    run = Run()
    names = ["m1", "m2", "m3"]
    views = [member(n, state=SessionState.BUSY, turn=turn(f"tok-{n}")) for n in names]
    agents = [agent(n, LiveStatus.DONE) for n in names]
    run.tick(live(*agents), views)
    run.tick(live(*agents), views)
    first = [e.target for e in run.effects(RequestLostBoundaryRepair)]
    run.tick(live(*agents), views)
    second = [e.target for e in run.effects(RequestLostBoundaryRepair)]
    assert sorted(first + second) == names
    assert len(first) == 2
    assert len(second) == 1


def test_unanswered_read_is_retried_only_after_the_cooldown() -> None:
    """A read whose result never came back counts against the cooldown like any other."""
    run = Run()
    busy = member(state=SessionState.BUSY, turn=turn())
    blocked = live(agent("m1", LiveStatus.BLOCKED))
    reads = []
    for _ in range(8):
        run.tick(blocked, [busy], advance=TICK)
        reads += run.effects(RequestPaneProbe)
    assert len(reads) == 4  # ticks 2, 4, 6, 8: every 60 s
