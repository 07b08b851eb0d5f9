"""Capacity (M4 §9): one live count shared with placement, a bounded summary, no incidents."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from fleetd.health import (
    CapacityRow,
    FleetSnapshot,
    LiveView,
    MemberView,
    OpenIncident,
    ProfileCapacityInput,
    SessionState,
    capacity_rows,
    capacity_summary,
    holds_capacity,
    idle_for_seconds,
    is_reclaimable,
    live_count,
)
from fleetd.health.capacity import capacity_row, free_slots
from tests.unit.health.health_fleet import T0, Run, agent, live, member, turn

S = SessionState


@pytest.mark.parametrize(
    ("state", "counts"),
    [
        (S.SPAWNING, True),
        (S.READY, True),
        (S.BUSY, True),
        (S.DONE, True),
        (S.FAILED, True),
        (S.RELEASED, False),
    ],
)
def test_a_member_holds_capacity_until_released(state: SessionState, counts: bool) -> None:
    """Every state but RELEASED holds a slot, including FAILED before teardown."""
    assert holds_capacity(state) is counts
    assert live_count("sonnet", [member(state=state)]) == int(counts)


@dataclass(frozen=True)
class PlacementSession:
    """What placement holds: any object with a profile and a session-state value."""

    profile: str
    session_state: str


def test_placement_objects_use_the_same_count() -> None:
    """Placement's own session records count exactly as the fleet view does."""
    sessions = [
        PlacementSession("opus", "busy"),
        PlacementSession("opus", "released"),
        PlacementSession("opus", "failed"),
        PlacementSession("sonnet", "ready"),
    ]
    assert live_count("opus", sessions) == 2
    assert live_count("haiku", sessions) == 0


def test_rows_report_cap_live_free_and_reclaimable() -> None:
    """free is max(0, cap - live); unlimited profiles have no cap and no free figure."""
    members = [
        member("a", profile="opus", state=S.BUSY, turn=turn()),
        member("b", profile="opus", state=S.DONE),
        member("c", profile="opus", state=S.READY, queued_sends=1),
        member("d", profile="opus", state=S.RELEASED),
        member("e", profile="haiku", state=S.FAILED),
        member("f", profile="haiku", state=S.READY, pending_tasks=1),
        member("g", profile="opus", state=S.DONE, uncollected_replies=1),
    ]
    rows = capacity_rows(
        [ProfileCapacityInput(profile="opus", max_load=3), ProfileCapacityInput(profile="idle")],
        members,
    )
    assert rows == (
        CapacityRow(profile="haiku", max_load=None, live=2, free=None, reclaimable=1),
        CapacityRow(profile="idle", max_load=None, live=0, free=None, reclaimable=0),
        CapacityRow(profile="opus", max_load=3, live=4, free=0, reclaimable=1),
    )


def test_orphans_of_a_previous_run_fill_slots_and_are_never_reclaimable() -> None:
    """An orphan counts toward its profile's live figure, even a profile no longer configured."""
    orphans = [
        PlacementSession("opus", "orphaned"),
        PlacementSession("gone", "orphaned"),
    ]
    rows = capacity_rows(
        [ProfileCapacityInput(profile="opus", max_load=2)],
        [member("a", profile="opus", state=S.READY)],
        orphans=orphans,
    )
    assert rows == (
        CapacityRow(profile="gone", max_load=None, live=1, free=None, reclaimable=0, orphaned=1),
        CapacityRow(profile="opus", max_load=2, live=2, free=0, reclaimable=1, orphaned=1),
    )


@pytest.mark.parametrize(
    ("max_load", "live", "benched", "free"),
    [
        (2, 1, False, 1),
        (2, 2, False, 0),
        (2, 5, False, 0),
        (None, 7, False, None),
        (2, 1, True, 0),  # a benched profile has no free slot, whatever its load
        (2, 0, True, 0),
        (None, 0, True, 0),  # not even an unlimited one
    ],
)
def test_a_row_has_free_slots_only_while_its_model_is_not_benched(
    max_load: int | None, live: int, benched: bool, free: int | None
) -> None:
    """Issue 20 3a: one row for placement, fleet_list and the heartbeat; benched means free 0."""
    until = T0 + timedelta(minutes=5) if benched else None
    inputs = ProfileCapacityInput(profile="sonnet", max_load=max_load, benched_until=until)
    row = capacity_row(inputs, live)
    assert (row.live, row.max_load, row.free) == (live, max_load, free)
    assert (row.benched, row.benched_until) == (benched, until)
    assert free_slots(max_load, live, benched=benched) == free


def test_rows_carry_each_profile_bench() -> None:
    """capacity_rows builds every profile's row with capacity_row: the bench comes along."""
    until = T0 + timedelta(minutes=5)
    rows = capacity_rows(
        [
            ProfileCapacityInput(profile="sonnet", max_load=2, benched_until=until),
            ProfileCapacityInput(profile="opus", max_load=2),
        ],
        [member("a", profile="sonnet", state=S.READY)],
    )
    assert rows == (
        CapacityRow(profile="opus", max_load=2, live=0, free=2, reclaimable=0),
        CapacityRow(
            profile="sonnet", max_load=2, live=1, free=0, reclaimable=1, benched_until=until
        ),
    )


