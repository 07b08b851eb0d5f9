"""Member step: classify one member per tick, with a cheap path for steady members.

The rules themselves live in :mod:`fleetd.health.member_rules`; this module turns a
classification into edge effects (the target-wide failure, target lookups), pane candidates,
incidents (primary and the MUTE overlay) and the member's next evidence.

Steady state is cheap: the evidence remembers the inputs it was computed from, the earliest time
a timer rule could fire (``recheck_at``) and the pane candidate it produced. When the inputs are
equal, no probe result, error or mute event arrived, and that time has not come, the prior
evidence is the answer and its candidate is offered to the budget again. A budget grant clears
``recheck_at``, so the next tick re-evaluates the member that was read.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Final

from fleetd.health.effects import CountMute, FailCause, FailTargetWork, RequestTargetLookup
from fleetd.health.evidence import MemberEvidence
from fleetd.health.incidents import Evidence, IncidentKey, ResolveReason
from fleetd.health.member_rules import TORN_DOWN, MemberSeen, classify, normal_state
from fleetd.health.mute import rate_exceeded, record_mutes
from fleetd.health.pane_budget import ProbeCandidate, ProbeReason
from fleetd.health.repair import (
    repair_due,
    repair_evidence,
    retry_deadline,
    sync_repair_evidence,
)
from fleetd.health.settings import NEVER, TEARDOWN_GRACE
from fleetd.health.snapshot import (
    InboxView,
    LiveAgent,
    LiveStatus,
    MemberView,
    ProbeSource,
    SessionState,
)
from fleetd.health.states import MemberState, Scope, spec_of
from fleetd.health.tick import Tick

__all__ = ["FINAL_READ_MEMBER_STATES", "step_member", "step_member_blind"]

FINAL_READ_MEMBER_STATES: Final = frozenset(
    {MemberState.NEVER_READY, MemberState.DELEGATION_ORPHANED}
)
"""Confirmed faults that earn one final visible read while the pane still exists (§6.1)."""

_FAIL_ON_ENTRY: Final = {
    MemberState.GONE: FailCause.GONE,
    MemberState.NEVER_READY: FailCause.NEVER_READY,
}
"""Loss states that fail the target's work on entry; a loss the bridge reports it already failed."""
_COMMITTED_FLAG_STATES: Final = frozenset(
    {MemberState.REPLY_STRANDED, MemberState.DELEGATION_ORPHANED}
)
_ERROR_RANK: Final = spec_of(MemberState.ERROR_ON_SCREEN).rank
_STALL_RANK: Final = spec_of(MemberState.STALL_SUSPECTED).rank
_MUTE_CAUSE: Final = "completion_fallback"
_STREAK_READS: Final = frozenset({LiveStatus.BLOCKED, LiveStatus.UNKNOWN})
"""Raw statuses whose detection read waits for two sightings in a row (see ``_candidate``)."""
_S = SessionState
_M = MemberState

Signature = tuple[object, ...]


def _candidate(
    seen: MemberSeen,
    state: MemberState,
    now: datetime,
    marks: tuple[str | None, int, MemberState | None],
) -> ProbeCandidate | None:
    """The one pane read this member may ask for (§6.1), if any.

    Evidence reads follow the raw situation, not the displayed state, so a lower-ranked state
    (a stranded reply, say) cannot hide the screen or progress evidence of a higher rule; a read
    is skipped only when a state at least as high as the one it could establish already holds.
    """
    agent: LiveAgent | None = seen.agent
    if agent is None:
        return None
    repair_token, repair_requests, final_read_state = marks
    rank = spec_of(state).rank
    raw = seen.raw
    reason: ProbeReason | None = None
    source: ProbeSource | None = None
    if state is _M.TURN_BOUNDARY_LOST:
        turn = seen.view.turn
        if repair_due(
            turn, token=seen.token, asked=repair_token, requests=repair_requests, now=now
        ):
            reason = ProbeReason.LOST_BOUNDARY
    elif state in FINAL_READ_MEMBER_STATES:
        if final_read_state is not state:
            reason, source = ProbeReason.FINAL_EVIDENCE, ProbeSource.VISIBLE
    elif raw is LiveStatus.BLOCKED or raw is LiveStatus.UNKNOWN:
        # one detection read per blocked stretch of a turn: it looks for a tested fatal signature
        if (
            seen.in_turn
            and seen.raw_streak >= 2
            and rank > _ERROR_RANK
            and seen.probe.signature_token != seen.token
        ):
            blocked = raw is LiveStatus.BLOCKED
            reason = ProbeReason.SUSTAINED_BLOCKED if blocked else ProbeReason.SUSTAINED_UNKNOWN
            source = ProbeSource.DETECTION
    elif (
        raw is LiveStatus.WORKING
        and rank >= _STALL_RANK
        and seen.suspect_at is not None
        and now >= seen.suspect_at
    ):
        reason, source = ProbeReason.WORKING_SUSPECT, ProbeSource.RECENT_UNWRAPPED
    if reason is None:
        return None
    return ProbeCandidate(
        target=seen.view.name,
        pane_id=agent.pane_id,
        source=source,
        reason=reason,
        scope=Scope.MEMBER,
        subject=seen.view.session_id,
        token=seen.token,
    )


