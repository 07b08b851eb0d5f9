"""The working context of one ``decide`` call: indexes over the snapshot, the incident book, and
the effects and pane candidates collected so far.

Indexes are built deterministically: when two live agents claim the same terminal id or name
(ambiguous herdr data), the one with the smallest pane id wins, so the result never depends on
the order of ``agent.list``. Incident opening and closing go through :meth:`Tick.sync_incident`,
the single place where an incident edge becomes effects; who receives an incident is decided
once per tick afterwards, by :func:`~fleetd.health.routing.route`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fleetd.health.agent_index import AgentIndex
from fleetd.health.effects import (
    Effect,
    OpenIncident,
    RecordTransition,
    ResolveIncident,
    UpdateIncident,
)
from fleetd.health.evidence import LeadEvidence, MemberEvidence, ProbeFacts
from fleetd.health.incidents import Evidence, Incident, IncidentBook, IncidentKey, ResolveReason
from fleetd.health.pane_budget import ProbeCandidate
from fleetd.health.settings import Effective
from fleetd.health.snapshot import (
    FleetSnapshot,
    InboxView,
    LiveAgent,
    LiveStatus,
    ProbeResult,
    ProbeSource,
    is_target_loss,
)
from fleetd.health.states import Scope

__all__ = ["Tick", "absorb_probe", "settle_probe"]


def _by_name(agents: tuple[LiveAgent, ...]) -> dict[str, LiveAgent]:
    named = [(agent.name, agent) for agent in agents if agent.name is not None]
    index = dict(named)
    if len(index) != len(named):  # same rule as for terminals
        for name, agent in sorted(named, key=lambda pair: pair[1].pane_id, reverse=True):
            index[name] = agent
    return index


def _index_probes(probes: tuple[ProbeResult, ...]) -> dict[str, tuple[ProbeResult, ...]]:
    grouped: dict[str, list[ProbeResult]] = {}
    for probe in probes:
        grouped.setdefault(probe.target, []).append(probe)
    return {target: tuple(sorted(group, key=_probe_order)) for target, group in grouped.items()}


def _probe_order(probe: ProbeResult) -> tuple[str, bool, str, str, str]:
    return (
        probe.source,
        probe.ok,
        probe.digest or "",
        probe.fatal_signature_id or "",
        probe.error_code or "",
    )


def absorb_probe(
    facts: ProbeFacts, results: tuple[ProbeResult, ...], token: str | None
) -> ProbeFacts:
    """Fold this tick's read results for one target into its probe facts.

    A progress digest joins the pair only if it belongs to the same ``token`` as the previous
    one; a detection read replaces the signature (``None`` clears it); a ``*_not_found`` answer
    is kept as definitive target-loss evidence.
    """
    prev, last, digest_token = facts.digest_prev, facts.digest_last, facts.digest_token
    signature, signature_token = facts.signature, facts.signature_token
    not_found = facts.not_found_code
    for result in results:
        if not result.ok:
            if is_target_loss(result.error_code):
                not_found = result.error_code
            continue
        if result.source is ProbeSource.RECENT_UNWRAPPED and result.digest is not None:
            prev = last if digest_token == token else None
            last, digest_token = result.digest, token
        elif result.source is ProbeSource.DETECTION:
            signature, signature_token = result.fatal_signature_id, token
    return ProbeFacts(
        digest_prev=prev,
        digest_last=last,
        digest_token=digest_token,
        signature=signature,
        signature_token=signature_token,
        not_found_code=not_found,
    )


def settle_probe(
    facts: ProbeFacts, *, raw: LiveStatus | None, seq_changed: bool, token: str | None
) -> ProbeFacts:
    """Forget probe facts that no longer describe the current situation.

    Progress digests need one uninterrupted WORKING stretch of one token with an unchanged
    ``state_change_seq``; a fatal signature is void once the target is WORKING again or the turn
    changed.
    """
    keep_digests = raw is LiveStatus.WORKING and not seq_changed and facts.digest_token == token
    keep_signature = raw is not LiveStatus.WORKING and facts.signature_token == token
    if (keep_digests or facts.digest_last is None) and (keep_signature or facts.signature is None):
        return facts
    return ProbeFacts(
        digest_prev=facts.digest_prev if keep_digests else None,
        digest_last=facts.digest_last if keep_digests else None,
        digest_token=facts.digest_token if keep_digests else None,
        signature=facts.signature if keep_signature else None,
        signature_token=facts.signature_token if keep_signature else None,
        not_found_code=facts.not_found_code,
    )


class Tick:
    """Everything one ``decide`` call shares between the member, lead and link steps."""

    def __init__(
        self,
        snapshot: FleetSnapshot,
        book: IncidentBook,
        now: datetime,
        *,
        steady: bool,
        adopted: Mapping[IncidentKey, int] | None = None,
        agents: AgentIndex | None = None,
    ) -> None:
        self.now = now
        self.steady = steady
        self.adopted: dict[IncidentKey, int] = dict(adopted or {})
        self.eff = Effective.of(snapshot.config)
        self.live_ok = snapshot.live.list_ok
        self.ping_ok = snapshot.live.ping_ok
        self._agents = snapshot.live.agents
        #: the live agents by terminal, taken over from the last tick's ``agents`` when it lines up
        self.agents = AgentIndex.of(self._agents, agents)
        self.by_terminal = self.agents.by_terminal
        self._by_name: dict[str, LiveAgent] | None = None
        self.targeted: Mapping[str, str] = snapshot.live.targeted_errors
        self.probes = _index_probes(snapshot.probes)
        self.touched = frozenset(self.probes) | frozenset(self.targeted)
        self.inboxes: dict[str, InboxView] = {inbox.key: inbox for inbox in snapshot.inboxes}
        self.book = book
        self.effects: list[Effect] = []
        self.candidates: list[ProbeCandidate] = []
        self.mutes_by_profile: dict[str, int] = {}

    @property
    def by_name(self) -> dict[str, LiveAgent]:
        """Live agents by name, built on first use (most subjects match by terminal id)."""
        if self._by_name is None:
            self._by_name = _by_name(self._agents)
        return self._by_name

    def match(self, terminal_id: str | None, name: str) -> LiveAgent | None:
        """The live agent of a subject: same terminal when known, else same name. A terminal
        whose agent now goes by another name is another agent's (herdr that restarted numbers
        its terminals from the start again): it is not the subject's."""
        if terminal_id is not None:
            agent = self.by_terminal.get(terminal_id)
            if agent is not None and agent.name is not None and agent.name != name:
                return None
            return agent
        return self.by_name.get(name)

    def lead_inbox(self, lead: str | None) -> InboxView | None:
        """The inbox of ``lead`` (where its members' replies wait), if in view."""
        return self.inboxes.get(lead) if lead is not None else None

    def not_found(self, target: str) -> str | None:
        """A ``*_not_found`` code from this tick's per-target calls, if any."""
        code = self.targeted.get(target)
        return code if is_target_loss(code) else None

    def sync_incident(
        self,
        current: IncidentKey | None,
        desired: IncidentKey | None,
        *,
        target: str | None,
        owner_lead: str | None = None,
        committed: bool = False,
        evidence: Evidence = (),
        closed_as: ResolveReason | None = None,
    ) -> IncidentKey | None:
        """Make ``desired`` the subject's open incident, emitting edge effects only on change;
        ``closed_as`` names why ``current`` closes when the caller knows better than
        ``cleared``/``superseded``."""
        if current == desired:
            held = self.book.open.get(desired) if desired is not None else None
            if held is not None and held.committed_work_at_risk != committed:
                updated = self.book.amend(held, committed_work_at_risk=committed)
                self.effects.append(UpdateIncident(incident=updated))
            return desired
        if current is not None:
            closed = self.book.close(current)
            if closed is not None:
                reason = ResolveReason.CLEARED if desired is None else ResolveReason.SUPERSEDED
                self.emit_resolved(closed, closed_as or reason)
        if desired is not None:
            self.open_incident(
                desired,
                target=target,
                owner_lead=owner_lead,
                committed=committed,
                evidence=evidence,
            )
        return desired

    def transition(
        self,
        scope: Scope,
        *,
        subject: str,
        target: str,
        before: MemberEvidence | LeadEvidence | None,
        after: MemberEvidence | LeadEvidence,
    ) -> None:
        """Record a subject's move to another state (or its first classification)."""
        if before is not None and before.state is after.state:
            return
        self.effects.append(
            RecordTransition(
                scope=scope,
                subject=subject,
                target=target,
                previous=before.state if before is not None else None,
                current=after.state,
                at=self.now,
            )
        )

    def emit_resolved(self, incident: Incident, reason: ResolveReason) -> None:
        """Emit the resolution of an incident already removed from the book."""
        self.effects.append(ResolveIncident(incident=incident, reason=reason, resolved_at=self.now))

    def open_incident(
        self,
        key: IncidentKey,
        *,
        target: str | None,
        owner_lead: str | None,
        committed: bool,
        evidence: Evidence,
    ) -> None:
        """Open ``key``; the tick's routing pass assigns its recipient (§7.3, §7.4).

        Member incidents carry their exact delegating lead; an inbox incident of a lead's own key
        carries that lead. A key still open from before a restart (adopted from the journal) is
        claimed instead: the same incident, no second ``open``.
        """
        if self.adopted.pop(key, None) is not None:
            held = self.book.open[key]
            if (held.owner_lead, held.committed_work_at_risk) != (owner_lead, committed):
                changed = self.book.amend(
                    held, owner_lead=owner_lead, committed_work_at_risk=committed
                )
                self.effects.append(UpdateIncident(incident=changed))
            return
        incident = self.book.open_new(
            key,
            now=self.now,
            target=target,
            owner_lead=owner_lead,
            committed_work_at_risk=committed,
            evidence=evidence,
        )
        self.effects.append(OpenIncident(incident=incident))