def test_summary_fingerprint_moves_when_a_model_is_benched() -> None:
    """A bench is news for the heartbeat: the same fleet with its model down fingerprints anew."""
    ages = {"m1": timedelta(minutes=30)}
    up = capacity_summary(fleet(ages), T0)
    benched = FleetSnapshot(
        live=LiveView(list_ok=True),
        members=fleet(ages).members,
        profiles=(
            ProfileCapacityInput(
                profile="sonnet", max_load=8, benched_until=T0 + timedelta(minutes=5)
            ),
        ),
    )
    down = capacity_summary(benched, T0)
    assert down.fingerprint != up.fingerprint
    assert (down.rows[0].free, down.rows[0].benched) == (0, True)


def test_cap_must_be_positive() -> None:
    """A zero cap is a config error, not a profile that can never run."""
    with pytest.raises(ValueError, match="max_load"):
        ProfileCapacityInput(profile="opus", max_load=0)


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        (member(state=S.READY, since=T0), 600),
        (member(state=S.DONE, since=T0), 600),
        (member(state=S.DONE, since=T0, uncollected_replies=1), None),
        (member(state=S.READY, since=T0, pending_tasks=1), None),
        (member(state=S.FAILED, since=T0), None),
        (member(state=S.BUSY, turn=turn()), None),
        (member(state=S.READY, turn=turn(delivered=False)), None),
    ],
)
def test_idle_rule_needs_no_turn_no_pending_send_and_no_waiting_reply(
    view: MemberView, expected: int | None
) -> None:
    """Idle seconds only for READY or DONE without an accepted turn or an uncollected reply."""
    assert idle_for_seconds(view, T0 + timedelta(minutes=10)) == expected


def test_reclaimable_means_holding_capacity_without_open_work() -> None:
    """Open bridge work of any kind makes a member not reclaimable."""
    assert is_reclaimable(member(state=S.DONE))
    assert not is_reclaimable(member(state=S.DONE, uncollected_replies=1))
    assert not is_reclaimable(member(state=S.DONE, queued_sends=1))
    assert not is_reclaimable(member(state=S.BUSY, turn=turn()))


def fleet(idle_since: dict[str, timedelta]) -> FleetSnapshot:
    members = tuple(
        member(name, state=S.READY, since=T0 - age) for name, age in sorted(idle_since.items())
    )
    return FleetSnapshot(
        live=LiveView(list_ok=True),
        members=members,
        profiles=(ProfileCapacityInput(profile="sonnet", max_load=8),),
    )


def test_summary_lists_at_most_three_longest_idle_members() -> None:
    """The heartbeat summary is bounded: the three longest-idle members, longest first."""
    ages = {f"m{i}": timedelta(minutes=20 + i) for i in range(6)} | {"young": timedelta(minutes=1)}
    summary = capacity_summary(fleet(ages), T0)
    assert [m.name for m in summary.long_idle] == ["m5", "m4", "m3"]
    assert summary.long_idle[0].idle_for_seconds == 25 * 60
    assert summary.rows[0].live == 7


def test_summary_fingerprint_ignores_idle_durations() -> None:
    """A static idle fleet keeps its fingerprint as time passes; a new member changes it."""
    ages = {f"m{i}": timedelta(minutes=20 + i) for i in range(4)}
    first = capacity_summary(fleet(ages), T0)
    later = capacity_summary(fleet(ages), T0 + timedelta(hours=5))
    assert first.fingerprint == later.fingerprint
    assert first.long_idle != later.long_idle
    grown = capacity_summary(fleet(ages | {"m9": timedelta(0)}), T0)
    assert grown.fingerprint != first.fingerprint


def test_full_or_idle_capacity_never_opens_an_incident() -> None:
    """A profile at its cap and long-idle members are facts, never incidents."""
    run = Run()
    views = [member(f"m{i}", profile="opus", state=S.DONE) for i in range(4)]
    agents = [agent(f"m{i}") for i in range(4)]
    for _ in range(5):
        run.tick(
            live(*agents),
            views,
            profiles=[ProfileCapacityInput(profile="opus", max_load=4)],
            advance=timedelta(hours=3),
        )
        assert not run.effects(OpenIncident)


def test_summary_rows_count_every_lead_and_list_only_the_owners_idle_members() -> None:
    """Heartbeat rows count all live members, as placement does; the idle list is the lead's."""
    views = (
        member("mine", state=S.READY, since=T0 - timedelta(hours=1), owner="lead-a"),
        member("theirs", state=S.READY, since=T0 - timedelta(hours=2), owner="lead-b"),
    )
    snapshot = FleetSnapshot(
        live=LiveView(list_ok=False),
        members=views,
        profiles=(ProfileCapacityInput(profile="sonnet", max_load=2),),
    )
    summary = capacity_summary(snapshot, T0, owner="lead-a")
    assert summary.rows == (
        CapacityRow(profile="sonnet", max_load=2, live=2, free=0, reclaimable=2),
    )
    assert [m.name for m in summary.long_idle] == ["mine"]
