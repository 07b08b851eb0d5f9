"""Commits ahead of base for live members, measured once per terminal session edge.

WORK_PRODUCT_AT_RISK (M4 §4.2) needs to know whether a DONE or FAILED member's branch holds
commits after its recorded base. Teardown measures that for a preserved worktree at release; a
member that stays live after its turn ended needs the same fact, and §9 says work-product checks
run on a terminal session edge, not every fleet tick. An edge is the session entering DONE after
turn N, or FAILED — each happens once per turn, so ``(state, turn)`` names it:
:class:`TerminalEdges` runs ``git rev-list --count`` once for each edge not yet measured,
at most ``limit`` per call, and records the count on the session for the next snapshot. A failed
count is "unknown" (``None``), never zero work.

The health monitor calls it before each snapshot, so git runs only while health is enabled and
never on the reply or delivery path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionState
from fleetd.bridge.worktrees import Worktrees
from fleetd.errors import FleetdError

__all__ = ["EDGES_PER_TICK", "TerminalEdges"]

EDGES_PER_TICK: Final = 8
"""Edges measured per call; the rest wait for the next tick (the rule waits far longer)."""

_TERMINAL = frozenset({SessionState.DONE, SessionState.FAILED})


class TerminalEdges:
    """The members at a terminal edge not yet measured, found through the roster's marks.

    A session reaches a new edge only by changing (its state or turn), and every change marks it
    (:class:`~fleetd.bridge.roster.Touches`), so each call looks only at the members touched
    since the last one and at those left waiting (past ``limit``, or releasing at the time). The
    first call, and any after one that raised, looks at every member. At ten thousand
    members a pass over all of them cost about a millisecond a tick."""

    __slots__ = ("_marks", "_releasing", "_roster", "_waiting", "_worktrees")

    def __init__(
        self, roster: Roster, worktrees: Worktrees, *, releasing: Callable[[str], bool]
    ) -> None:
        self._roster = roster
        self._worktrees = worktrees
        self._releasing = releasing
        self._marks = roster.touches.reader()
        self._waiting: dict[str, None] | None = None  # in order; None: look at every member

    async def measure(self, *, limit: int = EDGES_PER_TICK) -> int:
        """Measure commits ahead for live DONE/FAILED members whose edge is new; return how many.

        The members at a new edge are picked before any is measured; each is read again before
        its measure, since an earlier one awaited git, and the measure is recorded through the
        roster."""
        sessions = self._roster.sessions
        marked = self._marks.take()
        waiting, self._waiting = self._waiting, None  # a call that raises: every member next time
        if waiting is None:
            ids: Iterable[str] = sessions
        else:  # those left waiting first, in the order they came, then the marked
            waiting.update(dict.fromkeys(marked))
            ids = waiting
        due = [sid for sid in ids if (s := sessions.get(sid)) is not None and _at_new_edge(s)]
        left = dict.fromkeys(due[limit:])
        measured = await self._measure(due[:limit], left)
        self._waiting = left
        return measured

    async def _measure(self, due: list[str], left: dict[str, None]) -> int:
        """Measure the members of ``due`` still at a new edge; one releasing is ``left``."""
        roster, sessions = self._roster, self._roster.sessions
        measured = 0
        for sid in due:
            session = sessions.get(sid)  # read again: an earlier measure awaited git
            worktree = session.worktree if session is not None else None
            if session is None or worktree is None or not _at_new_edge(session):
                continue
            if self._releasing(sid):
                left[sid] = None
                continue
            roster.update(sid, commits_edge=(session.state, session.turn))
            measured += 1
            try:
                ahead = await self._worktrees.commits_ahead(worktree)
            except FleetdError:
                ahead = None
            if sid in roster.sessions:
                roster.update(sid, commits_ahead=ahead)
        return measured


def _at_new_edge(session: Session) -> bool:
    """A live member with a worktree, DONE or FAILED at an edge not yet measured (a released one
    is never at an edge)."""
    return (
        session.worktree is not None
        and session.state in _TERMINAL
        and session.commits_edge != (session.state, session.turn)
    )