def _count_mutes(tick: Tick, view: MemberView, times: tuple[datetime, ...]) -> tuple[datetime, ...]:
    if view.mute_events:
        tick.effects.append(
            CountMute(
                target=view.name,
                session_id=view.session_id,
                profile=view.profile,
                count=view.mute_events,
            )
        )
    if not times and not view.mute_events:
        return times
    return record_mutes(times, view.mute_events, tick.now)


def _signature(view: MemberView, agent: LiveAgent | None, inbox: InboxView | None) -> Signature:
    """The inputs a steady member's classification depends on, for the reuse check: the whole
    member view, herdr's whole view of its agent, and whether its lead's push gave up. The
    runtime hands back the same view and agent objects while nothing of them changed, so in the
    steady case the check compares identities and reads none of their fields."""
    return (view, agent, inbox is not None and inbox.push_cap_reached)


def _recheck_at(seen: MemberSeen, tick: Tick, quiet: bool) -> datetime | None:
    """The next time a timer rule could change this member, or ``None`` to always recheck.

    Every rule with a time condition contributes its deadline; deadlines already passed are
    already reflected in this tick's classification, so only future ones count.
    """
    if not quiet:
        return None
    view, now = seen.view, tick.now
    earliest = NEVER  # a plain loop: asked for every member that changed, a generator cost more
    for deadline in (
        seen.suspect_at,
        retry_deadline(view.turn),
        view.spawned_at + tick.eff.readiness_grace if view.session_state is _S.SPAWNING else None,
        (
            view.state_since + TEARDOWN_GRACE
            if seen.orphan_cause is not None and view.session_state in TORN_DOWN
            else None
        ),
        (
            view.state_since + tick.eff.long_idle_after
            if view.worktree is not None and view.worktree.commits_ahead
            else None
        ),
    ):
        if deadline is not None and now < deadline < earliest:
            earliest = deadline
    return earliest


def step_member_blind(tick: Tick, view: MemberView, prior: MemberEvidence | None) -> MemberEvidence:
    """A tick without a usable live view: keep every live-derived fact and incident as it was.

    A failed list proves nothing about a member (§4.3), and CONTROL_LINK_DOWN hides member
    faults (§3), so nothing opens, resolves or escalates. Mute events are still counted.
    """
    if prior is None:
        state, cause = normal_state(
            view, None, _S.BUSY is view.session_state and view.turn is not None, 0
        )
        return MemberEvidence(
            session_id=view.session_id,
            target=view.name,
            profile=view.profile,
            state=state,
            cause=cause,
            since=tick.now,
            mute_times=_count_mutes(tick, view, ()),
        )
    times = _count_mutes(tick, view, prior.mute_times)
    if times == prior.mute_times:
        return prior
    return replace(prior, mute_times=times, recheck_at=None)


