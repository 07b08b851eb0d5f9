"""The strict gates of lost-boundary repair (M4 §8.3, Figure 3), as pure functions.

Theory of operation
-------------------
Health suspects a lost turn boundary when a BUSY session's member sits at its prompt on two
snapshots; it then asks the bridge to reconcile that turn's token. Repair is the only path that
rebuilds a result, so it must prefer a visible stall to a fabricated reply: every gate below has
to hold, in this order, and the first that fails answers with a typed result.

=====  ==========================================================  =============================
gate   holds when                                                  otherwise
=====  ==========================================================  =============================
token  this run issued the token and its target is live            STALE_TURN
open   the target's open turn carries the token                    ALREADY_RESOLVED (its ticket
                                                                   is done), else STALE_TURN
quota  the token may still be tried now (see below)                the last result, again
stable the session is BUSY on the token's turn; two raw IDLE/DONE  RACE_LOST (take a fresh
       observations of one ``state_change_seq`` and nothing       snapshot)
       else since; no reply being stored
waiter the token's ticket is still pending (exact waiter)          ALREADY_RESOLVED (done),
                                                                   else STALE_TURN
capture a delivery capture of this very token exists              REFUSED_NO_CAPTURE (detail
                                                                   ``fleetd_restarted_during_turn``
                                                                   for a turn a restart spans)
base   repair is enabled for the agent kind; the capture was a    REFUSED_NO_BASELINE
       successful read with a recognised assistant marker,
       taken within :data:`BASELINE_DEADLINE` of delivery
=====  ==========================================================  =============================

Past these gates the pane is read once, and the shared resolver guard core
(:mod:`fleetd.bridge.resolver`) judges the read under the repair policy: unreadable, raw text, a
blank or error block, or text equal to the clipped baseline refuse; otherwise it resolves the
exact waiter, and losing that race is RACE_LOST. Any refusal leaves the waiter as it was.

Retries (§8.4): UNCHANGED, UNREADABLE and AMBIGUOUS_OUTPUT are *refused scrapes*; the first one
allows one delayed retry of the same token, the second stops repair for it. A missing capture
or baseline never gets a retry. RACE_LOST allows another attempt after the same delay, unless a
scrape was already refused (that retry was the one), and within :data:`MAX_ATTEMPTS` per token.
:func:`record` keeps this ledger; the bridge enforces it itself, whatever the monitor asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetd.bridge.tasks import TicketOutcome
from fleetd.bridge.turn_machine import (
    MAX_ATTEMPTS,
    RETRY_DELAY,
    BaselineCapture,
    RepairLedger,
    record_repair,
)

__all__ = [
    "BASELINE_DEADLINE",
    "MAX_ATTEMPTS",
    "RETRYABLE",
    "RETRY_DELAY",
    "BaselineFacts",
    "Refusal",
    "RepairResult",
    "TurnFacts",
    "judge_turn",
    "record",
]

BASELINE_DEADLINE: Final = timedelta(seconds=2)
"""A baseline captured later than this after delivery is late: it is not evidence (§8.2)."""


class RepairResult(StrEnum):
    """The typed answer of ``reconcile_lost_boundary`` (M4 §8.3); values reach metrics and JSON."""

    REPAIRED = "repaired"
    ALREADY_RESOLVED = "already_resolved"
    REFUSED_NO_CAPTURE = "refused_no_capture"
    REFUSED_NO_BASELINE = "refused_no_baseline"
    REFUSED_UNREADABLE = "refused_unreadable"
    REFUSED_UNCHANGED = "refused_unchanged"
    REFUSED_AMBIGUOUS_OUTPUT = "refused_ambiguous_output"
    STALE_TURN = "stale_turn"
    RACE_LOST = "race_lost"


RETRYABLE: Final = frozenset(
    {
        RepairResult.REFUSED_UNCHANGED,
        RepairResult.REFUSED_UNREADABLE,
        RepairResult.REFUSED_AMBIGUOUS_OUTPUT,
    }
)
"""Refused scrapes: one delayed retry for the token, then repair stops for it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A typed result and a stable detail code saying which check answered."""

    result: RepairResult
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BaselineFacts:
    """The delivery capture as the baseline gates see it."""

    capture: BaselineCapture
    same_token: bool
    late: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFacts:
    """Everything the gates before the pane read look at, for one expected token."""

    token_known: bool
    token_open: bool
    ticket: TicketOutcome | None
    same_turn_busy: bool
    stable: bool
    storing_reply: bool
    kind_enabled: bool
    baseline: BaselineFacts | None
    ledger: RepairLedger
    now: datetime
    restored: bool = False  # the turn was opened by a run of fleetd before a restart


def _quota(ledger: RepairLedger, now: datetime) -> Refusal | None:
    """The last answer again while this token may not be tried (stopped, or not yet due)."""
    if ledger.attempts == 0 or ledger.last is None:
        return None
    last = RepairResult(ledger.last)
    if ledger.retry_at is None:
        return Refusal(result=last, detail="repair_stopped_for_token")
    if now < ledger.retry_at:
        return Refusal(result=last, detail="retry_not_due")
    return None


def judge_turn(facts: TurnFacts) -> Refusal | None:
    """The first gate before the pane read that fails, or ``None``: read the pane."""
    if not facts.token_known:
        return Refusal(result=RepairResult.STALE_TURN, detail="token_unknown")
    if not facts.token_open:
        if facts.ticket is TicketOutcome.DONE:
            return Refusal(result=RepairResult.ALREADY_RESOLVED, detail="resolved")
        return Refusal(result=RepairResult.STALE_TURN, detail="turn_moved_on")
    quota = _quota(facts.ledger, facts.now)
    if quota is not None:
        return quota
    if not facts.same_turn_busy:
        return Refusal(result=RepairResult.RACE_LOST, detail="not_busy_on_turn")
    if facts.storing_reply:
        return Refusal(result=RepairResult.RACE_LOST, detail="reply_being_stored")
    if not facts.stable:
        return Refusal(result=RepairResult.RACE_LOST, detail="not_stable_at_prompt")
    if facts.ticket is TicketOutcome.DONE:
        return Refusal(result=RepairResult.ALREADY_RESOLVED, detail="resolved_same_turn")
    if facts.ticket is not TicketOutcome.PENDING:
        return Refusal(result=RepairResult.STALE_TURN, detail="waiter_closed")
    return _baseline(facts)


def _baseline(facts: TurnFacts) -> Refusal | None:
    baseline = facts.baseline
    if baseline is None and facts.restored:
        # M4 §8: a post-restart baseline never authorises repair; the lead is told why
        return Refusal(
            result=RepairResult.REFUSED_NO_CAPTURE, detail="fleetd_restarted_during_turn"
        )
    if baseline is None:
        return Refusal(result=RepairResult.REFUSED_NO_CAPTURE, detail="no_capture")
    if not baseline.same_token:
        return Refusal(result=RepairResult.REFUSED_NO_CAPTURE, detail="capture_of_another_turn")
    if not facts.kind_enabled:
        return Refusal(result=RepairResult.REFUSED_NO_BASELINE, detail="kind_not_enabled")
    if baseline.capture is BaselineCapture.READ_FAILED:
        return Refusal(result=RepairResult.REFUSED_NO_BASELINE, detail="baseline_read_failed")
    if baseline.capture is BaselineCapture.UNRECOGNISED:
        return Refusal(result=RepairResult.REFUSED_NO_BASELINE, detail="baseline_unrecognised")
    if baseline.late:
        return Refusal(result=RepairResult.REFUSED_NO_BASELINE, detail="baseline_late")
    return None


def record(ledger: RepairLedger, answer: Refusal, now: datetime) -> RepairLedger:
    """The token's ledger after ``answer`` (an attempt that reached the gates of an open turn):
    :func:`~fleetd.bridge.turn_machine.record_repair`, which the turn machine applies."""
    return record_repair(
        ledger,
        result=answer.result.value,
        detail=answer.detail,
        retryable=answer.result in RETRYABLE,
        race_lost=answer.result is RepairResult.RACE_LOST,
        now=now,
    )
