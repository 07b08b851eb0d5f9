"""``decide(snapshot, prior, now)``: one pure fleet-health tick.

Theory of operation. The runtime calls :func:`decide` once per enabled tick with the snapshot it
just took, the :class:`~fleetd.health.evidence.HealthState` the previous call returned, and the
tick's time. ``decide`` classifies, in this order:

1. the control link (:mod:`~fleetd.health.link`) — it decides whether this tick can see at all;
2. every expected lead (:mod:`~fleetd.health.leads`) — member routing needs lead health;
3. every member (:mod:`~fleetd.health.members`), then the MUTE overlay;
4. inbox keys that belong to no lead, inbox decode failures (:mod:`~fleetd.health.inboxes`;
   they need no herdr sighting), and per-profile MUTE rates;
5. the pane budget (:mod:`~fleetd.health.pane_budget`) over the candidates the steps collected;
6. routing (:mod:`~fleetd.health.routing`): every open incident keeps or gets its recipient — its
   owning lead, a healthy peer, or a person — from the lead health this tick settled. Open and
   update effects of the tick carry the incident as routed.

When the fleet list failed the tick is *blind*: live-derived evidence, classifications and
incidents of leads and members stay exactly as they were (a failed list alone never claims a
dead member, and CONTROL_LINK_DOWN hides member faults), no pane is read and no lookup is made.
Subjects that left the bridge's view retire even then: their incidents resolve.

It returns a :class:`Decision`: the next state and the effects, sorted by
:func:`~fleetd.health.effects.effect_order`. Incident effects are edge-triggered. Nothing here
does I/O, reads a clock, logs or draws random numbers; the same inputs in any order give the same
decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from fleetd.health.adoption import settle_adopted
from fleetd.health.effects import (
    Effect,
    OpenIncident,
    RecordTransition,
    RequestLostBoundaryRepair,
    RequestPaneProbe,
    RetireLead,
    UpdateIncident,
    effect_order,
)
from fleetd.health.evidence import HealthState, LeadEvidence, MemberEvidence
from fleetd.health.floors import TWO_SNAPSHOTS
from fleetd.health.inboxes import step_inboxes
from fleetd.health.incidents import Incident, IncidentBook, IncidentKey, ResolveReason
from fleetd.health.instances import instance_is_down
from fleetd.health.leads import retained_view, step_lead, step_lead_blind
from fleetd.health.link import LINK_SUBJECT, step_link
from fleetd.health.member_index import MemberIndex
from fleetd.health.member_pass import changed_members, every_member
from fleetd.health.mute import rate_exceeded, record_mutes
from fleetd.health.pane_budget import ProbeReason, allocate
from fleetd.health.repair import repair_requests_after
from fleetd.health.routing import lead_facts, route
from fleetd.health.settings import Effective
from fleetd.health.snapshot import FleetSnapshot
from fleetd.health.states import FAULT_LEAD_STATES, MemberState, Scope
from fleetd.health.tick import Tick

__all__ = ["Decision", "decide"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The result of one tick: the state to pass back next time, and the effects to dispatch."""

    state: HealthState
    effects: tuple[Effect, ...]


def decide(snapshot: FleetSnapshot, prior: HealthState, now: datetime) -> Decision:
    """Classify the fleet in ``snapshot`` against ``prior`` evidence at ``now``."""
    steady = prior.settings is not None and (
        prior.settings == snapshot.config
        or Effective.of(prior.settings).member_timers()
        == Effective.of(snapshot.config).member_timers()
    )
    book = IncidentBook(
        prior.incidents, prior.generations, prior.namespace, floor=prior.generation_floor
    )
    tick = Tick(snapshot, book, now, steady=steady, adopted=prior.adopted, agents=prior.agents)
    link = step_link(tick, snapshot.live, prior.link)
    if link.state is not prior.link.state:
        tick.effects.append(
            RecordTransition(
                scope=Scope.CONTROL_LINK,
                subject=LINK_SUBJECT,
                target=None,
                previous=prior.link.state,
                current=link.state,
                at=now,
            )
        )
    sighted = snapshot.live.list_ok
    leads = _leads(tick, snapshot, prior.leads, sighted)
    index = prior.index
    if index is not None and not (sighted and steady and index.resume(snapshot, prior.members)):
        index = None
    asked = index.to_ask(snapshot, now, tick.touched) if index is not None else None
    if index is None or asked is None:
        members = every_member(tick, snapshot, prior.members, sighted)
    else:
        members = changed_members(tick, snapshot, prior.members, asked, index.offering)
    if sighted:
        _orphan_inboxes(tick, snapshot)
    step_inboxes(tick, snapshot)
    profile_mutes = _profile_mutes(tick, prior.profile_mutes, sighted)
    cursor, recent = prior.probe_cursor, prior.recent_reads
    granted: tuple[str, ...] = ()
    if sighted:
        cursor, recent, granted = _spend_budget(tick, members, leads, cursor, recent)
    if index is not None and asked is not None:
        index = index.handed_on(snapshot, members, asked, granted)
    elif sighted:
        index = MemberIndex.build(snapshot, members)
    adopted = settle_adopted(tick, sighted=sighted) if tick.adopted else tick.adopted
    _route(tick, leads, snapshot)
    state = HealthState(
        taken_at=now,
        link=link,
        members=members,
        leads=leads,
        incidents=tick.book.open,
        generations=tick.book.generations,
        generation_floor=prior.generation_floor,
        profile_mutes=profile_mutes,
        probe_cursor=cursor,
        recent_reads=recent,
        settings=snapshot.config,
        adopted=adopted,
        namespace=prior.namespace,
        index=index,
        agents=tick.agents,
    )
    return Decision(state=state, effects=tuple(sorted(tick.effects, key=effect_order)))


