"""Routing (M4 §7.3–§7.6, Figure 2): which lead, or which person, holds each open incident.

Theory of operation. :func:`route` runs beside ``decide``: open incidents (each with its current
:class:`~fleetd.health.incidents.Assignment`, or none yet) and lead health (:class:`LeadFacts`)
in, the incidents whose assignment changed and the effects that tell the runtime out. It is
total, deterministic and independent of input order. ``decide`` calls it once per tick, after
every incident of the tick is open or closed.

One incident's plan, first match wins:

1. **Control link** (scope ``control_link``) — a person (``human_control_link_down``): with the
   link to herdr down no lead can be reached or pushed (§4.3, §10.1).
1b. **Publication failing** — every other incident goes to a person
   (``human_publication_failed``, on behalf of its owner) while health records cannot reach the
   leads' inboxes: ``decide`` says so once the oldest record the inbox refused has waited two
   snapshot intervals (§10.1: "incident publication or routing itself fails"). When the inbox
   takes records again the incidents go back to their leads (a new generation; the person's
   undelivered events are cancelled).
2. **Owned** (a member incident's exact delegating lead, or the lead whose inbox key it is) —
   the owner while it is healthy (``owner``): known to health and not in a fault state. Never a
   guessed "primary" lead (§7.3). A healthy owner takes an incident that a person holds, but not
   one a peer holds (see *Pinning*).
3. **Owned by an unhealthy owner** — a healthy peer (``peer_owner_unhealthy``), on behalf of the
   owner. An owner health no longer knows (retired) counts as unhealthy.
4. **A member incident with no exact owner** — a person (``human_no_owner``; Figure 2: no lead
   is guessed for it).
5. **About a lead** (scope ``lead``) — a healthy peer (``peer_lead_incident``), never the lead
   itself, on behalf of it.
6. **Fleet-wide with no owning lead** (a profile's MUTE rate, an inbox key no lead owns) — a
   healthy peer (``peer_no_owner``).

The **peer set** (§7.4) holds the leads that are present in the latest successful list with a
known raw status other than UNKNOWN, classified LEAD_IDLE or LEAD_WORKING (a reachable working or
blocked peer is allowed: its push waits for an injectable window), and still in the identity map;
minus the incident's subject and its failed owner. The peer with the fewest assigned foreign
incidents (incidents it holds but does not own) wins; ties go to the smaller lead name, then the
smaller terminal id. An empty peer set sends the incident to a person
(``human_no_healthy_lead``); without a sink that leg is passive and coverage says so. One lead
and no peer is a normal deployment (§7.6): its own faults go to a person, and nothing here can
restart or replace a lead.

**Pinning.** An incident keeps its assignment while it stays valid: the owner while healthy; a
peer until that peer enters a fault state or retires (one missed sighting or an UNKNOWN raw
status does not move it) — §7.4: "Reassign only if that peer becomes unhealthy or retires", so
an owner that recovers does not pull its incident back while a healthy peer holds it, and a
flapping owner cannot bounce it between inboxes; a person while no lead can take it. The owner
still sees the incident (``fleet_list`` shows a lead the incidents it owns, with their recipient)
and takes it back only if the peer fails or retires. Otherwise it is reassigned: the
routing generation goes up by one, a :class:`~fleetd.health.effects.SupersedeAssignment` names
the previous recipient, and a :class:`~fleetd.health.effects.PublishHealthRecord` (under the new
recipient's inbox key) or :class:`~fleetd.health.effects.RouteToHuman` follows. Every generation
has exactly one recipient.

**Leads on other hosts** (issue 24). Several fleetd may share one journal and one RabbitMQ; each
publishes its leads' health with its instance summary, and a lead's inbox key is global. The
runtime hands :func:`route` the :class:`RemoteLead` values of the other live instances (a down
instance's leads are never among them). They are peers of last resort: a peer is chosen among
this instance's own peer set first, and only when that set is empty after the incident's
exclusions among the remote leads that are peer candidates (same exclusions; fewest assigned,
counting what their own instance assigned them plus what this pass and this instance's pinned
incidents hold, then instance name, then lead name). This instance's lead health is this tick's
evidence and its push can name the failed lead, while a remote lead's health is as old as its
summary; so a team's own healthy peer always wins, and a lead on another host takes an incident
only when no lead here can — a dead lead's incidents reach the only healthy lead of the team
even when it runs on another host. A remote recipient is pinned like a local peer: it keeps the
incident while its instance is live and it is healthy, and the instance that owns the incident
keeps owning it (and its journal row).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from fleetd.health.effects import (
    Effect,
    PublishHealthRecord,
    RouteToHuman,
    SupersedeAssignment,
)
from fleetd.health.evidence import LeadEvidence
from fleetd.health.fact import fact
from fleetd.health.incidents import Assignment, Incident, Route, RoutingReason
from fleetd.health.snapshot import LiveStatus, RemoteLead
from fleetd.health.states import FAULT_LEAD_STATES, PEER_STATES, LeadState, Scope

__all__ = [
    "PEER_STATES",
    "LeadFacts",
    "RemoteLead",
    "Routing",
    "foreign_assignments",
    "lead_facts",
    "route",
]

_R = RoutingReason


@fact  # one per lead a routing pass
class LeadFacts:
    """What routing weighs about one lead health knows.

    ``present``: seen in the latest successful fleet list (a missed sighting, a ``*_not_found``
    or a lead never seen is not present). ``retiring``: gone from the identity map, inside its
    two-successful-snapshot retirement grace.
    """

    name: str
    terminal_id: str | None
    state: LeadState
    raw_status: LiveStatus | None
    present: bool
    retiring: bool = False

    @property
    def healthy(self) -> bool:
        """Not in an open unhealthy (fault) state."""
        return self.state not in FAULT_LEAD_STATES

    @property
    def peer_candidate(self) -> bool:
        """May be chosen as a new peer recipient (before per-incident exclusions)."""
        return (
            self.present
            and not self.retiring
            and self.state in PEER_STATES
            and self.raw_status is not None
            and self.raw_status is not LiveStatus.UNKNOWN
        )


def lead_facts(evidence: LeadEvidence) -> LeadFacts:
    """The routing view of a lead's retained evidence.

    The raw status is ``None`` exactly when the latest successful list did not show the lead
    (blind ticks keep the evidence of the last sighted one).
    """
    return LeadFacts(
        name=evidence.name,
        terminal_id=evidence.terminal_id,
        state=evidence.state,
        raw_status=evidence.raw_status,
        present=evidence.raw_status is not None,
        retiring=evidence.identity_missing > 0,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Routing:
    """The result of one routing pass.

    ``routed``: the incidents whose assignment changed, each carrying its new assignment, in key
    order. ``load``: foreign incidents assigned per known lead after the pass.
    """

    routed: tuple[Incident, ...]
    effects: tuple[Effect, ...]
    load: Mapping[str, int]


class _Kind(Enum):
    OWNER = 1
    PEER = 2
    HUMAN = 3


@dataclass(frozen=True, slots=True)
class _Plan:
    kind: _Kind
    reason: RoutingReason
    on_behalf_of: str | None = None
    excluded: tuple[str, ...] = ()


_TO_OWNER = _Plan(_Kind.OWNER, _R.OWNER)
_LINK_DOWN = _Plan(_Kind.HUMAN, _R.HUMAN_CONTROL_LINK_DOWN)
_NO_OWNER = _Plan(_Kind.HUMAN, _R.HUMAN_NO_OWNER)
_INSTANCE_DOWN = _Plan(_Kind.HUMAN, _R.HUMAN_INSTANCE_DOWN)


def _plan(incident: Incident, leads: Mapping[str, LeadFacts], unpublishable: bool) -> _Plan:
    key = incident.key
    scope, owner = key.scope, incident.owner_lead
    if scope is Scope.INSTANCE:
        return _INSTANCE_DOWN  # no lead can act on a fleetd that is gone
    if owner is not None and not unpublishable:
        facts = leads.get(owner)
        if facts is not None and facts.healthy and scope is not Scope.CONTROL_LINK:
            return _TO_OWNER
    if scope is Scope.CONTROL_LINK:
        return _LINK_DOWN
    if unpublishable:
        about = owner if owner is not None else (key.subject if scope is Scope.LEAD else None)
        return _Plan(_Kind.HUMAN, _R.HUMAN_PUBLICATION_FAILED, about)
    subject = (key.subject,) if scope in (Scope.LEAD, Scope.INBOX) else ()
    if owner is not None:
        return _Plan(_Kind.PEER, _R.PEER_OWNER_UNHEALTHY, owner, (owner, *subject))
    if scope is Scope.MEMBER:
        return _NO_OWNER
    if scope is Scope.LEAD:
        return _Plan(_Kind.PEER, _R.PEER_LEAD_INCIDENT, incident.subject, subject)
    return _Plan(_Kind.PEER, _R.PEER_NO_OWNER, None, subject)


def _holds(
    prior: Assignment,
    plan: _Plan,
    owner: str | None,
    leads: Mapping[str, LeadFacts],
    remote: Mapping[str, RemoteLead],
) -> bool:
    """Whether the pinned ``prior`` assignment still serves ``plan``."""
    if (
        plan.kind is _Kind.OWNER
        and prior.reason is _R.PEER_OWNER_UNHEALTHY
        and prior.recipient is not None
    ):
        # §7.4: a peer standing in for the owner keeps the incident while it is healthy and
        # known; the owner's recovery alone does not pull it back
        return _healthy_peer(prior.recipient, (), leads, remote)
    if prior.reason is not plan.reason:
        return False
    if plan.kind is _Kind.OWNER:
        return prior.recipient == owner
    if plan.kind is _Kind.HUMAN or prior.recipient is None:
        return plan.kind is _Kind.HUMAN
    return _healthy_peer(prior.recipient, plan.excluded, leads, remote)


def _healthy_peer(
    recipient: str,
    excluded: tuple[str, ...],
    leads: Mapping[str, LeadFacts],
    remote: Mapping[str, RemoteLead],
) -> bool:
    """The lead ``recipient`` is known (here, or on a live instance), not in a fault state and
    not excluded."""
    if recipient in excluded:
        return False
    facts = leads.get(recipient)
    if facts is not None:
        return facts.healthy
    other = remote.get(recipient)
    return other is not None and other.healthy


def _remote_index(
    remote: Iterable[RemoteLead], local: Mapping[str, LeadFacts]
) -> dict[str, RemoteLead]:
    """The remote leads by name: a name this instance serves is its own evidence, and a name two
    instances list is the smaller instance's (a lead's inbox key is global)."""
    index: dict[str, RemoteLead] = {}
    for lead in sorted(remote, key=lambda r: (r.name, r.instance)):
        if lead.name not in local and lead.name not in index:
            index[lead.name] = lead
    return index


_NAME_AT_LOCAL = 1  # (load, lead name, terminal id)
_NAME_AT_REMOTE = 2  # (load, instance, lead name)


def _take(heap: list[tuple[int, str, str]], excluded: tuple[str, ...], name_at: int) -> str | None:
    """Pop the least-loaded candidate not excluded, charge it one incident, push it back."""
    skipped: list[tuple[int, str, str]] = []
    chosen: tuple[int, str, str] | None = None
    while heap:
        entry = heapq.heappop(heap)
        if entry[name_at] in excluded:
            skipped.append(entry)
            continue
        chosen = entry
        break
    for entry in skipped:
        heapq.heappush(heap, entry)
    if chosen is None:
        return None
    heapq.heappush(heap, (chosen[0] + 1, chosen[1], chosen[2]))
    return str(chosen[name_at])


def route(
    incidents: Iterable[Incident],
    leads: Iterable[LeadFacts],
    *,
    remote: Iterable[RemoteLead] = (),
    publication_failed: bool = False,
) -> Routing:
    """Assign every open incident in ``incidents`` to a lead or a person (see the module doc);
    ``remote``: the leads of the other live instances (peers of last resort);
    ``publication_failed``: health records cannot reach the leads' inboxes (plan 1b)."""
    listed = list(leads)
    index = {facts.name: facts for facts in listed}
    if len(index) != len(listed):
        raise ValueError("route() needs one LeadFacts per lead name")
    others = _remote_index(remote, index)
    load = dict.fromkeys(index, 0)
    remote_load = {name: lead.assigned for name, lead in others.items()}
    pending: list[tuple[Incident, _Plan]] = []
    for incident in incidents:
        plan = _plan(incident, index, publication_failed)
        prior = incident.assignment
        if prior is not None and _holds(prior, plan, incident.owner_lead, index, others):
            if prior.recipient is not None and prior.recipient != incident.owner_lead:
                if prior.recipient in load:
                    load[prior.recipient] += 1  # a foreign incident it holds
                else:
                    remote_load[prior.recipient] += 1
            continue
        pending.append((incident, plan))
    if not pending:
        return Routing(routed=(), effects=(), load=load)

    heap = [
        (load[facts.name], facts.name, facts.terminal_id or "")
        for facts in index.values()
        if facts.peer_candidate
    ]
    heapq.heapify(heap)
    remote_heap = [
        (remote_load[name], lead.instance, name)
        for name, lead in others.items()
        if lead.peer_candidate
    ]
    heapq.heapify(remote_heap)
    pending.sort(key=lambda pair: _order(pair[0]))
    routed: list[Incident] = []
    effects: list[Effect] = []
    for incident, plan in pending:
        prior = incident.assignment
        generation = prior.generation + 1 if prior is not None else 1
        recipient: str | None = None
        reason = plan.reason
        if plan.kind is _Kind.OWNER:
            recipient = incident.owner_lead
        elif plan.kind is _Kind.PEER:
            recipient = _take(heap, plan.excluded, _NAME_AT_LOCAL)
            if recipient is not None:
                load[recipient] += 1
            else:  # no peer here: a lead on another live instance, if one can take it
                recipient = _take(remote_heap, plan.excluded, _NAME_AT_REMOTE)
            if recipient is None:
                reason = _R.HUMAN_NO_HEALTHY_LEAD
        new = Assignment(
            route=Route.HUMAN if recipient is None else Route.LEAD,
            recipient=recipient,
            reason=reason,
            generation=generation,
            on_behalf_of=plan.on_behalf_of,
        )
        if prior is not None and replace(prior, generation=generation) == new:
            continue  # still no lead can take it: the person keeps it, nothing to say again
        updated = incident.routed(new)
        routed.append(updated)
        if prior is not None:
            effects.append(SupersedeAssignment(incident=updated, previous=prior))
        effects.append(_deliver(updated, new, index, others))
    return Routing(routed=tuple(routed), effects=tuple(effects), load=load)


