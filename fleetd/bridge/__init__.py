"""The bridge: member sessions, their queues and turns, worktrees, and the push loop.

The names other fleetd packages build on are re-exported here; everything else in the package is
internal to it.
"""

from fleetd.bridge.answers import (
    Absent,
    CapacityRow,
    ModelHealthFlag,
    OpenTurn,
    ReleaseResult,
    ReplyResult,
    SessionRow,
    TicketResult,
    WireModel,
    ticket_result,
    wire,
)
from fleetd.bridge.backlog import MemberBacklog, member_backlogs, read_lead_stats
from fleetd.bridge.checked_views import CheckedMemberViews
from fleetd.bridge.durable import DurableState
from fleetd.bridge.git_worktrees import GitWorktrees
from fleetd.bridge.manifests import ManifestShelf, PreservedWorktree, load_manifests
from fleetd.bridge.marks import SESSIONS_DIR
from fleetd.bridge.member_views import MemberViews
from fleetd.bridge.orphans import ORPHANED, Orphan
from fleetd.bridge.push import PushLoop, PushOutcome
from fleetd.bridge.reads import BridgeReads
from fleetd.bridge.release import ReleaseCause, WorktreeAction, stop_cause
from fleetd.bridge.repair import RepairOutcome
from fleetd.bridge.repair_gates import RepairResult
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import TRANSITIONS, Session, SessionEvent, SessionState
from fleetd.bridge.spawn import SpawnRequest
from fleetd.bridge.tasks import Delivery, ResultSource, Ticket, TicketOutcome
from fleetd.bridge.view import BridgeView, health_settings, profile_inputs
from fleetd.bridge.worktrees import FakeWorktrees, Worktrees

__all__ = [
    "ORPHANED",
    "SESSIONS_DIR",
    "TRANSITIONS",
    "Absent",
    "Bridge",
    "BridgeReads",
    "BridgeView",
    "CapacityRow",
    "CheckedMemberViews",
    "Delivery",
    "DurableState",
    "FakeWorktrees",
    "GitWorktrees",
    "ManifestShelf",
    "MemberBacklog",
    "MemberViews",
    "ModelHealthFlag",
    "OpenTurn",
    "Orphan",
    "PreservedWorktree",
    "PushLoop",
    "PushOutcome",
    "ReleaseCause",
    "ReleaseResult",
    "RepairOutcome",
    "RepairResult",
    "ReplyResult",
    "ResultSource",
    "Session",
    "SessionEvent",
    "SessionRow",
    "SessionState",
    "SpawnRequest",
    "Ticket",
    "TicketOutcome",
    "TicketResult",
    "WireModel",
    "WorktreeAction",
    "Worktrees",
    "health_settings",
    "load_manifests",
    "member_backlogs",
    "profile_inputs",
    "read_lead_stats",
    "stop_cause",
    "ticket_result",
    "wire",
]
