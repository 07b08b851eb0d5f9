"""The ``scope=all`` merge, pure: this instance's part first, every other instance's row with its
age, the INSTANCE_DOWN rule for ``down``, and what a failed read or an SQLite journal says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleetd.health.instances import Sighting
from fleetd.journal.values import InstanceRecord
from fleetd.runtime.fleet_all import SINGLE_INSTANCE_NOTE, Answering, fleet_all

T0 = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
INTERVAL = timedelta(seconds=15)
ME = Answering(instance="b", host="host-b", version="1.2", started_at=T0 - timedelta(hours=1))


def _row(name: str, seconds: int, summary: dict[str, Any] | None = None) -> InstanceRecord:
    return InstanceRecord(
        instance=name,
        host=f"host-{name}",
        version="1.2",
        started_at=T0 - timedelta(hours=2),
        last_seen=T0 - timedelta(seconds=seconds),
        summary=summary,
    )


def _sighted(rows: list[InstanceRecord]) -> dict[str, Sighting]:
    """Each row seen renewing when its own clock says it did, at this instance's interval."""
    return {
        r.instance: Sighting(last_seen=r.last_seen, since=r.last_seen, every=INTERVAL) for r in rows
    }


def _summary(name: str) -> dict[str, Any]:
    return {"version": 1, "instance": name, "membersTotal": 3}


def test_every_instance_is_a_part_the_answering_one_first_the_silent_one_down() -> None:
    """Rows in any order: the answering instance first (its row's age, never down, its view a
    marker for the caller to fill), then the others by name, each with its host, version, last
    renewal, age and summary as published; exactly two intervals old is live, one second more
    is down and keeps its last summary."""
    rows = [
        _row("d", 31, _summary("d")),
        _row("b", 4, _summary("b")),
        _row("a", 30, _summary("a")),
        _row("c", 0, None),
    ]
    document = fleet_all(
        rows, me=ME, now=T0, interval=INTERVAL, shared=True, sighted=_sighted(rows)
    )
    parts = document["instances"]
    assert [(p["instance"], p["answering"], p["down"]) for p in parts] == [
        ("b", True, False),
        ("a", False, False),
        ("c", False, False),
        ("d", False, True),
    ]
    own, a, c, d = parts
    assert (own["ageSeconds"], own["host"], own["fleetdVersion"]) == (4.0, "host-b", "1.2")
    assert "summary" not in own
    assert own["view"] != {}
    assert (a["ageSeconds"], a["summary"], a["host"]) == (30.0, _summary("a"), "host-a")
    assert a["lastSeen"] == (T0 - timedelta(seconds=30)).isoformat()
    assert (c["summary"], c["summaryProblem"]) == (None, "not_published")
    assert (d["ageSeconds"], d["summary"]) == (31.0, _summary("d"))
    assert (document["live"], document["down"]) == (3, 1)
    assert document["journal"] == {"shared": True, "read": "ok"}
    assert document["intervalSeconds"] == 15.0
    assert "note" not in document


def test_the_answering_instance_is_never_down_even_with_an_old_row() -> None:
    """An instance whose own renewals failed still answers: it is live (it is asking), its age
    says how old its row is; without a row of its own its age is unknown (null)."""
    document = fleet_all([_row("b", 300)], me=ME, now=T0, interval=INTERVAL, shared=True)
    [own] = document["instances"]
    assert (own["down"], own["ageSeconds"]) == (False, 300.0)
    alone = fleet_all([], me=ME, now=T0, interval=INTERVAL, shared=True)
    assert (alone["instances"][0]["ageSeconds"], alone["instances"][0]["lastSeen"]) == (None, None)


def test_a_failed_read_and_an_sqlite_journal_say_why_only_this_instance_shows() -> None:
    """A journal that could not be read: this instance alone, ``journal.read`` failed with the
    reason, and a note that the others are unknown, not absent. An SQLite journal: this
    instance alone, not read, and the note that SQLite serves one fleetd."""
    failed = fleet_all(
        [], me=ME, now=T0, interval=INTERVAL, shared=True, read_failure="journal unavailable"
    )
    assert failed["journal"] == {"shared": True, "read": "failed", "reason": "journal unavailable"}
    assert "unknown, not absent" in failed["note"]
    single = fleet_all([], me=ME, now=T0, interval=INTERVAL, shared=False)
    assert single["journal"] == {"shared": False, "read": "not_shared"}
    assert single["note"] == SINGLE_INSTANCE_NOTE
    assert [p["instance"] for p in single["instances"]] == ["b"]


def test_a_summary_of_another_version_is_not_shown_as_if_it_were_this_one() -> None:
    """A newer build's summary (version 2) is not read as version 1: null, with the reason."""
    rows = [_row("a", 1, {"version": 2, "instance": "a"})]
    [_, other] = fleet_all(rows, me=ME, now=T0, interval=INTERVAL, shared=True)["instances"]
    assert (other["summary"], other["summaryProblem"]) == (None, "unknown_version: 2")


def test_another_instance_is_judged_by_when_it_was_seen_renewing_at_its_own_interval() -> None:
    """Another host's clock is never compared with this one's: a row written nine hours "ago"
    that this instance saw renew 10 s ago is live, aged 10 s; a row renewing every 60 s is live
    100 s after its renewal was seen; a row renewed since it was last sighted was seen renewing
    now; a row never seen to change (this instance just started) is shown by the time written
    in it, two hours: down."""
    skewed = _row("a", 9 * 3600)
    slow = _row("c", 0)
    renewed = _row("d", 5)
    new = _row("e", 7200)
    sighted = {
        "a": Sighting(last_seen=skewed.last_seen, since=T0 - timedelta(seconds=10), every=INTERVAL),
        "c": Sighting(
            last_seen=slow.last_seen,
            since=T0 - timedelta(seconds=100),
            every=timedelta(seconds=60),
        ),
        "d": Sighting(
            last_seen=T0 - timedelta(hours=1), since=T0 - timedelta(hours=1), every=INTERVAL
        ),
    }
    rows = [skewed, slow, renewed, new]
    document = fleet_all(rows, me=ME, now=T0, interval=INTERVAL, shared=True, sighted=sighted)
    parts = {p["instance"]: p for p in document["instances"][1:]}
    assert {n: (p["down"], p["ageSeconds"]) for n, p in parts.items()} == {
        "a": (False, 10.0),
        "c": (False, 100.0),
        "d": (False, 0.0),
        "e": (True, 7200.0),
    }
    assert parts["a"]["lastSeen"] == skewed.last_seen.isoformat()  # as its clock wrote it
    later = fleet_all(
        rows, me=ME, now=T0 + timedelta(seconds=21), interval=INTERVAL, shared=True, sighted=sighted
    )
    assert [p["down"] for p in later["instances"][1:]] == [True, True, False, True]
