"""Accepted turns: the token that ties a send to its waiter and its delivery baseline.

Every accepted send that reaches a member gets a :class:`TurnToken` at delivery. The token names
the target, the ticket (the exact waiter) and the session turn it opened. Right after the prompt is
sent, and before delivery is declared complete, the injector captures a :class:`DeliveryBaseline`:
the last assistant block on screen, normalised and clipped, with whether an assistant marker was
recognised. The baseline is evidence for a later lost-boundary repair; a missing, failed or late
baseline never authorises one.

:class:`InFlightTurn` is the bridge's mutable view of the open turn: whether herdr has been seen
``working`` for it (a trusted boundary needs working, then idle/done, for the same turn), whether
Enter was re-submitted, and when a boundary was first seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = ["BaselineCapture", "DeliveryBaseline", "InFlightTurn", "TurnToken"]


class BaselineCapture(StrEnum):
    PRESENT = "present"
    READ_FAILED = "read_failed"
    UNRECOGNISED = "unrecognised"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnToken:
    """Identity of one accepted, delivered send."""

    token_id: str
    session_id: str
    ticket_id: str
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryBaseline:
    """What the pane showed right after the prompt was sent."""

    token_id: str
    captured_at: datetime
    source: str
    text: str
    marker_recognised: bool
    capture: BaselineCapture


@dataclass(slots=True, kw_only=True)
class InFlightTurn:
    """The open turn of one member."""

    token: TurnToken
    delivered_at: datetime
    baseline: DeliveryBaseline | None = None
    saw_working: bool = False
    resubmitted: bool = False
    boundary_at: datetime | None = None
