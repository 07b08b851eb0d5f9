"""The bridge: member sessions, their queues and turns, worktrees, and the push loop.

The names other fleetd packages build on are re-exported here; everything else in the package is
internal to it.
"""

from fleetd.bridge.backlog import MemberBacklog, member_backlogs, read_lead_stats
from fleetd.bridge.git_worktrees import GitWorktrees
from fleetd.bridge.manifests import load_manifests
from fleetd.bridge.marks import SESSIONS_DIR
from fleetd.bridge.orphans import ORPHANED, Orphan
from fleetd.bridge.push import PushLoop
from fleetd.bridge.release import ReleaseCause, WorktreeAction, stop_cause
from fleetd.bridge.service import Bridge
from fleetd.bridge.sessions import TRANSITIONS, Session, SessionEvent, SessionState
from fleetd.bridge.spawn import SpawnRequest, spawn_member
from fleetd.bridge.tasks import Delivery, ResultSource, TicketOutcome
from fleetd.bridge.view import (
    capacity_view,
    health_settings,
    member_view,
    profile_inputs,
    session_row,
)
from fleetd.bridge.work_product import measure_terminal_edges
from fleetd.bridge.worktrees import FakeWorktrees, Worktrees

__all__ = [
    "ORPHANED",
    "SESSIONS_DIR",
    "TRANSITIONS",
    "Bridge",
    "Delivery",
    "FakeWorktrees",
    "GitWorktrees",
    "MemberBacklog",
    "Orphan",
    "PushLoop",
    "ReleaseCause",
    "ResultSource",
    "Session",
    "SessionEvent",
    "SessionState",
    "SpawnRequest",
    "TicketOutcome",
    "WorktreeAction",
    "Worktrees",
    "capacity_view",
    "health_settings",
    "load_manifests",
    "measure_terminal_edges",
    "member_backlogs",
    "member_view",
    "profile_inputs",
    "read_lead_stats",
    "session_row",
    "spawn_member",
    "stop_cause",
]
