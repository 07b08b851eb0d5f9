"""The member pass of one tick: every member, or only those that could have changed.

:func:`every_member` asks :func:`~fleetd.health.members.step_member` (or its blind form) about
each member of the snapshot and retires the evidence and incidents of members that left it.
:func:`changed_members` is the same pass for a steady tick whose
:class:`~fleetd.health.member_index.MemberIndex` named the members to ask; every other member keeps
its prior evidence. Both visit members in snapshot order, so effects and pane candidates come in
the same order whichever pass ran.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter

from fleetd.health.evidence import MemberEvidence
from fleetd.health.incidents import ResolveReason
from fleetd.health.members import step_member, step_member_blind
from fleetd.health.snapshot import FleetSnapshot, MemberView
from fleetd.health.states import Scope
from fleetd.health.tick import Tick

__all__ = ["changed_members", "every_member"]

Step = Callable[[Tick, MemberView, MemberEvidence | None], MemberEvidence]


_SESSION_ID = attrgetter("session_id")


def every_member(
    tick: Tick, snapshot: FleetSnapshot, prior: Mapping[str, MemberEvidence], sighted: bool
) -> dict[str, MemberEvidence]:
    """Ask every member; members of ``prior`` no longer in the snapshot retire.

    Two members with one session id are a bug of the runtime: refused before anything is asked
    (:func:`changed_members` needs no check: it runs only on the members of a tick that passed
    one, each at its place with its session id)."""
    views = snapshot.members
    if len(set(map(_SESSION_ID, views))) != len(views):
        raise ValueError("FleetSnapshot has a duplicate member session_id")
    step = step_member if sighted else step_member_blind
    result: dict[str, MemberEvidence] = {}
    known = 0
    for view in snapshot.members:
        before = prior.get(view.session_id)
        known += before is not None
        result[view.session_id] = _ask(tick, view, before, step)
    if known != len(prior):
        retired = prior.keys() - result.keys()
        for sid in sorted(retired):
            for key in (prior[sid].incident, prior[sid].mute_incident):
                closed = tick.book.close(key) if key is not None else None
                if closed is not None:
                    tick.emit_resolved(closed, ResolveReason.SUBJECT_RETIRED)
        tick.book.forget_subjects(Scope.MEMBER, retired)
    return result


def changed_members(
    tick: Tick,
    snapshot: FleetSnapshot,
    prior: Mapping[str, MemberEvidence],
    asked: set[int],
    offering: set[int],
) -> dict[str, MemberEvidence]:
    """The same members as ``prior``: those at the ``asked`` positions are asked as
    :func:`every_member` asks them, every other keeps its prior evidence and, when at an
    ``offering`` position, offers its pane candidate again."""
    views = snapshot.members
    result = dict(prior)
    for position in sorted(asked | offering):
        view = views[position]
        before = result[view.session_id]
        if position in asked:
            result[view.session_id] = _ask(tick, view, before, step_member)
        else:
            assert before.candidate is not None  # the index offers only evidence that has one
            tick.candidates.append(before.candidate)
    return result


def _ask(tick: Tick, view: MemberView, before: MemberEvidence | None, step: Step) -> MemberEvidence:
    """One member's step: its mute events counted for its profile, its transition recorded."""
    if view.mute_events:
        mutes = tick.mutes_by_profile
        mutes[view.profile] = mutes.get(view.profile, 0) + view.mute_events
    after = step(tick, view, before)
    if after is not before:
        tick.transition(
            Scope.MEMBER, subject=view.session_id, target=view.name, before=before, after=after
        )
    return after