def step_member(tick: Tick, view: MemberView, prior: MemberEvidence | None) -> MemberEvidence:
    """Classify one member against a successful fleet list and return its new evidence."""
    if prior is not None and tick.steady:
        recheck = prior.recheck_at
        if (
            recheck is not None
            and tick.now < recheck
            and not view.mute_events
            and not (tick.touched and view.name in tick.touched)
        ):
            terminal = view.terminal_id
            agent = (
                tick.by_terminal.get(terminal)
                if terminal is not None
                else tick.by_name.get(view.name)
            )
            if prior.signature == _signature(view, agent, tick.lead_inbox(view.owner_lead)):
                if prior.candidate is not None:
                    tick.candidates.append(prior.candidate)
                return prior
    return _step(tick, view, prior)


def _step(tick: Tick, view: MemberView, prior: MemberEvidence | None) -> MemberEvidence:
    now = tick.now
    seen = MemberSeen(tick, view, prior)
    state, cause = classify(seen)
    entered = prior is None or prior.state is not state
    sustained = 1 if entered or prior is None else min(prior.sustained + 1, 2)

    orphan_retry_done = prior.orphan_retry_done if prior is not None else False
    if entered and state in _FAIL_ON_ENTRY and seen.loss is None:
        tick.effects.append(
            FailTargetWork(
                target=view.name, session_id=view.session_id, cause=_FAIL_ON_ENTRY[state]
            )
        )
    elif entered and state is _M.DELEGATION_ORPHANED and not orphan_retry_done:
        orphan_retry_done = True  # the one permitted retry of the idempotent failure (§8.5)
        tick.effects.append(
            FailTargetWork(
                target=view.name, session_id=view.session_id, cause=FailCause.DELEGATION_ORPHANED
            )
        )
    if seen.absent and seen.gone_code is None:
        tick.effects.append(RequestTargetLookup(target=view.name))

    marks = (
        (prior.repair_token, prior.repair_requests, prior.final_read_state)
        if prior is not None
        else (None, 0, None)
    )
    candidate = _candidate(seen, state, now, marks)
    if candidate is not None:
        tick.candidates.append(candidate)

    desired, mute_times, mute_key = _sync_incidents(
        tick, seen, prior=prior, state=state, cause=cause, sustained=sustained
    )
    if state is _M.TURN_BOUNDARY_LOST and desired is not None:
        sync_repair_evidence(tick, desired, view.turn)  # the bridge's latest repair answer
    # Asked again with the same inputs, a member would only count ``sustained`` and ``raw_streak``
    # on to two. That decides something only for a state with an incident to open or keep (its
    # ``sustain``) and for a raw BLOCKED or UNKNOWN (a detection read waits for a streak of two):
    # any other member is quiet at its first sighting, its counters recorded as that second
    # sighting would leave them. A tenth of a large fleet changing status between two ticks is
    # then asked once per change, not twice.
    counted = sustained >= 2 and seen.raw_streak >= 2
    quiet = (
        (counted or not (spec_of(state).opens_incident or seen.raw in _STREAK_READS))
        and not seen.absent
        and seen.boundary_count != 1
        and not mute_times
    )
    agent = seen.agent
    return MemberEvidence(
        session_id=view.session_id,
        target=view.name,
        profile=view.profile,
        state=state,
        cause=cause,
        since=now if entered or prior is None else prior.since,
        sustained=2 if quiet else sustained,
        raw_status=seen.raw,
        raw_since=prior.raw_since if prior is not None and prior.raw_status is seen.raw else now,
        raw_streak=2 if quiet else seen.raw_streak,
        seq=agent.state_change_seq if agent is not None else None,
        absent=seen.absent,
        boundary_token=seen.boundary_token,
        boundary_count=seen.boundary_count,
        gone_code=seen.gone_code,
        never_ready=seen.never_ready,
        probe=seen.probe,
        repair_token=marks[0],
        repair_requests=marks[1],
        final_read_state=marks[2],
        orphan_retry_done=orphan_retry_done,
        loss_reported=(prior is not None and prior.loss_reported) or state in _FAIL_ON_ENTRY,
        mute_times=mute_times,
        incident=desired,
        mute_incident=mute_key,
        signature=_signature(view, agent, tick.lead_inbox(view.owner_lead)),
        recheck_at=_recheck_at(seen, tick, quiet),
        candidate=candidate,
    )