def _order(incident: Incident) -> tuple[str, str, str, str]:
    key = incident.key
    return (key.scope, key.subject, key.state, key.cause)


def _deliver(
    incident: Incident,
    assignment: Assignment,
    index: Mapping[str, LeadFacts],
    remote: Mapping[str, RemoteLead],
) -> PublishHealthRecord | RouteToHuman:
    if assignment.recipient is None:
        return RouteToHuman(
            incident=incident,
            generation=assignment.generation,
            reason=assignment.reason,
            on_behalf_of=assignment.on_behalf_of,
        )
    local = index.get(assignment.recipient)
    return PublishHealthRecord(
        recipient_lead=assignment.recipient,
        incident=incident,
        generation=assignment.generation,
        reason=assignment.reason,
        on_behalf_of=assignment.on_behalf_of,
        recipient_terminal=local.terminal_id if local is not None else None,
        recipient_instance=None if local is not None else remote[assignment.recipient].instance,
    )


def foreign_assignments(incidents: Iterable[Incident]) -> dict[str, list[Incident]]:
    """Per lead, the open incidents it holds but does not own (its foreign assignments)."""
    held: dict[str, list[Incident]] = {}
    for incident in incidents:
        recipient = incident.recipient_lead
        if recipient is not None and recipient != incident.owner_lead:
            held.setdefault(recipient, []).append(incident)
    return held
