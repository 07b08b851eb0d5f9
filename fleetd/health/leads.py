"""Lead classification (M4 §4.4): reachable or not, busy or idle, collecting or not.

Identity comes from the expected-lead supplier (the snapshot's ``leads``); liveness comes only
from a successful ``agent.list``. Rules, highest first:

* LEAD_UNREACHABLE — a per-target call or pane read answered ``*_not_found`` (the list worked,
  so the link is healthy) and this list misses the lead too, or the lead was absent from two
  consecutive successful lists while ping did not fail. Absence from one list alone is no
  evidence: the lead keeps its prior state (and incident) while the absence is counted; a lead
  never yet classified has only the nothing-known-yet LEAD_STATUS_UNKNOWN (cause
  ``not_seen_yet``) the blind start also uses.
* LEAD_UNRESPONSIVE — present at its prompt (raw IDLE or DONE), actionable records wait, the
  bounded nudges reached their cap, and the unresponsive delay (floored) has passed since.
* LEAD_STALL_SUSPECTED — raw WORKING past the suspect threshold and two progress digests of this
  working stretch are equal. Never killed or restarted.
* LEAD_STATUS_UNKNOWN — raw UNKNOWN (neither dead nor a healthy routing target); otherwise only
  for a lead nothing is known about yet.
* LEAD_WORKING — raw WORKING, or raw BLOCKED (reachable, not injectable: pushes wait).
* LEAD_IDLE — raw IDLE or DONE with nothing actionable stuck.

A lead that drops out of the identity map is kept, with its retained identity, for a
two-successful-snapshot retirement grace (§4.4). A configured lead (removed from the
configuration) then retires whatever its state — also when its agent is gone — and its own open
incident resolves as ``subject_retired``; a discovered identity stays longer while it is in a
fault state, so a dead lead cannot escape health by vanishing from a scanner's map (``decide``).
"""

from __future__ import annotations

from typing import Any, Final

from fleetd.health.effects import RequestTargetLookup
from fleetd.health.evidence import EMPTY_PROBE, LeadEvidence
from fleetd.health.floors import TWO_SNAPSHOTS
from fleetd.health.incidents import Evidence, IncidentKey
from fleetd.health.pane_budget import ProbeCandidate, ProbeReason
from fleetd.health.snapshot import AT_PROMPT, LeadView, LiveStatus, ProbeSource
from fleetd.health.states import LeadState, Scope, spec_of
from fleetd.health.tick import Tick, absorb_probe, settle_probe

__all__ = ["FINAL_READ_LEAD_STATES", "retained_view", "step_lead", "step_lead_blind"]

FINAL_READ_LEAD_STATES: Final = frozenset({LeadState.LEAD_UNRESPONSIVE})
"""Confirmed lead faults that earn one final visible read while the pane exists."""

_L = LeadState


def retained_view(evidence: LeadEvidence) -> LeadView:
    """The identity health keeps for a lead the supplier no longer lists."""
    return LeadView(
        name=evidence.name,
        agent_name=evidence.agent_name,
        terminal_id=evidence.terminal_id,
        configured=evidence.configured,
        discovered=evidence.discovered,
    )


def step_lead_blind(
    tick: Tick, view: LeadView, prior: LeadEvidence | None, identity_missing: int
) -> LeadEvidence:
    """A tick without a usable live view changes nothing about a known lead (§4.3)."""
    if prior is not None:
        return prior
    return LeadEvidence(
        name=view.name,
        agent_name=view.agent_name,
        terminal_id=view.terminal_id,
        configured=view.configured,
        discovered=view.discovered,
        state=_L.LEAD_STATUS_UNKNOWN,
        cause="no_live_view",
        since=tick.now,
        identity_missing=identity_missing,
    )


