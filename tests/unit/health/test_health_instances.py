"""INSTANCE_DOWN (issue 24): the table of :func:`judge_instances`, how rows are sighted
(:func:`sight`: each instance by its own interval, on the judge's own clock) and the incident it
opens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetd.health.incidents import ResolveReason, Route, RoutingReason
from fleetd.health.instances import (
    INSTANCE_CAUSE,
    InstanceSeen,
    InstanceVerdict,
    Sighting,
    instance_down_incident,
    instance_is_down,
    instance_key,
    judge_instances,
    sight,
)
from fleetd.health.states import Certainty, InstanceState, Scope, Severity

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
INTERVAL = timedelta(seconds=30)
C, R = ResolveReason.CLEARED, ResolveReason.SUBJECT_RETIRED


def ago(seconds: int) -> datetime:
    return T0 - timedelta(seconds=seconds)


# name, rows (instance -> seconds since it was seen renewing), open incidents (subject -> opener),
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
    sighted = {
        name: Sighting(last_seen=ago(age), since=ago(age), every=INTERVAL)
        for name, age in rows.items()
    }
    verdict_now = judge_instances(
        sighted, me=me, open_down=open_down, now=T0, judging_since=T0 - timedelta(hours=1)
    )
    assert verdict_now == verdict


def _row(name: str, last_seen: datetime, every: int | None = 30) -> InstanceSeen:
    return InstanceSeen(
        instance=name,
        last_seen=last_seen,
        every=None if every is None else timedelta(seconds=every),
    )


def test_a_row_is_seen_renewing_when_it_changes_on_the_judges_clock() -> None:
    """A new row and a changed row are seen renewing at the read; a row that did not change
    keeps the time it was first read. The renewal written in the row (another host's clock,
    here nine hours off) is only compared with itself."""
    skewed = T0 + timedelta(hours=9)
    first = sight({}, [_row("b", skewed)], now=T0, interval=INTERVAL)
    assert first == {"b": Sighting(last_seen=skewed, since=T0, every=INTERVAL, renewed=False)}
    assert not first["b"].renewing(T0)  # read once: not yet seen to renew
    later = T0 + timedelta(seconds=50)
    same = sight(first, [_row("b", skewed)], now=later, interval=INTERVAL)
    assert same["b"].since == T0
    assert not same["b"].down(T0 + timedelta(seconds=60))
    assert same["b"].down(T0 + timedelta(seconds=61))
    renewed = sight(same, [_row("b", skewed - timedelta(days=3))], now=later, interval=INTERVAL)
    assert renewed["b"].since == later  # a clock that jumped back still renewed
    assert renewed["b"].renewing(later)
    assert sight(renewed, [], now=later, interval=INTERVAL) == {}  # a row gone is forgotten


@pytest.mark.parametrize(
    ("every", "judged_by"), [(60, 60), (15, 15), (None, 30), (0, 30), (-5, 30)]
)
def test_each_row_is_judged_by_its_own_interval(every: int | None, judged_by: int) -> None:
    """The interval a row states is the one it is judged by; a row from an older build (none)
    or one stating a nonsensical interval is judged by the judge's own."""
    [seen] = sight({}, [_row("b", T0, every)], now=T0, interval=INTERVAL).values()
    assert seen.every == timedelta(seconds=judged_by)
    assert not seen.down(T0 + 2 * seen.every)
    assert seen.down(T0 + 2 * seen.every + timedelta(milliseconds=1))


