"""Member sessions and their state machine.

Theory of operation
-------------------
A session is one member agent in one herdr pane. It starts ``SPAWNING`` when fleetd has asked
herdr to start the agent; the member's first authenticated contact (MCP ``initialize`` or any tool
call) is *presence* and makes it ``READY``. Each delivered prompt opens turn N and makes it
``BUSY``; the turn's resolution makes it ``DONE`` (ready for the next prompt). A failed start, a
turn failure or a lost target makes it ``FAILED``; a release makes it ``RELEASED``, which is final.

Every legal move is one row of :data:`TRANSITIONS`, with the cause that justifies it. Anything not
in the table raises :class:`~fleetd.errors.IllegalTransitionError` and leaves the session
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from fleetd.bridge.evidence import FatalScreenSeen, TargetLost
from fleetd.bridge.worktrees import Worktree
from fleetd.errors import IllegalTransitionError

__all__ = [
    "HISTORY_KEPT",
    "TABLE_FIELDS",
    "TRANSITIONS",
    "Session",
    "SessionEvent",
    "SessionState",
    "next_state",
]

HISTORY_KEPT = 32
"""A session keeps its last this many state changes (a member may run thousands of turns)."""


class SessionState(StrEnum):
    SPAWNING = "spawning"
    READY = "ready"
    BUSY = "busy"
    DONE = "done"
    FAILED = "failed"
    RELEASED = "released"


class SessionEvent(StrEnum):
    PRESENCE = "presence"
    DELIVERED = "delivered"
    TURN_COMPLETED = "turn_completed"
    TURN_RECONCILED = "turn_reconciled"
    TURN_FAILED = "turn_failed"
    START_FAILED = "start_failed"
    NEVER_READY = "never_ready"
    TARGET_GONE = "target_gone"
    RELEASE = "release"


S, E = SessionState, SessionEvent

#: (state, event) -> (next state, cause). The only legal moves.
TRANSITIONS: dict[tuple[SessionState, SessionEvent], tuple[SessionState, str]] = {
    (S.SPAWNING, E.PRESENCE): (S.READY, "first authenticated contact from the member"),
    (S.READY, E.PRESENCE): (S.READY, "contact while ready changes nothing"),
    (S.BUSY, E.PRESENCE): (S.BUSY, "contact during a turn changes nothing"),
    (S.DONE, E.PRESENCE): (S.DONE, "contact after a turn changes nothing"),
    (S.READY, E.DELIVERED): (S.BUSY, "a prompt was delivered: turn N opens"),
    (S.DONE, E.DELIVERED): (S.BUSY, "a prompt was delivered: turn N+1 opens"),
    (S.BUSY, E.TURN_COMPLETED): (S.DONE, "the turn resolved by reply or observed boundary"),
    (S.BUSY, E.TURN_RECONCILED): (S.DONE, "a lost boundary was repaired under strict gates"),
    (S.BUSY, E.TURN_FAILED): (S.FAILED, "the turn failed"),
    (S.SPAWNING, E.START_FAILED): (S.FAILED, "herdr could not start the agent"),
    (S.SPAWNING, E.NEVER_READY): (S.FAILED, "no presence within the readiness grace"),
    (S.SPAWNING, E.TARGET_GONE): (S.FAILED, "the pane vanished during startup"),
    (S.READY, E.TARGET_GONE): (S.FAILED, "the pane vanished"),
    (S.BUSY, E.TARGET_GONE): (S.FAILED, "the pane vanished during a turn"),
    (S.DONE, E.TARGET_GONE): (S.FAILED, "the pane vanished"),
    **{(state, E.RELEASE): (S.RELEASED, "released") for state in S if state is not S.RELEASED},
}


#: The fields of a :class:`Session` that only the table moves (:meth:`Session.stepped`).
TABLE_FIELDS = frozenset({"state", "turn", "presence", "presence_at", "state_since", "history"})


def next_state(state: SessionState, event: SessionEvent) -> SessionState:
    """The state after ``event``, or :class:`IllegalTransitionError`."""
    row = TRANSITIONS.get((state, event))
    if row is None:
        raise IllegalTransitionError("session", state.value, event.value)
    return row[0]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Session:
    """One member, as the bridge knows it: a frozen value.

    Only the roster changes a member (:meth:`~fleetd.bridge.roster.Roster.apply` moves it along
    :data:`TRANSITIONS`, :meth:`~fleetd.bridge.roster.Roster.update` sets what the table does not
    govern), and each change is a new value in its place: a reader holding a session holds the
    member as it was when read, and "the same object" means "nothing changed since" (what the
    health tick's member views and the fleet view's kept rows compare). Equality is identity for
    that reason. ``state``, ``turn``, ``presence``, ``presence_at``, ``state_since`` and
    ``history`` change only through the table (:meth:`stepped`).
    """

    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    created_at: datetime
    pane_id: str | None = None
    terminal_id: str | None = None
    worktree: Worktree | None = None
    state: SessionState = SessionState.SPAWNING
    launched: bool = False  # herdr accepted agent.start; before that there is nothing to poll
    presence: bool = False
    presence_at: datetime | None = None
    turn: int = 0
    state_since: datetime | None = None
    released_cause: str | None = None
    preserved: bool = False  # its worktree was kept at release
    commits_ahead: int | None = None  # measured on the terminal edge, not every tick
    commits_edge: tuple[SessionState, int] | None = None  # (state, turn) of the edge measured
    lost: TargetLost | None = None  # the bridge released it for a target loss (for health)
    fatal_screen: FatalScreenSeen | None = None  # a turn boundary read showed a fatal error
    fallback_at: datetime | None = None  # its last turn was read from the pane: late-reply window
    teardown_tickets: tuple[str, ...] = ()  # the tickets it held when its teardown began
    teardown_violations: tuple[str, ...] = ()  # parts of the §8.5 invariant its teardown broke
    repaired_token: str | None = None  # the last turn lost-boundary repair resolved (for health)
    history: tuple[tuple[SessionState, SessionEvent, SessionState], ...] = ()

    def stepped(self, event: SessionEvent, now: datetime) -> Session:
        """The member after ``event``: ``self`` when it changes nothing, a new value otherwise;
        an illegal event raises :class:`~fleetd.errors.IllegalTransitionError`.

        ``history`` keeps the last :data:`HISTORY_KEPT` state changes."""
        new = next_state(self.state, event)
        changes: dict[str, Any] = {}
        if event is SessionEvent.PRESENCE and not self.presence:
            changes.update(presence=True, presence_at=now)
        if event is SessionEvent.DELIVERED:
            changes["turn"] = self.turn + 1
        if new is not self.state:
            changes.update(
                state=new,
                state_since=now,
                history=(*self.history, (self.state, event, new))[-HISTORY_KEPT:],
            )
        return replace(self, **changes) if changes else self

    @property
    def session_state(self) -> str:
        """The state's value (what the capacity count reads)."""
        return self.state.value

    @property
    def live(self) -> bool:
        return self.state is not SessionState.RELEASED