def _leads(
    tick: Tick, snapshot: FleetSnapshot, prior: Mapping[str, LeadEvidence], sighted: bool
) -> dict[str, LeadEvidence]:
    step = step_lead if sighted else step_lead_blind
    result: dict[str, LeadEvidence] = {}
    listed = {view.name for view in snapshot.leads}
    for view in snapshot.leads:
        before = prior.get(view.name)
        result[view.name] = after = step(tick, view, before, 0)
        tick.transition(
            Scope.LEAD, subject=view.name, target=view.agent_name, before=before, after=after
        )
    for name in sorted(prior.keys() - listed):
        before = prior[name]
        missing = min(before.identity_missing + (1 if sighted else 0), TWO_SNAPSHOTS)
        if missing >= TWO_SNAPSHOTS and before.configured:
            _retire(tick, before)  # removed from the configuration: whatever its state
            continue
        after = step(tick, retained_view(before), before, missing)
        if (
            missing >= TWO_SNAPSHOTS
            and after.raw_status is not None
            and after.state not in FAULT_LEAD_STATES
        ):
            # a discovered identity retires after the grace only when seen alive outside a
            # fault state: a dead lead cannot escape health by vanishing from a scanner's map
            _retire(tick, after)
            continue
        result[name] = after
        tick.transition(
            Scope.LEAD, subject=name, target=before.agent_name, before=before, after=after
        )
    return result


def _retire(tick: Tick, lead: LeadEvidence) -> None:
    """Retire a lead the identity map has not listed for two successful snapshots. A configured
    lead retires whatever its state — it was removed from the configuration — so its own open
    incident (an unreachable lead whose agent is gone, say) resolves as ``subject_retired``
    instead of reminding a person of a lead nobody expects any more. Incidents it holds or owns
    move on in this tick's routing."""
    closed = tick.book.close(lead.incident) if lead.incident is not None else None
    if closed is not None:
        tick.emit_resolved(closed, ResolveReason.SUBJECT_RETIRED)
    tick.effects.append(
        RetireLead(lead=lead.name, agent_name=lead.agent_name, terminal_id=lead.terminal_id)
    )


def _route(tick: Tick, leads: Mapping[str, LeadEvidence], snapshot: FleetSnapshot) -> None:
    """Assign the tick's open incidents; open and update effects then carry them as routed.
    Publication has failed once a refused health record waited two snapshot intervals. The
    leads of another instance are peers only while that instance is live at ``tick.now``, by
    its own renewal interval."""
    since = snapshot.unpublished_since
    interval = snapshot.config.snapshot_interval
    failed = since is not None and tick.now - since >= TWO_SNAPSHOTS * interval
    routing = route(
        tick.book.open.values(),
        [lead_facts(e) for e in leads.values()],
        remote=[
            lead
            for lead in snapshot.remote_leads
            if not instance_is_down(lead.last_seen, now=tick.now, interval=lead.renew_every)
        ],
        publication_failed=failed,
    )
    if not routing.routed:
        return
    tick.book.store(routing.routed)
    routed = {incident.id: incident for incident in routing.routed}
    tick.effects = [_as_routed(effect, routed) for effect in tick.effects]
    tick.effects.extend(routing.effects)


