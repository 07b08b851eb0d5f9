"""Health states and what each one means, as one table.

M4 §4 names three families of classification: member states (§4.1 normal, §4.2 fault and
quality), the control-link state (§4.3) and lead states (§4.4); a fourth, the inbox state, names
the routed incident §7.2 asks for when an inbox entry cannot be decoded. Each state has a fixed
scope, severity and certainty, and either opens an incident or does not. Keeping those facts in
:data:`STATE_SPECS` — one row per state, beside the enums — means the decision code never
hard-codes "is this a fault?" in a branch, and a state diagram or a docs table can be generated
from the same rows.

Precedence (§3) is the ``rank`` column: a lower number wins. A lower rule never hides a higher
one because the classifier walks the ladder from rank 1 down and stops at the first match.

One member of :class:`MemberState` is an addition to the seed's list: ``RELEASED``, a normal state
that opens no incident, for a session torn down cleanly that stays in view only while the teardown
invariant and the worktree warning are checked. ``MUTE`` is classified as an overlay
(see :mod:`fleetd.health.mute`), never as a member's primary state, because a single event is a
metric, not a condition of the member.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

__all__ = [
    "FAULT_LEAD_STATES",
    "PEER_STATES",
    "STATE_SPECS",
    "Certainty",
    "ControlLinkState",
    "HealthStateName",
    "InboxState",
    "InstanceState",
    "LeadState",
    "MemberState",
    "Scope",
    "Severity",
    "StateSpec",
    "spec_of",
]


class MemberState(StrEnum):
    """Classification of one member (M4 §4.1, §4.2)."""

    STARTING = "STARTING"
    IDLE = "IDLE"
    WORKING = "WORKING"
    WORK_PENDING = "WORK_PENDING"
    BLOCKED_AMBIGUOUS = "BLOCKED_AMBIGUOUS"
    NEVER_READY = "NEVER_READY"
    GONE = "GONE"
    TURN_BOUNDARY_LOST = "TURN_BOUNDARY_LOST"
    ERROR_ON_SCREEN = "ERROR_ON_SCREEN"
    STALL_SUSPECTED = "STALL_SUSPECTED"
    MUTE = "MUTE"
    REPLY_STRANDED = "REPLY_STRANDED"
    DELEGATION_ORPHANED = "DELEGATION_ORPHANED"
    WORK_PRODUCT_AT_RISK = "WORK_PRODUCT_AT_RISK"
    RELEASED = "RELEASED"


class ControlLinkState(StrEnum):
    """The fleetd-to-herdr link (M4 §4.3)."""

    CONTROL_LINK_OK = "CONTROL_LINK_OK"
    CONTROL_LINK_DOWN = "CONTROL_LINK_DOWN"


class LeadState(StrEnum):
    """Classification of one lead (M4 §4.4)."""

    LEAD_IDLE = "LEAD_IDLE"
    LEAD_WORKING = "LEAD_WORKING"
    LEAD_STATUS_UNKNOWN = "LEAD_STATUS_UNKNOWN"
    LEAD_UNREACHABLE = "LEAD_UNREACHABLE"
    LEAD_UNRESPONSIVE = "LEAD_UNRESPONSIVE"
    LEAD_STALL_SUSPECTED = "LEAD_STALL_SUSPECTED"


class InboxState(StrEnum):
    """Classification of one lead's inbox key (M4 §7.2, Unit 3 criterion 8)."""

    INBOX_DECODE_FAILED = "INBOX_DECODE_FAILED"
    """An entry of the key could not be decoded: quarantined, waiting for its quarantine copy, or
    held for a newer build (unsupported version)."""


class InstanceState(StrEnum):
    """A fleetd instance sharing a PostgreSQL journal with others (issue 24)."""

    INSTANCE_DOWN = "INSTANCE_DOWN"


HealthStateName = MemberState | ControlLinkState | LeadState | InboxState | InstanceState
"""Any classification value."""


