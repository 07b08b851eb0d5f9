"""INSTANCE_DOWN: a fleetd instance sharing the journal that stopped renewing its row (issue 24).

Each fleetd on a shared PostgreSQL journal renews its row every snapshot interval. An instance
whose last renewal is more than :data:`MISSED_RENEWALS` intervals old is down; any live instance
may notice it, and every one that does asks to open the same incident (scope ``instance``,
subject the instance's name, routed to a person): the journal's unique open key lets the first
record win, so a person is paged once whoever notices first.

The incident resolves when the instance renews again (``cleared``) or its row is gone (an
operator retired it: ``subject_retired``). Exactly one live instance resolves it: the one that
opened it while that one is live, else the first live instance by name, so two never write the
same resolution.

:func:`judge_instances` is the whole rule: rows, the open incidents and ``now`` in, a verdict
out. It never judges the instance that asks (it is alive: it is asking).

========================  ======================================  ===========================
instance row              open INSTANCE_DOWN incident             verdict
========================  ======================================  ===========================
renewed within 2 ×        none                                    nothing
older than 2 × interval   none                                    open (any live instance)
older than 2 × interval   open                                    nothing (a person knows)
renewed within 2 ×        open, this instance resolves it         resolve ``cleared``
no row                    open, this instance resolves it         resolve ``subject_retired``
any                       open, another live instance resolves    nothing
========================  ======================================  ===========================
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
    "instance_down_incident",
    "instance_is_down",
    "instance_key",
    "judge_instances",
]

MISSED_RENEWALS: Final = 2
"""Snapshot intervals without a renewal before an instance is down."""
INSTANCE_CAUSE: Final = "stopped_renewing"
"""The cause fingerprint of every INSTANCE_DOWN incident (a stable code)."""


@fact
class InstanceSeen:
    """One instance's row as the journal last gave it: its name and its last renewal."""

    instance: str
    last_seen: datetime


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


def instance_is_down(last_seen: datetime, *, now: datetime, interval: timedelta) -> bool:
    """Whether an instance whose last renewal was ``last_seen`` is down at ``now``: silent for
    more than :data:`MISSED_RENEWALS` snapshot intervals (``interval``)."""
    return now - last_seen > interval * MISSED_RENEWALS


def judge_instances(
    seen: Iterable[InstanceSeen],
    *,
    me: str,
    open_down: Mapping[str, str | None],
    now: datetime,
    interval: timedelta,
) -> InstanceVerdict:
    """The verdict of ``me`` on the rows ``seen`` at ``now``. ``open_down`` maps the subject of
    each open INSTANCE_DOWN incident to the instance that opened it (``None``: unknown)."""
    last = {row.instance: row.last_seen for row in seen}
    live = {
        name for name, at in last.items() if not instance_is_down(at, now=now, interval=interval)
    } | {me}
    down = tuple(sorted(n for n in last if n not in live and n not in open_down))
    first_live = min(live)
    resolve: list[tuple[str, ResolveReason]] = []
    for subject, opener in sorted(open_down.items(), key=lambda item: item[0]):
        if subject not in live and subject in last:
            continue  # still down: the incident stands
        resolver = opener if opener in live else first_live
        if resolver != me:
            continue
        reason = ResolveReason.CLEARED if subject in live else ResolveReason.SUBJECT_RETIRED
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