class _Seen:
    """What one tick observed about one lead."""

    __slots__ = (
        "absent",
        "agent",
        "first_seen",
        "last_seen",
        "lookup_error",
        "lookup_failures",
        "not_found",
        "probe",
        "raw",
        "raw_since",
        "suspect",
        "token",
    )

    def __init__(self, tick: Tick, view: LeadView, prior: LeadEvidence | None) -> None:
        now = tick.now
        self.agent = agent = tick.match(view.terminal_id, view.agent_name)
        self.raw = raw = agent.status if agent is not None else None
        seq = agent.state_change_seq if agent is not None else None
        same_raw = prior is not None and prior.raw_status is raw and prior.raw_since is not None
        self.raw_since = raw_since = prior.raw_since if same_raw and prior else now
        assert raw_since is not None
        seq_changed = prior is not None and prior.seq is not None and seq != prior.seq
        working = raw is LiveStatus.WORKING
        self.token = token = f"working@{raw_since.isoformat()}" if working else None
        self.suspect = working and now - raw_since >= tick.eff.working_suspect_after

        probe = prior.probe if prior is not None else EMPTY_PROBE
        results = tick.probes.get(view.agent_name)
        if results:
            probe = absorb_probe(probe, results, token)
        self.probe = settle_probe(probe, raw=raw, seq_changed=seq_changed, token=token)

        prior_absent = prior.absent if prior is not None else 0
        if agent is None:
            # a failed ping makes an absence no evidence; an unmeasured one does not
            counted = tick.ping_ok is not False
            self.absent = min(prior_absent + 1, TWO_SNAPSHOTS) if counted else prior_absent
            self.last_seen = prior.last_seen_at if prior is not None else None
            held = prior.not_found_code if prior is not None else None
            held = held or self.probe.not_found_code
            self.not_found = tick.not_found(view.agent_name) or held
        else:
            # sighted in this list: a ``*_not_found`` of a lookup made since the last one (the
            # lead was relaunched under its name in between) is older news, not a loss
            self.absent, self.last_seen, self.not_found = 0, now, None
        first = prior.first_seen_at if prior is not None else None
        self.first_seen = first or (now if agent is not None else None)
        # the last failed per-target call's code survives; its streak ends with a sighting
        code = tick.targeted.get(view.agent_name)
        self.lookup_error = code or (prior.lookup_error if prior is not None else None)
        streak = prior.lookup_failures if prior is not None and agent is None else 0
        self.lookup_failures = streak + 1 if code is not None else streak


def _classify(
    tick: Tick, view: LeadView, seen: _Seen, prior: LeadEvidence | None
) -> tuple[LeadState, str]:
    if seen.not_found is not None or seen.absent >= TWO_SNAPSHOTS:
        return _L.LEAD_UNREACHABLE, "target_lost"
    if seen.agent is None:  # one absence proves nothing (§4.4): keep what was known
        if prior is not None:
            return prior.state, prior.cause
        return _L.LEAD_STATUS_UNKNOWN, "not_seen_yet"
    raw = seen.raw
    if raw in AT_PROMPT:
        cap_at = view.nudge_cap_reached_at
        if (
            view.actionable_waiting > 0
            and cap_at is not None
            and tick.now - cap_at >= tick.eff.lead_unresponsive_after
        ):
            return _L.LEAD_UNRESPONSIVE, "nudges_exhausted"
        return _L.LEAD_IDLE, "at_prompt"
    if raw is LiveStatus.WORKING:
        probe = seen.probe
        if (
            seen.suspect
            and probe.digest_last is not None
            and probe.digest_prev == probe.digest_last
            and probe.digest_token == seen.token
        ):
            return _L.LEAD_STALL_SUSPECTED, "unchanged_progress_digest"
        return _L.LEAD_WORKING, "raw_working"
    if raw is LiveStatus.BLOCKED:
        return _L.LEAD_WORKING, "raw_blocked"
    return _L.LEAD_STATUS_UNKNOWN, "raw_unknown"