def _as_routed(effect: Effect, routed: Mapping[str, Incident]) -> Effect:
    """An open or update effect of a routed incident, carrying the incident as routed."""
    if isinstance(effect, OpenIncident) and effect.incident.id in routed:
        return OpenIncident(incident=routed[effect.incident.id])
    if isinstance(effect, UpdateIncident) and effect.incident.id in routed:
        return UpdateIncident(incident=routed[effect.incident.id])
    return effect


def _open_keys(tick: Tick, scope: Scope) -> set[IncidentKey]:
    return {key for key in tick.book.open if key.scope is scope}


def _orphan_inboxes(tick: Tick, snapshot: FleetSnapshot) -> None:
    """REPLY_STRANDED for inbox keys that belong to no lead in view.

    An inbox key is a lead's ``name`` (never its herdr agent name); a lead in view answers for
    its own inbox through LEAD_UNRESPONSIVE, and its members through their own REPLY_STRANDED.
    """
    stranded = [i.key for i in snapshot.inboxes if i.depth > 0 and i.push_cap_reached]
    desired: set[IncidentKey] = set()
    if stranded:
        owned = {v.name for v in snapshot.leads}
        desired = {
            IncidentKey(
                scope=Scope.INBOX,
                subject=key,
                state=MemberState.REPLY_STRANDED,
                cause="push_cap_reached",
            )
            for key in stranded
            if key not in owned
        }
    current = {k for k in _open_keys(tick, Scope.INBOX) if k.state is MemberState.REPLY_STRANDED}
    _sync_set(tick, current, desired)


def _profile_mutes(
    tick: Tick,
    prior: Mapping[str, tuple[datetime, ...]],
    sighted: bool,
) -> dict[str, tuple[datetime, ...]]:
    """Per-profile MUTE rate: counted always, incidents only on a sighted tick."""
    events = tick.mutes_by_profile
    result: dict[str, tuple[datetime, ...]] = {}
    for profile in prior.keys() | events.keys():
        times = record_mutes(prior.get(profile, ()), events.get(profile, 0), tick.now)
        if times:
            result[profile] = times
    if sighted:
        desired = {
            IncidentKey(
                scope=Scope.PROFILE,
                subject=profile,
                state=MemberState.MUTE,
                cause="completion_fallback",
            )
            for profile, times in result.items()
            if rate_exceeded(times)
        }
        _sync_set(tick, _open_keys(tick, Scope.PROFILE), desired)
    return result


def _sync_set(tick: Tick, current: set[IncidentKey], desired: set[IncidentKey]) -> None:
    for key in sorted(current - desired):
        tick.sync_incident(key, None, target=None)
    for key in sorted(desired - current):
        tick.sync_incident(None, key, target=None)


def _spend_budget(
    tick: Tick,
    members: dict[str, MemberEvidence],
    leads: dict[str, LeadEvidence],
    cursor: str,
    recent: Mapping[str, datetime],
) -> tuple[str, Mapping[str, datetime], tuple[str, ...]]:
    """Grant at most two reads and record one-shot grants in their subject's evidence; also
    returns the members granted one."""
    granted, cursor, recent = allocate(
        tick.candidates,
        cursor=cursor,
        recent=recent,
        now=tick.now,
        cooldown=tick.eff.pane_cooldown,
    )
    for grant in granted:
        if grant.scope is Scope.LEAD:
            lead = leads[grant.subject]
            leads[grant.subject] = replace(
                lead,
                final_read_state=(
                    lead.state
                    if grant.reason is ProbeReason.FINAL_EVIDENCE
                    else lead.final_read_state
                ),
            )
        else:
            member = members[grant.subject]
            members[grant.subject] = replace(
                member,
                recheck_at=None,
                repair_token=(
                    grant.token
                    if grant.reason is ProbeReason.LOST_BOUNDARY
                    else member.repair_token
                ),
                repair_requests=(
                    repair_requests_after(member.repair_token, member.repair_requests, grant.token)
                    if grant.reason is ProbeReason.LOST_BOUNDARY
                    else member.repair_requests
                ),
                final_read_state=(
                    member.state
                    if grant.reason is ProbeReason.FINAL_EVIDENCE
                    else member.final_read_state
                ),
            )
        if grant.source is None:
            assert grant.token is not None
            tick.effects.append(
                RequestLostBoundaryRepair(
                    target=grant.target, session_id=grant.subject, token=grant.token
                )
            )
        else:
            tick.effects.append(
                RequestPaneProbe(
                    target=grant.target,
                    pane_id=grant.pane_id,
                    source=grant.source,
                    reason=grant.reason,
                )
            )
    members_read = tuple(g.subject for g in granted if g.scope is not Scope.LEAD)
    return cursor, recent, members_read