@pytest.mark.parametrize(("judge_every", "other_every"), [(15, 60), (60, 15), (30, 30), (1, 3600)])
@pytest.mark.parametrize("skew_hours", [-5, 0, 7])
def test_instances_at_different_intervals_and_clocks_never_page_each_other(
    judge_every: int, other_every: int, skew_hours: int
) -> None:
    """A judge at one interval watching an instance that renews at another, with its clock
    hours off, over many passes: never down while it renews; down within two of its intervals
    and one pass of the judge after it stops (hosts at 60 s and 15 s paged each other every
    minute; a clock skew between hosts paged a live instance)."""
    skew = timedelta(hours=skew_hours)
    judge, other = timedelta(seconds=judge_every), timedelta(seconds=other_every)
    horizon = 8 * max(judge, other)
    sighted: dict[str, Sighting] = {}
    renewed_at = T0
    now = T0
    while now <= T0 + horizon:
        while renewed_at + other <= now:
            renewed_at += other  # it renews on time, by its own clock
        rows = [_row("b", renewed_at + skew, other_every), _row("a", now, judge_every)]
        sighted = sight(sighted, rows, now=now, interval=judge)
        verdict = judge_instances(sighted, me="a", open_down={}, now=now, judging_since=T0)
        assert verdict == InstanceVerdict(), now
        now += judge
    stopped = renewed_at  # it renews no more
    while not judge_instances(sighted, me="a", open_down={}, now=now, judging_since=T0).down:
        rows = [_row("b", stopped + skew, other_every), _row("a", now, judge_every)]
        sighted = sight(sighted, rows, now=now, interval=judge)
        now += judge
    assert now - stopped <= 2 * other + 2 * judge


def test_after_an_outage_rows_get_two_intervals_and_a_down_one_stays_down() -> None:
    """An outage every instance shared: none could renew, and the judge could not read. Judging
    again from the end of the outage (``judging_since``), ``b`` — not seen to change for ten
    minutes — is not paged for two of its intervals; ``dead``, down before the outage with its
    incident open, is neither resolved nor paged again: its row did not change."""
    back = T0
    stale = {
        "b": Sighting(last_seen=ago(600), since=ago(600), every=INTERVAL),
        "dead": Sighting(last_seen=ago(3600), since=ago(3600), every=INTERVAL),
    }
    open_down: dict[str, str | None] = {"dead": "a"}
    assert judge_instances(
        stale, me="a", open_down=open_down, now=T0, judging_since=ago(3600)
    ) == InstanceVerdict(down=("b",))
    for now in (back, back + 2 * INTERVAL):
        verdict = judge_instances(stale, me="a", open_down=open_down, now=now, judging_since=back)
        assert verdict == InstanceVerdict(), now
    later = back + 2 * INTERVAL + timedelta(seconds=1)
    verdict = judge_instances(stale, me="a", open_down=open_down, now=later, judging_since=back)
    assert verdict == InstanceVerdict(down=("b",))
    renewed = sight(
        stale, [_row("dead", ago(5)), _row("b", ago(600))], now=later, interval=INTERVAL
    )
    verdict = judge_instances(renewed, me="a", open_down=open_down, now=later, judging_since=back)
    assert verdict == InstanceVerdict(down=("b",), resolve=(("dead", C),))


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
    """The rule the fleet view shares with INSTANCE_DOWN: silent for more than two of its
    intervals is down, exactly two is still live."""
    assert instance_is_down(ago(seconds), now=T0, interval=INTERVAL) is down


def test_a_row_read_once_clears_nothing_until_it_changes() -> None:
    """The instance that opened ``dead``'s INSTANCE_DOWN restarts: its first read of ``dead``'s
    row (unchanged, a fresh ``since``) neither clears the incident nor pages ``dead`` again
    (a restart of the opener sent a false ``resolved``, then a second page); ``b``, live and
    read once too, is given the benefit of the doubt as a resolver, never as cleared. Once
    ``dead``'s row changes it clears, by the opener."""
    rows = [_row("dead", ago(3600)), _row("b", ago(5)), _row("a", ago(2))]
    first = sight({}, rows, now=T0, interval=INTERVAL)
    open_down: dict[str, str | None] = {"dead": "a"}
    for now in (T0, T0 + 2 * INTERVAL):
        verdict = judge_instances(first, me="a", open_down=open_down, now=now, judging_since=T0)
        assert verdict == InstanceVerdict(), now
    later = T0 + INTERVAL
    rows = [_row("dead", ago(1)), _row("b", ago(5)), _row("a", ago(2))]
    back = sight(first, rows, now=later, interval=INTERVAL)
    by_b = judge_instances(back, me="b", open_down=open_down, now=later, judging_since=T0)
    assert by_b == InstanceVerdict()  # the opener, a, is not judged down: it resolves
    by_a = judge_instances(back, me="a", open_down=open_down, now=later, judging_since=T0)
    assert by_a == InstanceVerdict(resolve=(("dead", C),))