def _candidate(
    view: LeadView, seen: _Seen, state: LeadState, final_read_state: LeadState | None
) -> ProbeCandidate | None:
    if seen.agent is None:
        return None
    if state in FINAL_READ_LEAD_STATES and final_read_state is not state:
        reason, source = ProbeReason.FINAL_EVIDENCE, ProbeSource.VISIBLE
    elif seen.suspect:
        reason, source = ProbeReason.WORKING_SUSPECT, ProbeSource.RECENT_UNWRAPPED
    else:
        return None
    return ProbeCandidate(
        target=view.agent_name,
        pane_id=seen.agent.pane_id,
        source=source,
        reason=reason,
        scope=Scope.LEAD,
        subject=view.name,
    )


def step_lead(
    tick: Tick, view: LeadView, prior: LeadEvidence | None, identity_missing: int
) -> LeadEvidence:
    """Classify one lead against a successful fleet list and return its new evidence."""
    seen = _Seen(tick, view, prior)
    if seen.agent is None and seen.not_found is None:
        tick.effects.append(RequestTargetLookup(target=view.agent_name))
    state, cause = _classify(tick, view, seen, prior)
    entered = prior is None or prior.state is not state

    final_read_state = prior.final_read_state if prior is not None else None
    candidate = _candidate(view, seen, state, final_read_state)
    if candidate is not None:
        tick.candidates.append(candidate)

    desired = (
        IncidentKey(scope=Scope.LEAD, subject=view.name, state=state, cause=cause)
        if spec_of(state).opens_incident
        else None
    )
    current = prior.incident if prior is not None else None
    if current != desired:
        tick.sync_incident(
            current, desired, target=view.agent_name, evidence=_evidence(tick, view, seen)
        )

    return LeadEvidence(
        name=view.name,
        agent_name=view.agent_name,
        terminal_id=view.terminal_id,
        configured=view.configured,
        discovered=view.discovered,
        state=state,
        cause=cause,
        since=tick.now if entered or prior is None else prior.since,
        raw_status=seen.raw,
        raw_since=seen.raw_since,
        seq=seen.agent.state_change_seq if seen.agent is not None else None,
        absent=seen.absent,
        first_seen_at=seen.first_seen,
        last_seen_at=seen.last_seen,
        not_found_code=seen.not_found if seen.agent is None else None,
        lookup_error=seen.lookup_error,
        lookup_failures=seen.lookup_failures,
        probe=seen.probe,
        final_read_state=final_read_state,
        identity_missing=identity_missing,
        incident=desired,
        **_reported(view if identity_missing == 0 or prior is None else prior),
    )


def _reported(source: LeadView | LeadEvidence) -> dict[str, Any]:
    """The bridge's report about a lead: from this tick's view, or kept from the last one the
    identity map still listed (a retained identity carries no report of its own)."""
    return {
        "actionable_waiting": source.actionable_waiting,
        "oldest_actionable_at": source.oldest_actionable_at,
        "nudges_sent": source.nudges_sent,
        "nudge_cap_reached_at": source.nudge_cap_reached_at,
        "push_status": source.push_status,
        "last_push_error": source.last_push_error,
        "last_nudge_at": source.last_nudge_at,
        "last_heartbeat_at": source.last_heartbeat_at,
    }


def _evidence(tick: Tick, view: LeadView, seen: _Seen) -> Evidence:
    """Codes and counts a lead incident opens with: never pane text."""
    pairs = [
        ("raw_status", str(seen.raw or "absent")),
        ("consecutive_absences", str(seen.absent)),
        ("actionable_waiting", str(view.actionable_waiting)),
        ("nudges_sent", str(view.nudges_sent)),
    ]
    if view.oldest_actionable_at is not None:
        age = max(0, int((tick.now - view.oldest_actionable_at).total_seconds()))
        pairs.append(("oldest_actionable_seconds", str(age)))
    if seen.lookup_error is not None:
        pairs.append(("lookup_error", seen.lookup_error))
    return tuple(pairs)
