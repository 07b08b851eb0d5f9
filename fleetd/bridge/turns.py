"""Accepted turns: the token that ties a send to its waiter and its delivery baseline.

Every accepted send that reaches a member gets a :class:`TurnToken` at delivery. The token names
the target, the ticket (the exact waiter) and the session turn it opened. Right after the prompt is
sent, and before delivery is declared complete, the injector captures a :class:`DeliveryBaseline`:
the last assistant block on screen, normalised and clipped, with whether an assistant marker was
recognised. The baseline is evidence for a later lost-boundary repair; a missing, failed or late
baseline never authorises one.

:class:`InFlightTurn` is the bridge's mutable view of the open turn: whether herdr has been seen
``working`` for it (a trusted boundary needs working, then idle/done, for the same turn), whether
Enter was re-submitted, and when a boundary was first seen. Its :class:`BoundaryWatch` keeps what
every raw status observation of the turn said (from the poller, the health monitor's fleet list
and the repair's own fresh lookup), and its :class:`RepairLedger` what lost-boundary repair
answered for its token so far (M4 §8.3–§8.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from fleetd.bridge.revision import Revised
from fleetd.herdr.model import AgentStatus

__all__ = [
    "BaselineCapture",
    "BoundaryWatch",
    "DeliveryBaseline",
    "InFlightTurn",
    "RepairLedger",
    "TurnToken",
]


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
    """What the pane showed right after the prompt was sent.

    ``clip_chars`` is the ``bridge.maxScrapeChars`` the text was clipped to, so a later read is
    compared over the same tail even if that key changed meanwhile.
    """

    token_id: str
    captured_at: datetime
    source: str
    text: str
    marker_recognised: bool
    capture: BaselineCapture
    clip_chars: int = 4000


#: herdr's statuses at the prompt (``AgentStatus.at_prompt``), looked up: every open turn, every
#: health tick.
_AT_PROMPT = frozenset(status for status in AgentStatus if status.at_prompt)


@dataclass(slots=True)
class BoundaryWatch:
    """Raw status observations of one open turn, as the lost-boundary stable gate reads them.

    A *stretch* is a run of at-prompt observations (``idle`` or ``done``) with one
    ``state_change_seq``; ``at_prompt`` counts its observations up to two. Anything else breaks
    the stretch and bumps ``epoch``: ``working``, ``blocked`` or ``unknown``, a missing or
    unreadable agent (``None``), or an at-prompt observation with another sequence number (the
    agent changed status in between, unseen). A repair that reads the pane compares ``epoch``
    before and after, so an observation arriving meanwhile makes it lose the race.
    """

    seq: int | None = None
    at_prompt: int = 0
    epoch: int = 0

    def observe(self, status: AgentStatus | None, seq: int | None) -> None:
        """Record one observation (``status`` ``None``: the agent was missing or unreadable)."""
        if status in _AT_PROMPT and seq is not None:
            if self.at_prompt and seq == self.seq:
                self.at_prompt = min(self.at_prompt + 1, 2)
                return
            if self.at_prompt:
                self.epoch += 1  # the status moved between two sightings at the prompt
            self.seq, self.at_prompt = seq, 1
            return
        self.seq, self.at_prompt = None, 0
        self.epoch += 1

    @property
    def stable(self) -> bool:
        """Two at-prompt observations of one sequence number and nothing else since."""
        return self.at_prompt >= 2


@dataclass(slots=True)
class RepairLedger(Revised):
    """What lost-boundary repair answered for one token: attempts, refused scrapes, the last
    result (a :class:`~fleetd.bridge.repair_gates.RepairResult` value) with its detail code, and
    when one more attempt may be made (``None``: no more)."""

    attempts: int = 0
    refused_scrapes: int = 0
    last: str | None = None
    detail: str | None = None
    retry_at: datetime | None = None


@dataclass(slots=True, kw_only=True)
class InFlightTurn(Revised):
    """The open turn of one member.

    Its :attr:`~fleetd.bridge.revision.Revised.revision` (and its ledger's) is renewed by every
    assignment; ``watch`` changes in place, but no member view reads it.
    """

    token: TurnToken
    delivered_at: datetime
    baseline: DeliveryBaseline | None = None
    saw_working: bool = False
    resubmitted: bool = False
    boundary_at: datetime | None = None
    #: opened by an earlier run of fleetd: no baseline, no fallback, only the member's reply
    restored: bool = False
    watch: BoundaryWatch = field(default_factory=BoundaryWatch)
    repair: RepairLedger = field(default_factory=RepairLedger)
