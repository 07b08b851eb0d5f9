"""Evidence retained across ticks, and :class:`HealthState`, the prior ``decide`` takes back.

Current push and heartbeat loops forget history; health must not (§4.4). Per target the state
keeps: the raw live status and when it was first seen, ``state_change_seq``, consecutive absences
from successful lists, sticky definitive-loss codes, the lost-boundary streak for one TurnToken,
pane-probe facts (the last two digests for one turn, a fatal signature id), one-shot markers
(repair requested for a token and how often, final read taken, orphan retry spent, target loss
reported), recent
mute times, the current classification with its since-time, and the key of its open incident.
The per-target read cooldown belongs to the budget: :attr:`HealthState.recent_reads`.

Counters that only matter up to the two-snapshot floor are capped at 2, so a member whose
situation does not change keeps an *equal* evidence value tick after tick. A member also keeps
the ``signature`` of the inputs it was classified from, ``recheck_at`` (the next time a timer
rule could change it; ``None``: recheck every tick) and its pane ``candidate``; while inputs and
time still hold, ``decide`` reuses the prior object, which is what keeps a 10,000-member tick
cheap.

Pane text never enters this state: only digests and signature ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from fleetd.health.fact import fact
from fleetd.health.incidents import Incident, IncidentKey
from fleetd.health.pane_budget import ProbeCandidate
from fleetd.health.settings import HealthSettings
from fleetd.health.snapshot import LiveStatus
from fleetd.health.states import ControlLinkState, LeadState, MemberState

if TYPE_CHECKING:
    from fleetd.health.agent_index import AgentIndex
    from fleetd.health.member_index import MemberIndex

__all__ = [
    "EMPTY_PROBE",
    "HealthState",
    "LeadEvidence",
    "LinkEvidence",
    "MemberEvidence",
    "ProbeFacts",
]


@fact
class ProbeFacts:
    """What pane reads taught us about one target (the read cooldown lives in the budget).

    ``digest_prev``/``digest_last`` are the last two progress digests taken for ``digest_token``
    (a turn token, or the start of a lead's working stretch); ``signature`` is a fatal signature
    id from a detection read taken during ``signature_token``; ``not_found_code`` is a
    ``*_not_found`` answer to a read.
    """

    digest_prev: str | None = None
    digest_last: str | None = None
    digest_token: str | None = None
    signature: str | None = None
    signature_token: str | None = None
    not_found_code: str | None = None


EMPTY_PROBE = ProbeFacts()


@fact  # one per member a tick asks: a thousand and more on a large fleet
class MemberEvidence:
    """Retained evidence and current classification of one member session.

    ``recheck_at``, ``signature`` and ``candidate`` come first: they are all a steady tick reads.
    """

    recheck_at: datetime | None = None
    signature: tuple[object, ...] = ()
    candidate: ProbeCandidate | None = None
    session_id: str
    target: str
    profile: str
    state: MemberState
    cause: str
    since: datetime
    sustained: int = 1
    raw_status: LiveStatus | None = None
    raw_since: datetime | None = None
    raw_streak: int = 1
    seq: int | None = None
    absent: int = 0
    boundary_token: str | None = None
    boundary_count: int = 0
    gone_code: str | None = None
    never_ready: bool = False
    probe: ProbeFacts = EMPTY_PROBE
    repair_token: str | None = None
    repair_requests: int = 0
    final_read_state: MemberState | None = None
    orphan_retry_done: bool = False
    loss_reported: bool = False
    mute_times: tuple[datetime, ...] = ()
    incident: IncidentKey | None = None
    mute_incident: IncidentKey | None = None


@fact  # one per lead a tick
class LeadEvidence:
    """Retained identity, evidence and classification of one expected lead (§4.4).

    Sightings: ``first_seen_at`` and ``last_seen_at`` (successful lists that showed it), the raw
    status of the latest one with ``raw_since`` (its age), ``absent`` (consecutive successful
    lists without it, capped at two). Per-target calls: ``not_found_code`` (definitive), and
    ``lookup_error``/``lookup_failures`` (the last failed call's code, of any class, and how many
    ticks in a row one failed). ``probe``: pane-probe facts. From the bridge's latest report
    (kept while the identity map no longer lists the lead): the actionable backlog and its oldest
    item, nudges and the cap, the push loop's last read status and error, the last nudge and
    heartbeat.
    """

    name: str
    agent_name: str
    terminal_id: str | None
    configured: bool
    discovered: bool
    state: LeadState
    cause: str
    since: datetime
    raw_status: LiveStatus | None = None
    raw_since: datetime | None = None
    seq: int | None = None
    absent: int = 0
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    not_found_code: str | None = None
    lookup_error: str | None = None
    lookup_failures: int = 0
    probe: ProbeFacts = EMPTY_PROBE
    final_read_state: LeadState | None = None
    identity_missing: int = 0
    actionable_waiting: int = 0
    oldest_actionable_at: datetime | None = None
    nudges_sent: int = 0
    nudge_cap_reached_at: datetime | None = None
    push_status: LiveStatus | None = None
    last_push_error: str | None = None
    last_nudge_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    incident: IncidentKey | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkEvidence:
    """The control link: consecutive failed lists and the current state."""

    state: ControlLinkState = ControlLinkState.CONTROL_LINK_OK
    since: datetime | None = None
    list_failures: int = 0
    incident: IncidentKey | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthState:
    """Everything ``decide`` carries from one tick to the next.

    ``members`` is keyed by session id, ``leads`` by lead name. ``incidents`` holds open
    incidents only; ``generations`` the last generation per key (seed it from the journal after
    a restart) and ``generation_floor`` the journal's floor: a new incident's generation is above
    both. ``probe_cursor`` and ``recent_reads`` are the pane budget's round-robin position
    and per-target grant times; ``settings`` the
    values the last tick ran with (a change to a member timer re-evaluates every member).
    ``index`` tells the next tick which members it must classify again
    (:mod:`fleetd.health.member_index`); it is derived from the rest, serves one ``decide`` only,
    and takes no part in equality; ``agents`` likewise carries the last tick's live agents by
    terminal (:class:`~fleetd.health.tick.AgentIndex`).
    """

    taken_at: datetime | None = None
    link: LinkEvidence = field(default_factory=LinkEvidence)
    members: Mapping[str, MemberEvidence] = field(default_factory=dict)
    leads: Mapping[str, LeadEvidence] = field(default_factory=dict)
    incidents: Mapping[IncidentKey, Incident] = field(default_factory=dict)
    generations: Mapping[IncidentKey, int] = field(default_factory=dict)
    generation_floor: int = 0
    profile_mutes: Mapping[str, tuple[datetime, ...]] = field(default_factory=dict)
    probe_cursor: str = ""
    recent_reads: Mapping[str, datetime] = field(default_factory=dict)
    settings: HealthSettings | None = None
    adopted: Mapping[IncidentKey, int] = field(default_factory=dict)
    namespace: str = ""  # folded into new incident ids (the runtime's run id)
    index: MemberIndex | None = field(default=None, compare=False, repr=False)
    agents: AgentIndex | None = field(default=None, compare=False, repr=False)

    def open_incidents(self) -> tuple[Incident, ...]:
        """Open incidents in key order."""
        return tuple(self.incidents[key] for key in sorted(self.incidents))
