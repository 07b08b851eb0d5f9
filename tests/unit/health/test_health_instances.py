"""INSTANCE_DOWN (issue 24): the table of :func:`judge_instances` and the incident it opens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetd.health.incidents import ResolveReason, Route, RoutingReason
from fleetd.health.instances import (
    INSTANCE_CAUSE,
    InstanceSeen,
    InstanceVerdict,
    instance_down_incident,
    instance_is_down,
    instance_key,
    judge_instances,
)
from fleetd.health.states import Certainty, InstanceState, Scope, Severity

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
INTERVAL = timedelta(seconds=30)
C, R = ResolveReason.CLEARED, ResolveReason.SUBJECT_RETIRED


def ago(seconds: int) -> datetime:
    return T0 - timedelta(seconds=seconds)


# name, rows (instance -> seconds since its renewal), open incidents (subject -> opener),
# me, verdict
CASES: list[tuple[str, dict[str, int], dict[str, str | None], str, InstanceVerdict]] = [
    ("all renewing: nothing", {"a": 0, "b": 30}, {}, "a", InstanceVerdict()),
    ("exactly two intervals old is still live", {"a": 0, "b": 60}, {}, "a", InstanceVerdict()),
    ("past two intervals: down", {"a": 0, "b": 61}, {}, "a", InstanceVerdict(down=("b",))),
    (
        "every live instance asks to open it (the journal keeps the first)",
        {"a": 0, "b": 61, "c": 0},
        {},
        "c",
        InstanceVerdict(down=("b",)),
    ),
    ("never judges itself, however stale its row", {"a": 600}, {}, "a", InstanceVerdict()),
    ("its own first renewal not written yet", {"b": 0}, {}, "a", InstanceVerdict()),
    (
        "down with an incident open: nothing more",
        {"a": 0, "b": 90},
        {"b": "a"},
        "a",
        InstanceVerdict(),
    ),
    (
        "renews again: the opener resolves it",
        {"a": 0, "b": 0},
        {"b": "a"},
        "a",
        InstanceVerdict(resolve=(("b", C),)),
    ),
    (
        "renews again: not for another live instance",
        {"a": 0, "b": 0, "c": 0},
        {"b": "a"},
        "c",
        InstanceVerdict(),
    ),
    (
        "opener gone: the first live instance by name resolves it",
        {"a": 0, "b": 0, "c": 0},
        {"b": "zed"},
        "a",
        InstanceVerdict(resolve=(("b", C),)),
    ),
    (
        "opener unknown (None): the first live instance by name resolves it",
        {"a": 0, "b": 0},
        {"b": None},
        "a",
        InstanceVerdict(resolve=(("b", C),)),
    ),
    (
        "the subject itself, back, resolves its own when it comes first",
        {"b": 0, "c": 0},
        {"b": "x"},
        "b",
        InstanceVerdict(resolve=(("b", C),)),
    ),
    (
        "row gone (retired): resolved as subject_retired",
        {"a": 0},
        {"b": "a"},
        "a",
        InstanceVerdict(resolve=(("b", R),)),
    ),
    (
        "several at once, sorted",
        {"a": 0, "c": 100, "d": 100, "e": 0},
        {"e": "a", "b": "a"},
        "a",
        InstanceVerdict(down=("c", "d"), resolve=(("b", R), ("e", C))),
    ),
]


@pytest.mark.parametrize(
    ("rows", "open_down", "me", "verdict"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_judge_instances_table(
    rows: dict[str, int], open_down: dict[str, str | None], me: str, verdict: InstanceVerdict
) -> None:
    """Each row of the rule's table: who is down, which incident this instance resolves."""
    seen = [InstanceSeen(instance=name, last_seen=ago(age)) for name, age in rows.items()]
    assert judge_instances(seen, me=me, open_down=open_down, now=T0, interval=INTERVAL) == verdict


def test_the_incident_is_about_the_instance_and_routed_to_a_person() -> None:
    """Scope ``instance``, subject the instance's name, a stable cause, critical and strong,
    routed to a person at routing generation 1; its id depends on the namespace (the run) and
    the generation, never on the time."""
    incident = instance_down_incident("host-b", generation=3, now=T0, namespace="r0000beef")
    assert incident.key == instance_key("host-b")
    assert (incident.scope, incident.subject, incident.state) == (
        Scope.INSTANCE,
        "host-b",
        InstanceState.INSTANCE_DOWN,
    )
    assert incident.key.cause == INSTANCE_CAUSE
    assert (incident.severity, incident.certainty) == (Severity.CRITICAL, Certainty.STRONG)
    assert incident.route is Route.HUMAN
    assert incident.routing_reason is RoutingReason.HUMAN_INSTANCE_DOWN
    assert incident.routing_generation == 1
    assert (incident.generation, incident.opened_at) == (3, T0)
    later = instance_down_incident("host-b", generation=3, now=T0 + INTERVAL, namespace="r0000beef")
    assert later.id == incident.id
    other_run = instance_down_incident("host-b", generation=3, now=T0, namespace="r0000cafe")
    assert other_run.id != incident.id


@pytest.mark.parametrize(
    ("seconds", "down"), [(0, False), (59, False), (60, False), (61, True), (3600, True)]
)
def test_an_instance_is_down_past_two_intervals_of_silence(seconds: int, down: bool) -> None:
    """The rule the fleet view shares with INSTANCE_DOWN: silent for more than two snapshot
    intervals is down, exactly two is still live."""
    assert instance_is_down(ago(seconds), now=T0, interval=INTERVAL) is down