def _sync_incidents(
    tick: Tick,
    seen: MemberSeen,
    *,
    prior: MemberEvidence | None,
    state: MemberState,
    cause: str,
    sustained: int,
) -> tuple[IncidentKey | None, tuple[datetime, ...], IncidentKey | None]:
    """The primary incident, then the MUTE overlay; returns both keys and the mute window."""
    view = seen.view
    spec = spec_of(state)
    desired = (
        IncidentKey(scope=Scope.MEMBER, subject=view.session_id, state=state, cause=cause)
        if spec.opens_incident and sustained >= spec.sustain
        else None
    )
    committed = (
        state in _COMMITTED_FLAG_STATES
        and view.worktree is not None
        and bool(view.worktree.commits_ahead)
    )
    current = prior.incident if prior is not None else None
    if current != desired or desired is not None:
        evidence = (
            _evidence(seen, state, tick.now) if desired is not None and current != desired else ()
        )
        tick.sync_incident(
            current,
            desired,
            target=view.name,
            owner_lead=view.owner_lead,
            committed=committed,
            evidence=evidence,
            closed_as=_repaired(prior, view),
        )
    mute_times = _count_mutes(tick, view, prior.mute_times if prior is not None else ())
    current_mute = prior.mute_incident if prior is not None else None
    if view.session_state is _S.RELEASED:
        # a released member resolves no more turns: its MUTE overlay retires with it (the
        # profile's own rate still counts its events)
        closed = tick.book.close(current_mute) if current_mute is not None else None
        if closed is not None:
            tick.emit_resolved(closed, ResolveReason.SUBJECT_RETIRED)
        return desired, (), None
    mute_key = None
    if rate_exceeded(mute_times) or (mute_times and desired is not None):
        mute_key = IncidentKey(
            scope=Scope.MEMBER, subject=view.session_id, state=_M.MUTE, cause=_MUTE_CAUSE
        )
    if current_mute != mute_key:
        tick.sync_incident(
            current_mute,
            mute_key,
            target=view.name,
            owner_lead=view.owner_lead,
            evidence=(("mute_events_in_window", str(len(mute_times))),),
        )
    return desired, mute_times, mute_key


def _repaired(prior: MemberEvidence | None, view: MemberView) -> ResolveReason | None:
    """``repaired`` when the bridge's lost-boundary repair resolved the very turn health asked
    it to reconcile: the TURN_BOUNDARY_LOST incident closes with that trace, not ``cleared``."""
    if (
        prior is not None
        and prior.state is _M.TURN_BOUNDARY_LOST
        and prior.repair_token is not None
        and view.repaired_token == prior.repair_token
    ):
        return ResolveReason.REPAIRED
    return None


def _evidence(seen: MemberSeen, state: MemberState, now: datetime) -> Evidence:
    view = seen.view
    pairs = [
        ("session_state", str(view.session_state)),
        ("raw_status", str(seen.raw or "absent")),
    ]
    if view.turn is not None:
        pairs.append(("turn_number", str(view.turn.number)))
    if view.pending_tasks:
        pairs.append(("pending_tasks", str(view.pending_tasks)))
    if state is _M.DELEGATION_ORPHANED and view.teardown_violations:
        pairs.append(("teardown_invariants", ",".join(view.teardown_violations)))
    if seen.inbox_depth:
        pairs.append(("uncollected_replies", str(seen.inbox_depth)))
        oldest = view.oldest_uncollected_at
        if oldest is not None:
            age = max(0, int((now - oldest).total_seconds()))
            pairs.append(("oldest_uncollected_seconds", str(age)))
    if state is _M.TURN_BOUNDARY_LOST:
        pairs.append(("consecutive_snapshots", "2"))
        pairs.extend(repair_evidence(view.turn))
    loss = seen.loss
    if loss is not None:
        pairs.append(("handled_by", "bridge"))
        pairs.append(("tickets_failed", str(loss.tickets_failed)))
        if loss.failed_tickets:
            pairs.append(("failed_tickets", ",".join(loss.failed_tickets)))
    screen = view.boundary_screen
    if state is _M.ERROR_ON_SCREEN and seen.boundary_fatal is not None and screen is not None:
        pairs.append(("read_at", "turn_boundary"))
        pairs.append(("ticket", screen.ticket))
    return tuple(pairs)
