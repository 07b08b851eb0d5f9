"""Member classification rules: the §3 precedence ladder for one member.

Rules, highest first (a lower rule never hides a higher one):

====  =====================  ==============================================================
rank  state                  exact evidence used here
====  =====================  ==============================================================
2     GONE                   a per-target call or pane read answered ``*_not_found`` while
                             the fleet list worked; sticky until the session is released
3     NEVER_READY            SPAWNING, no MCP presence, an accepted delivery waits, and the
                             readiness grace since spawn expired; sticky while SPAWNING
2, 3  GONE / NEVER_READY     the bridge released the member itself for that loss (its
                             ``TargetLoss``); reported on one sighted tick, then RELEASED
3     DELEGATION_ORPHANED    released or FAILED, and tasks still PENDING or (released) another
                             part of the §8.5 teardown invariant broken, after the compiled
                             teardown grace; the cause names the broken part
4     TURN_BOUNDARY_LOST     BUSY with an open waiter; raw IDLE or DONE on two consecutive
                             snapshots for the same TurnToken and ``state_change_seq``, with
                             no reply, mute, missing agent or other status between them
5     ERROR_ON_SCREEN        open turn, raw status not WORKING, and a detection read for this
                             turn returned a tested fatal signature id; or DONE with no open
                             turn, raw status not WORKING, and the completion fallback's
                             boundary read of the current turn matched one (herdr shows these
                             screens as ``idle``, so the turn resolved at its boundary)
6     STALL_SUSPECTED        open turn older than the suspect threshold, raw WORKING, and two
                             progress digests for this turn are equal
7     REPLY_STRANDED         the member's replies wait in its owning lead's inbox after that
                             lead's push reached its cap
7     WORK_PRODUCT_AT_RISK   DONE/FAILED (or released with a preserved worktree), commits
                             ahead of base, no turn, queue or inbox, idle past long-idle
8     normal                 STARTING, IDLE, WORKING, WORK_PENDING, BLOCKED_AMBIGUOUS
====  =====================  ==============================================================

A released session is judged only by a loss the bridge released it for (once), the teardown
invariant, its inbox and its worktree (DELEGATION_ORPHANED, REPLY_STRANDED, WORK_PRODUCT_AT_RISK),
else it is RELEASED.

Normal-mode table (the seed names only the core cells; the rest is written down here so that
every combination has one answer): SPAWNING is STARTING. An open turn (BUSY with a turn) is
BLOCKED_AMBIGUOUS under raw BLOCKED or UNKNOWN and WORKING otherwise — including the first
snapshot of raw IDLE/DONE, which is not yet evidence. Without an open turn, raw WORKING is
WORKING, pending input (queued send, undelivered turn or uncollected reply) is WORK_PENDING, and
anything else is IDLE: an idle prompt after a failure looks exactly like one after success
(§4.5), so FAILED at a prompt is IDLE, not a fault.

MUTE is not on this ladder: it is an overlay incident (see :mod:`fleetd.health.mute`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from fleetd.health.evidence import EMPTY_PROBE, MemberEvidence
from fleetd.health.settings import TEARDOWN_GRACE
from fleetd.health.snapshot import (
    AT_PROMPT,
    InboxView,
    LiveStatus,
    LossCause,
    MemberView,
    SessionState,
    TargetLoss,
)
from fleetd.health.states import MemberState
from fleetd.health.tick import Tick, absorb_probe, settle_probe

__all__ = [
    "PENDING_AFTER_TEARDOWN",
    "TORN_DOWN",
    "MemberSeen",
    "classify",
    "normal_state",
    "teardown_cause",
]

PENDING_AFTER_TEARDOWN = "pending_after_teardown"
"""The cause of DELEGATION_ORPHANED when tasks survive teardown (the bridge names other parts)."""

_S = SessionState
TORN_DOWN: Final = frozenset({_S.RELEASED, _S.FAILED})
"""The session states whose broken teardown invariant waits out ``TEARDOWN_GRACE`` (§8.5)."""
_M = MemberState
_LOSS_STATES = {LossCause.GONE: _M.GONE, LossCause.NEVER_READY: _M.NEVER_READY}


class MemberSeen:
    """What one tick observed about one member, and the rule inputs derived from it."""

    __slots__ = (
        "absent",
        "agent",
        "at_risk",
        "boundary_count",
        "boundary_fatal",
        "boundary_token",
        "fatal",
        "gone_code",
        "in_turn",
        "inbox_depth",
        "loss",
        "never_ready",
        "orphan_cause",
        "orphaned",
        "probe",
        "raw",
        "raw_streak",
        "released",
        "stalled",
        "stranded",
        "suspect_at",
        "token",
        "view",
    )

    def __init__(self, tick: Tick, view: MemberView, prior: MemberEvidence | None) -> None:
        now, eff = tick.now, tick.eff
        self.view = view
        self.agent = agent = tick.match(view.terminal_id, view.name)
        self.raw = raw = agent.status if agent is not None else None
        seq = agent.state_change_seq if agent is not None else None
        turn = view.turn
        self.token = token = turn.token if turn is not None else None
        self.released = released = view.session_state is _S.RELEASED
        self.in_turn = in_turn = view.session_state is _S.BUSY and turn is not None
        # the member's replies wait in its owning lead's inbox, stranded once that push capped
        self.inbox_depth = view.uncollected_replies
        inbox: InboxView | None = None  # read only for a member with replies waiting
        self.stranded = (
            self.inbox_depth > 0
            and (inbox := tick.lead_inbox(view.owner_lead)) is not None
            and inbox.push_cap_reached
        )

        seq_changed = prior is not None and prior.seq is not None and seq != prior.seq
        same_raw = prior is not None and prior.raw_status is raw
        self.raw_streak = min(prior.raw_streak + 1, 2) if same_raw and prior is not None else 1
        probe = prior.probe if prior is not None else EMPTY_PROBE
        results = tick.probes.get(view.name)
        if results:
            probe = absorb_probe(probe, results, token)
        if probe.digest_last is not None or probe.signature is not None:  # else nothing to forget
            probe = settle_probe(probe, raw=raw, seq_changed=seq_changed, token=token)
        self.probe = probe
        self.absent = 0
        if agent is None and not released and view.session_state is not _S.SPAWNING:
            self.absent = min((prior.absent if prior is not None else 0) + 1, 2)

        # ranks 2-3 after the fact: a loss the bridge released the member for, reported once
        self.loss: TargetLoss | None = None
        if released and not (prior is not None and prior.loss_reported):
            self.loss = view.loss
        # rank 2: definitive target loss (the list worked, so the link is healthy)
        self.gone_code = None
        if not released:
            self.gone_code = (
                (prior.gone_code if prior is not None else None)
                or tick.not_found(view.name)
                or probe.not_found_code
            )
        # rank 3: startup and teardown invariants
        self.never_ready = view.session_state is _S.SPAWNING and (
            (prior is not None and prior.never_ready)
            or (
                not view.presence
                and (turn is not None or view.queued_sends > 0)
                and now - view.spawned_at >= eff.readiness_grace
            )
        )
        # the cause of a broken teardown invariant, once it outlived the grace (else None)
        self.orphan_cause = teardown_cause(view)
        self.orphaned = (
            self.orphan_cause
            if view.session_state in TORN_DOWN and now - view.state_since >= TEARDOWN_GRACE
            else None
        )
        # rank 4: two snapshots of the same token at the prompt, nothing in between
        started = (turn.delivered_at or turn.accepted_at) if turn is not None else None
        replied = started is not None and (
            view.last_reply_at is not None and view.last_reply_at >= started
        )
        self.boundary_token, self.boundary_count = None, 0
        if (
            in_turn
            and turn is not None
            and turn.waiter_open
            and raw in AT_PROMPT
            and not replied
            and not view.mute_events
        ):
            self.boundary_token, self.boundary_count = turn.token, 1
            if prior is not None and prior.boundary_token == turn.token and not seq_changed:
                self.boundary_count = min(prior.boundary_count + 1, 2)
        # ranks 5-6: screen evidence and timed suspicion need an open turn
        self.suspect_at = (
            started + eff.working_suspect_after if in_turn and started is not None else None
        )
        suspect = self.suspect_at is not None and now >= self.suspect_at
        self.fatal = (
            in_turn
            and raw is not None
            and raw is not LiveStatus.WORKING
            and probe.signature is not None
            and probe.signature_token == token
        )
        # rank 5 after the boundary: the fallback's read of the turn that just ended was fatal
        screen = view.boundary_screen
        self.boundary_fatal = (
            screen.signature_id
            if screen is not None
            and view.session_state is _S.DONE
            and turn is None
            and raw is not None
            and raw is not LiveStatus.WORKING
            else None
        )
        self.stalled = (
            suspect
            and raw is LiveStatus.WORKING
            and not replied
            and probe.digest_last is not None
            and probe.digest_prev == probe.digest_last
            and probe.digest_token == token
        )
        self.at_risk = _work_at_risk(view, self.inbox_depth, now, eff.long_idle_after)


def _work_at_risk(view: MemberView, inbox_depth: int, now: datetime, long_idle: timedelta) -> bool:
    facts = view.worktree
    if facts is None or not facts.commits_ahead or facts.commits_ahead <= 0:
        return False
    terminal = view.session_state in (_S.DONE, _S.FAILED) or (
        view.session_state is _S.RELEASED and facts.preserved
    )
    return (
        terminal
        and view.turn is None
        and view.queued_sends == 0
        and inbox_depth == 0
        and now - view.state_since >= long_idle
    )


def normal_state(
    view: MemberView, raw: LiveStatus | None, in_turn: bool, inbox_depth: int
) -> tuple[MemberState, str]:
    """Rank-8 normal mode from the session state and raw status (the table in the docstring)."""
    if view.session_state is _S.SPAWNING:
        return _M.STARTING, "spawning"
    if in_turn:
        if raw is LiveStatus.BLOCKED or raw is LiveStatus.UNKNOWN:
            return _M.BLOCKED_AMBIGUOUS, "open_turn_not_working"
        return _M.WORKING, "open_turn"
    if raw is LiveStatus.WORKING:
        return _M.WORKING, "no_open_turn"
    if view.queued_sends > 0 or inbox_depth > 0 or view.turn is not None:
        return _M.WORK_PENDING, "pending_input"
    return _M.IDLE, "at_prompt"


def teardown_cause(view: MemberView) -> str | None:
    """The cause code of a broken teardown invariant (§8.5), or ``None`` while it holds: pending
    tasks first, else the first part the bridge found broken."""
    if view.pending_tasks > 0:
        return PENDING_AFTER_TEARDOWN
    if view.teardown_violations:
        return view.teardown_violations[0]
    return None


def classify(seen: MemberSeen) -> tuple[MemberState, str]:
    """The highest-precedence state the evidence supports, and its cause code."""
    if seen.released:
        if seen.loss is not None:
            return _LOSS_STATES[seen.loss.cause], seen.loss.code
        if seen.orphaned is not None:
            return _M.DELEGATION_ORPHANED, seen.orphaned
        if seen.stranded:
            return _M.REPLY_STRANDED, "push_cap_reached"
        if seen.at_risk:
            return _M.WORK_PRODUCT_AT_RISK, "commits_ahead_of_base"
        return _M.RELEASED, "released"
    if seen.gone_code is not None:
        return _M.GONE, seen.gone_code
    if seen.never_ready:
        return _M.NEVER_READY, "readiness_grace_expired"
    if seen.orphaned is not None:
        return _M.DELEGATION_ORPHANED, seen.orphaned
    if seen.boundary_count >= 2:
        return _M.TURN_BOUNDARY_LOST, "busy_at_prompt"
    if seen.fatal and seen.probe.signature is not None:
        return _M.ERROR_ON_SCREEN, seen.probe.signature
    if seen.boundary_fatal is not None:
        return _M.ERROR_ON_SCREEN, seen.boundary_fatal
    if seen.stalled:
        return _M.STALL_SUSPECTED, "unchanged_progress_digest"
    if seen.stranded:
        return _M.REPLY_STRANDED, "push_cap_reached"
    if seen.at_risk:
        return _M.WORK_PRODUCT_AT_RISK, "commits_ahead_of_base"
    return normal_state(seen.view, seen.raw, seen.in_turn, seen.inbox_depth)
