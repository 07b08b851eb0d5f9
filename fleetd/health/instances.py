"""INSTANCE_DOWN: a fleetd instance sharing the journal that stopped renewing its row (issue 24).

Each fleetd on a shared PostgreSQL journal renews its row every snapshot interval of its own and
writes that interval in the row. An instance is down once this instance has seen its row stay the
same for more than :data:`MISSED_RENEWALS` of *its* intervals, measured on this instance's own
clock (:func:`sight`): the renewal time in a row is written by another host's clock and is only
ever compared with itself, so clock skew between hosts never pages a live instance, and
instances renewing at different intervals are each judged by their own. A row seen for the
first time starts its count at the read. What this instance could not see cannot count as
silence: it judges from ``judging_since``, when its reads of the journal last became continuous
(its start, or the end of a journal outage), so after an outage every instance has two of its
intervals to renew again before any is paged — and an instance that was down before the outage
stays down (its incident is neither resolved nor opened again) until its row changes. Likewise
a row read for the first time — at this instance's start, after a restart of the one that
opened an incident — clears nothing until it is seen to change. Any live instance may notice a
down one, and every one that does asks to open the same
incident (scope ``instance``, subject the instance's name, routed to a person): the journal's
unique open key lets the first record win, so a person is paged once whoever notices first.

The incident resolves when the instance renews again (``cleared``) or its row is gone (an
operator retired it: ``subject_retired``). Exactly one live instance resolves it: the one that
opened it while that one is live, else the first live instance by name, so two never write the
same resolution.

:func:`judge_instances` is the whole rule: rows, the open incidents and ``now`` in, a verdict
out. It never judges the instance that asks (it is alive: it is asking).

==============================  ====================================  ===========================
instance row (as sighted)       open INSTANCE_DOWN incident           verdict
==============================  ====================================  ===========================
changed within 2 × its interval none                                  nothing
same for over 2 × its interval  none, judging for under 2 × interval  nothing (yet)
same for over 2 × its interval  none, judging for longer              open (any live instance)
same for over 2 × its interval  open                                  nothing (a person knows)
changed within 2 × its interval open, this instance resolves it       resolve ``cleared``
no row                          open, this instance resolves it       resolve ``subject_retired``
any                             open, another live instance resolves  nothing
==============================  ====================================  ===========================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from fleetd.health.fact import fact
from fleetd.health.incidents import (
    Assignment,
    Incident,
    IncidentKey,
    ResolveReason,
    Route,
    RoutingReason,
    incident_id,
)
from fleetd.health.states import InstanceState, Scope, spec_of

__all__ = [
    "INSTANCE_CAUSE",
    "MISSED_RENEWALS",
    "InstanceSeen",
    "InstanceVerdict",
    "Sighting",
    "instance_down_incident",
    "instance_is_down",
    "instance_key",
    "judge_instances",
    "sight",
]

MISSED_RENEWALS: Final = 2
"""Snapshot intervals without a renewal before an instance is down."""
INSTANCE_CAUSE: Final = "stopped_renewing"
"""The cause fingerprint of every INSTANCE_DOWN incident (a stable code)."""


@fact
class InstanceSeen:
    """One instance's row as the journal last gave it: its name, its last renewal as its own
    clock wrote it (compared only with itself) and the interval it renews at (``None``: a row
    written by a build that did not say; the judge's own interval stands in)."""

    instance: str
    last_seen: datetime
    every: timedelta | None = None


@fact
class Sighting:
    """What this instance knows of another's row: the renewal last read (``last_seen``, the
    other's clock), ``since`` when this instance first read it (its own clock), the interval
    the other renews at, and whether this instance ever saw the row change (``renewed``: a row
    read once may be a dead instance's, however fresh ``since`` is)."""

    last_seen: datetime
    since: datetime
    every: timedelta
    renewed: bool = True

    def renewing(self, now: datetime) -> bool:
        """Seen to renew, and within :data:`MISSED_RENEWALS` intervals: alive, as far as can be
        told (what clears its INSTANCE_DOWN, what makes its leads peers)."""
        return self.renewed and not self.down(now)

    def down(self, now: datetime) -> bool:
        """Whether the row stayed the same for more than :data:`MISSED_RENEWALS` intervals."""
        return instance_is_down(self.since, now=now, interval=self.every)

    def silent(self, now: datetime, *, judging_since: datetime) -> bool:
        """Whether it stayed the same for more than :data:`MISSED_RENEWALS` intervals that this
        instance watched (from ``judging_since`` on): down, and seen to be."""
        return instance_is_down(max(self.since, judging_since), now=now, interval=self.every)


@fact
class InstanceVerdict:
    """What this instance should do: open INSTANCE_DOWN for ``down`` (names, sorted), and resolve
    the open incidents of ``resolve`` (subject name and why, sorted)."""

    down: tuple[str, ...] = ()
    resolve: tuple[tuple[str, ResolveReason], ...] = ()


def instance_key(instance: str) -> IncidentKey:
    """The incident key of ``instance`` being down."""
    return IncidentKey(
        scope=Scope.INSTANCE,
        subject=instance,
        state=InstanceState.INSTANCE_DOWN,
        cause=INSTANCE_CAUSE,
    )


def instance_is_down(since: datetime, *, now: datetime, interval: timedelta) -> bool:
    """Whether an instance last seen renewing at ``since`` (this instance's clock) is down at
    ``now``: silent for more than :data:`MISSED_RENEWALS` of its intervals (``interval``)."""
    return now - since > interval * MISSED_RENEWALS


def sight(
    prior: Mapping[str, Sighting],
    rows: Iterable[InstanceSeen],
    *,
    now: datetime,
    interval: timedelta,
) -> dict[str, Sighting]:
    """The sightings of ``rows`` read at ``now``: a row whose renewal is the one ``prior`` holds
    keeps its ``since``; a changed row is seen renewing now; a new row is read now, not yet seen
    to renew (``renewed`` false until it changes). A row that gives no interval (or a
    nonsensical one) is judged by ``interval``, this instance's."""
    sighted: dict[str, Sighting] = {}
    for row in rows:
        every = row.every if row.every is not None and row.every > timedelta(0) else interval
        before = prior.get(row.instance)
        if before is None:
            seen = Sighting(last_seen=row.last_seen, since=now, every=every, renewed=False)
        elif before.last_seen == row.last_seen:
            seen = Sighting(
                last_seen=row.last_seen, since=before.since, every=every, renewed=before.renewed
            )
        else:
            seen = Sighting(last_seen=row.last_seen, since=now, every=every, renewed=True)
        sighted[row.instance] = seen
    return sighted


def judge_instances(
    sighted: Mapping[str, Sighting],
    *,
    me: str,
    open_down: Mapping[str, str | None],
    now: datetime,
    judging_since: datetime,
) -> InstanceVerdict:
    """The verdict of ``me`` on the rows ``sighted`` at ``now``, watched since ``judging_since``.
    ``open_down`` maps the subject of each open INSTANCE_DOWN incident to the instance that
    opened it (``None``: unknown)."""
    last = sighted
    silent = {n for n, seen in last.items() if seen.silent(now, judging_since=judging_since)}
    renewing = {n for n, seen in last.items() if seen.renewing(now)} | {me}
    down = tuple(sorted(n for n in silent if n not in renewing and n not in open_down))
    # who resolves: any instance not judged down (a row just read is given the benefit of the
    # doubt here, so two never both think they are the one)
    live = (set(last) - silent) | {me}
    first_live = min(live)
    resolve: list[tuple[str, ResolveReason]] = []
    for subject, opener in sorted(open_down.items(), key=lambda item: item[0]):
        if subject not in renewing and subject in last:
            continue  # not seen to renew: the incident stands
        resolver = opener if opener in live else first_live
        if resolver != me:
            continue
        reason = ResolveReason.CLEARED if subject in renewing else ResolveReason.SUBJECT_RETIRED
        resolve.append((subject, reason))
    return InstanceVerdict(down=down, resolve=tuple(resolve))


def instance_down_incident(
    instance: str, *, generation: int, now: datetime, namespace: str
) -> Incident:
    """The INSTANCE_DOWN incident of ``instance``, generation ``generation``, routed to a person
    (no lead can act on a fleetd that is gone)."""
    key = instance_key(instance)
    spec = spec_of(key.state)
    return Incident(
        id=incident_id(key, generation, namespace),
        key=key,
        generation=generation,
        target=None,
        severity=spec.severity,
        certainty=spec.certainty,
        opened_at=now,
        assignment=Assignment(
            route=Route.HUMAN,
            recipient=None,
            reason=RoutingReason.HUMAN_INSTANCE_DOWN,
            generation=1,
        ),
    )
