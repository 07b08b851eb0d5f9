"""Commits ahead of base for live members, measured once per terminal session edge.

WORK_PRODUCT_AT_RISK (M4 §4.2) needs to know whether a DONE or FAILED member's branch holds
commits after its recorded base. Teardown measures that for a preserved worktree at release; a
member that stays live after its turn ended needs the same fact, and §9 says work-product checks
run on a terminal session edge, not every fleet tick. An edge is the session entering DONE after
turn N, or FAILED — each happens once per turn, so ``(state, turn)`` names it:
:func:`measure_terminal_edges` runs ``git rev-list --count`` once for each edge not yet measured,
at most ``limit`` per call, and records the count on the session for the next snapshot. A failed
count is "unknown" (``None``), never zero work.

The health monitor calls it before each snapshot, so git runs only while health is enabled and
never on the reply or delivery path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import SessionState
from fleetd.bridge.worktrees import Worktrees
from fleetd.errors import FleetdError

__all__ = ["EDGES_PER_TICK", "measure_terminal_edges"]

EDGES_PER_TICK: Final = 8
"""Edges measured per call; the rest wait for the next tick (the rule waits far longer)."""

_TERMINAL = frozenset({SessionState.DONE, SessionState.FAILED})


async def measure_terminal_edges(
    roster: Roster,
    worktrees: Worktrees,
    *,
    releasing: Callable[[str], bool],
    limit: int = EDGES_PER_TICK,
) -> int:
    """Measure commits ahead for live DONE/FAILED members whose edge is new; return how many.

    The members at a new edge are picked in one pass over the roster's sessions (a released one
    is never at an edge) before any is measured; each is read again before its measure, since an
    earlier one awaited git, and the measure is recorded through the roster."""
    due = [
        session
        for session in roster.sessions.values()
        if session.worktree is not None
        and session.state in _TERMINAL
        and session.commits_edge != (session.state, session.turn)
    ]
    measured = 0
    for picked in due:
        if measured >= limit:
            break
        sid = picked.session_id
        session = roster.sessions.get(sid)  # read again: an earlier measure awaited git
        if session is None:
            continue
        worktree, edge = session.worktree, (session.state, session.turn)
        if (
            worktree is None
            or session.state not in _TERMINAL
            or session.commits_edge == edge
            or releasing(sid)
        ):
            continue
        roster.update(sid, commits_edge=edge)
        measured += 1
        try:
            ahead = await worktrees.commits_ahead(worktree)
        except FleetdError:
            ahead = None
        if sid in roster.sessions:
            roster.update(sid, commits_ahead=ahead)
    return measured