class Severity(StrEnum):
    """How urgent an incident is. Only ``critical`` incidents earn human reminders (§10.4)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Certainty(StrEnum):
    """How much the evidence proves (§4 "certainty" column)."""

    CERTAIN = "certain"
    STRONG = "strong"
    SUSPECTED = "suspected"
    AMBIGUOUS = "ambiguous"


class Scope(StrEnum):
    """What an incident is about; the first part of its key (§10.3)."""

    MEMBER = "member"
    LEAD = "lead"
    CONTROL_LINK = "control_link"
    INBOX = "inbox"
    PROFILE = "profile"
    INSTANCE = "instance"


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSpec:
    """The fixed facts about one state.

    ``rank`` is the §3 precedence (1 wins); ``opens_incident`` says whether the state is a fault
    or quality condition worth an incident; ``sustain`` is how many consecutive snapshots the
    state must hold before its incident opens (BLOCKED is normal for a moment, not for a minute).
    """

    scope: Scope
    rank: int
    severity: Severity
    certainty: Certainty
    opens_incident: bool
    sustain: int = 1


_M = Scope.MEMBER
_L = Scope.LEAD
_I, _W, _C = Severity.INFO, Severity.WARNING, Severity.CRITICAL
_CE, _ST, _SU, _AM = Certainty.CERTAIN, Certainty.STRONG, Certainty.SUSPECTED, Certainty.AMBIGUOUS

STATE_SPECS: Final = MappingProxyType(
    {
        # control link, rank 1
        ControlLinkState.CONTROL_LINK_DOWN: StateSpec(
            scope=Scope.CONTROL_LINK, rank=1, severity=_C, certainty=_CE, opens_incident=True
        ),
        ControlLinkState.CONTROL_LINK_OK: StateSpec(
            scope=Scope.CONTROL_LINK, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        # members: definitive loss, startup/teardown invariants, disagreement, screen, timers
        MemberState.GONE: StateSpec(
            scope=_M, rank=2, severity=_C, certainty=_CE, opens_incident=True
        ),
        MemberState.NEVER_READY: StateSpec(
            scope=_M, rank=3, severity=_W, certainty=_CE, opens_incident=True
        ),
        MemberState.DELEGATION_ORPHANED: StateSpec(
            scope=_M, rank=3, severity=_C, certainty=_CE, opens_incident=True
        ),
        MemberState.TURN_BOUNDARY_LOST: StateSpec(
            scope=_M, rank=4, severity=_W, certainty=_ST, opens_incident=True
        ),
        MemberState.ERROR_ON_SCREEN: StateSpec(
            scope=_M, rank=5, severity=_W, certainty=_CE, opens_incident=True
        ),
        MemberState.STALL_SUSPECTED: StateSpec(
            scope=_M, rank=6, severity=_W, certainty=_SU, opens_incident=True
        ),
        MemberState.MUTE: StateSpec(
            scope=_M, rank=7, severity=_W, certainty=_CE, opens_incident=True
        ),
        MemberState.REPLY_STRANDED: StateSpec(
            scope=_M, rank=7, severity=_W, certainty=_CE, opens_incident=True
        ),
        MemberState.WORK_PRODUCT_AT_RISK: StateSpec(
            scope=_M, rank=7, severity=_W, certainty=_SU, opens_incident=True
        ),
        MemberState.BLOCKED_AMBIGUOUS: StateSpec(
            scope=_M, rank=8, severity=_W, certainty=_AM, opens_incident=True, sustain=2
        ),
        MemberState.STARTING: StateSpec(
            scope=_M, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        MemberState.IDLE: StateSpec(
            scope=_M, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        MemberState.WORKING: StateSpec(
            scope=_M, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        MemberState.WORK_PENDING: StateSpec(
            scope=_M, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        MemberState.RELEASED: StateSpec(
            scope=_M, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        # leads
        LeadState.LEAD_UNREACHABLE: StateSpec(
            scope=_L, rank=2, severity=_C, certainty=_CE, opens_incident=True
        ),
        LeadState.LEAD_UNRESPONSIVE: StateSpec(
            scope=_L, rank=7, severity=_C, certainty=_ST, opens_incident=True
        ),
        LeadState.LEAD_STALL_SUSPECTED: StateSpec(
            scope=_L, rank=6, severity=_W, certainty=_SU, opens_incident=True
        ),
        LeadState.LEAD_STATUS_UNKNOWN: StateSpec(
            scope=_L, rank=8, severity=_I, certainty=_AM, opens_incident=False
        ),
        LeadState.LEAD_WORKING: StateSpec(
            scope=_L, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        LeadState.LEAD_IDLE: StateSpec(
            scope=_L, rank=8, severity=_I, certainty=_CE, opens_incident=False
        ),
        # inbox keys
        InboxState.INBOX_DECODE_FAILED: StateSpec(
            scope=Scope.INBOX, rank=7, severity=_W, certainty=_CE, opens_incident=True
        ),
        # fleetd instances: one stopped renewing its row (or lost its database)
        InstanceState.INSTANCE_DOWN: StateSpec(
            scope=Scope.INSTANCE, rank=1, severity=_C, certainty=_ST, opens_incident=True
        ),
    }
)
"""Every classification value -> its fixed facts."""

FAULT_LEAD_STATES: Final = frozenset(
    {LeadState.LEAD_UNREACHABLE, LeadState.LEAD_UNRESPONSIVE, LeadState.LEAD_STALL_SUSPECTED}
)
"""Lead states that make a lead unfit to receive incidents: member incidents it owns re-route."""

PEER_STATES: Final = frozenset({LeadState.LEAD_IDLE, LeadState.LEAD_WORKING})
"""Lead states a peer may be chosen in (LEAD_STATUS_UNKNOWN and the fault states may not)."""


def spec_of(state: HealthStateName) -> StateSpec:
    """The fixed facts of ``state``."""
    return STATE_SPECS[state]
