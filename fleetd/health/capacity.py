"""Capacity and utilisation: a view, never a health state (M4 §9).

Placement, ``fleet_list`` and the idle-lead heartbeat must agree on how many members of a profile
are live and whether a slot is free, or one could show a free slot that placement then refuses.
:func:`live_count` is the one count and :func:`capacity_row` the one row built from it — live,
cap, free and the model bench; placement, the fleet view and the heartbeat all read it. The rule
is deliberately simple:

    A member counts toward its profile's load from registration until its session is RELEASED.

SPAWNING, READY, BUSY, DONE and FAILED all count — a failed member still holds its pane and
process until teardown releases it; only a released session frees the slot. An orphan (a member a
previous run of fleetd left running) counts too, until it is stopped or gone. ``free`` is
``max(0, max_load - live)`` for a capped profile and ``None`` for an unlimited one — and ``0``
for a profile whose model is benched (its provider's catalog no longer lists it: ``fleet_spawn``
refuses it with ``profile_benched``), capped or not; the row says ``benched`` and until when.
``reclaimable`` counts live members that hold capacity without open bridge work (no turn, no
queued send, no pending task, no uncollected reply); it is a fact for the lead, not a suggestion.

Nothing here opens an incident, spawns, stops or moves work. The idle-lead heartbeat gets a
bounded :class:`CapacitySummary` (rows plus at most three long-idle members) whose fingerprint
excludes idle durations (and includes each bench), so a static idle fleet cannot re-arm the
capped heartbeat forever while a model going down or coming back is news. Its
rows count every live member, whoever owns it, exactly as placement does; only the long-idle list
is narrowed to the members the reading lead owns (the ones it can stop).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

from fleetd.health.settings import Effective
from fleetd.health.snapshot import (
    FleetSnapshot,
    MemberView,
    ProfileCapacityInput,
    SessionState,
)

__all__ = [
    "MAX_LONG_IDLE_LISTED",
    "CapacityRow",
    "CapacitySummary",
    "CountsTowardCapacity",
    "LongIdleMember",
    "capacity_row",
    "capacity_rows",
    "capacity_summary",
    "free_slots",
    "holds_capacity",
    "idle_for_seconds",
    "is_reclaimable",
    "live_count",
]

MAX_LONG_IDLE_LISTED: Final = 3
_IDLE_STATES: Final = frozenset({SessionState.READY, SessionState.DONE})
_RECLAIMABLE_STATES: Final = frozenset({SessionState.READY, SessionState.DONE, SessionState.FAILED})


class CountsTowardCapacity(Protocol):
    """Anything with a profile and a session-state value (``MemberView``, a bridge session)."""

    @property
    def profile(self) -> str: ...

    @property
    def session_state(self) -> str: ...


def holds_capacity(session_state: str) -> bool:
    """True unless the session has been released."""
    return session_state != SessionState.RELEASED


def live_count(profile: str, members: Iterable[CountsTowardCapacity]) -> int:
    """How many members of ``profile`` hold a slot — the one count placement also uses."""
    return sum(1 for m in members if m.profile == profile and holds_capacity(m.session_state))


def is_reclaimable(member: MemberView) -> bool:
    """Holds capacity without open bridge work."""
    return (
        member.session_state in _RECLAIMABLE_STATES
        and member.turn is None
        and member.queued_sends == 0
        and member.pending_tasks == 0
        and member.uncollected_replies == 0
    )


def idle_for_seconds(member: MemberView, now: datetime) -> int | None:
    """Whole seconds idle, only for READY or DONE with no accepted turn and no waiting reply.

    An accepted send not yet typed (a pending task) is an accepted turn too; a reply of this
    member still in its lead's inbox is an inbox item (M4 §9, Unit 3 criterion 17).
    """
    if (
        member.session_state not in _IDLE_STATES
        or member.turn is not None
        or member.pending_tasks
        or member.uncollected_replies
    ):
        return None
    return max(0, int((now - member.state_since).total_seconds()))


def free_slots(max_load: int | None, live: int, *, benched: bool) -> int | None:
    """Slots placement would grant now: none while the model is benched, ``None`` (no limit)
    without a cap, else what the cap leaves."""
    if benched:
        return 0
    return None if max_load is None else max(0, max_load - live)


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityRow:
    """One profile's capacity, as ``fleet_list``, the heartbeat and placement read it."""

    profile: str
    max_load: int | None
    live: int
    free: int | None
    reclaimable: int
    orphaned: int = 0
    """Of ``live``, the orphans of a previous run."""
    benched_until: datetime | None = None
    """When the bench of the profile's model ends; ``None`` while it is not benched."""

    @property
    def benched(self) -> bool:
        """The profile's model is benched: no slot is free, whatever the load."""
        return self.benched_until is not None


