"""Open turns for tests, made the one way the bridge makes them: by the turn machine's steps."""

from __future__ import annotations

from datetime import datetime

from fleetd.bridge.roster import Roster
from fleetd.bridge.turn_machine import PromptTyped, TurnState, TurnToken, TypingBegan, step


def opened(token: TurnToken, at: datetime) -> TurnState:
    """A turn typed at ``at``, as the machine opens it before its baseline capture returns."""
    typing, _ = step(TurnState.pending(token), TypingBegan(), at)
    turn, _ = step(typing, PromptTyped(), at)
    return turn


def open_turn(roster: Roster, token: TurnToken, at: datetime) -> TurnState:
    """Open ``token``'s turn on its member (none may be open) and return it."""
    turn = opened(token, at)
    roster.inflight.open(turn)
    return turn


def drop_capture(roster: Roster, session_id: str, now: datetime) -> None:
    """Put the member's open turn back as it was before its baseline capture returned: closed,
    and opened again by the machine with the same token and delivery time (no capture of this
    very turn, M4 §8.2)."""
    turn = roster.inflight[session_id]
    roster.inflight.close(session_id, "test", now)
    roster.inflight.open(opened(turn.token, turn.opened_at))