def capacity_row(
    profile: ProfileCapacityInput, live: int, *, reclaimable: int = 0, orphaned: int = 0
) -> CapacityRow:
    """The one row of a profile with ``live`` members holding a slot (see the module doc)."""
    benched = profile.benched_until is not None
    return CapacityRow(
        profile=profile.profile,
        max_load=profile.max_load,
        live=live,
        free=free_slots(profile.max_load, live, benched=benched),
        reclaimable=reclaimable,
        orphaned=orphaned,
        benched_until=profile.benched_until,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LongIdleMember:
    """A member idle past the long-idle threshold."""

    session_id: str
    name: str
    profile: str
    idle_for_seconds: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacitySummary:
    """The bounded capacity block of the idle-lead heartbeat."""

    rows: tuple[CapacityRow, ...]
    long_idle: tuple[LongIdleMember, ...]
    fingerprint: str


def capacity_rows(
    profiles: Iterable[ProfileCapacityInput],
    members: Sequence[MemberView],
    orphans: Sequence[CountsTowardCapacity] = (),
) -> tuple[CapacityRow, ...]:
    """One row per configured profile, plus unlimited rows for profiles only members name."""
    inputs: dict[str, ProfileCapacityInput] = {p.profile: p for p in profiles}
    by_profile: dict[str, list[MemberView]] = {}
    for member in members:
        by_profile.setdefault(member.profile, []).append(member)
    for name in (*by_profile, *(o.profile for o in orphans)):
        if name not in inputs:
            inputs[name] = ProfileCapacityInput(profile=name)
    rows = []
    for name in sorted(inputs):
        mine = by_profile.get(name, [])
        orphaned = live_count(name, orphans)
        rows.append(
            capacity_row(
                inputs[name],
                live_count(name, mine) + orphaned,
                reclaimable=sum(
                    1 for m in mine if holds_capacity(m.session_state) and is_reclaimable(m)
                ),
                orphaned=orphaned,
            )
        )
    return tuple(rows)


def capacity_summary(
    snapshot: FleetSnapshot,
    now: datetime,
    *,
    owner: str | None = None,
    orphans: Sequence[CountsTowardCapacity] = (),
) -> CapacitySummary:
    """Rows, the longest-idle members (at most three) and a duration-free fingerprint.

    Rows count every member of the snapshot and every orphan of a previous run, as placement
    does; with ``owner``, only that lead's members are listed as long idle.
    """
    rows = capacity_rows(snapshot.profiles, snapshot.members, orphans)
    threshold: timedelta = Effective.of(snapshot.config).long_idle_after
    idle = []
    for member in snapshot.members:
        if owner is not None and member.owner_lead != owner:
            continue
        seconds = idle_for_seconds(member, now)
        if seconds is not None and seconds >= threshold.total_seconds():
            idle.append(
                LongIdleMember(
                    session_id=member.session_id,
                    name=member.name,
                    profile=member.profile,
                    idle_for_seconds=seconds,
                )
            )
    idle.sort(key=lambda m: (-m.idle_for_seconds, m.name, m.session_id))
    listed = tuple(idle[:MAX_LONG_IDLE_LISTED])
    parts = [
        f"{r.profile}:{r.max_load}:{r.live}:{r.free}:{r.reclaimable}:{r.benched}" for r in rows
    ]
    parts += sorted(m.session_id for m in listed)
    fingerprint = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
    return CapacitySummary(rows=rows, long_idle=listed, fingerprint=fingerprint)
