"""The completion resolver: one guard core, two policies (M4 §8.1, §8.3).

A turn's result is read from the pane in two situations. After a *trusted* boundary (herdr showed
the turn ``working``, then ``idle``/``done``) the member certainly ran the turn; if it did not
call ``fleet_reply``, the completion fallback resolves the turn from the pane. After a *lost*
boundary, health only suspects that the turn ended; repair may then rebuild the result only under
strict gates. Both go through :meth:`CompletionResolver.resolve_captured`, so each guard exists
once:

* **waiter identity** — the turn is still the session's open turn, its ticket still pending, and
  no ``fleet_reply`` of the member is being stored (checked before the read and again after it);
* **scrape** — one ``visible`` pane read, the assistant block extracted and matched against the
  tested fatal signatures (:meth:`CompletionResolver.scrape`, also used for the delivery baseline);
* **clipping** — the block keeps its tail within ``bridge.maxScrapeChars`` and says so;
* **unchanged** — the block is compared with the delivery baseline over the same clipped tail;
* **exact turn** — :meth:`~fleetd.bridge.completion.TurnCompletion.complete` resolves exactly
  that token's waiter, at most once.

The policies differ only in what :func:`judge_scrape` answers, and that is a table:

===========================  ==================================  ==============================
scrape                       OBSERVED_BOUNDARY                   LOST_BOUNDARY_REPAIR
===========================  ==================================  ==============================
pane read failed             resolve, "could not be read" (open)  refuse UNREADABLE
no assistant marker          resolve as raw fallback              refuse AMBIGUOUS_OUTPUT
fatal signature / blank      resolve, marked                      refuse AMBIGUOUS_OUTPUT
no usable baseline           resolve, no unchanged check (open)   refuse NO_BASELINE
same as the clipped baseline resolve, marked "unchanged"          refuse UNCHANGED
otherwise                    resolve as ``fallback``              resolve as ``repaired``
===========================  ==================================  ==============================

The observed boundary keeps its two fail-open rules (a trusted boundary proves the turn ran);
repair has none. Under repair, any conflicting status observation of the turn while the pane was
being read (its :class:`~fleetd.bridge.turns.BoundaryWatch` epoch moved) loses the race.

The resolver holds the target's *reconciliation gate* from the read until the turn is resolved,
the session has moved to DONE and the late-reply window is set: no queued send is delivered to the
target in between (:meth:`~fleetd.bridge.roster.Roster.reconciling`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from fleetd.bridge.completion import TurnCompletion
from fleetd.bridge.repair_gates import Refusal, RepairResult
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import ResultSource, TaskBook
from fleetd.bridge.turns import BaselineCapture, DeliveryBaseline, TurnState
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import HerdrError
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import ReadSource
from fleetd.screens.extract import CaptureResult, Extraction, extract_assistant_block
from fleetd.screens.fatal import FatalSignature, match_fatal
from fleetd.screens.kinds import parse_agent_kind
from fleetd.screens.markers import FallbackReason, render_fallback

__all__ = [
    "CompletionResolver",
    "Outcome",
    "Policy",
    "Resolution",
    "Resolve",
    "Scrape",
    "judge_scrape",
    "pane_of",
    "unchanged",
]


class Policy(StrEnum):
    """Which rules the guard core applies to a scrape."""

    OBSERVED_BOUNDARY = "observed_boundary"
    LOST_BOUNDARY_REPAIR = "lost_boundary_repair"


@dataclass(frozen=True, slots=True, kw_only=True)
class Scrape:
    """One pane read, extracted: the assistant block, its clip limit and any fatal signature."""

    extraction: Extraction
    clip_chars: int
    fatal: FatalSignature | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolve:
    """Resolve the waiter with this content and source."""

    content: str
    source: ResultSource


def unchanged(extraction: Extraction, baseline: DeliveryBaseline | None, clip_chars: int) -> bool:
    """True when a recognised, non-blank block equals a usable baseline over the same tail."""
    if baseline is None or baseline.capture is not BaselineCapture.PRESENT:
        return False
    if not extraction.marker_recognised or not extraction.text.strip():
        return False
    tail = min(baseline.clip_chars, clip_chars)
    return extraction.text[-tail:] == baseline.text[-tail:]


def judge_scrape(
    policy: Policy, scrape: Scrape, baseline: DeliveryBaseline | None
) -> Resolve | Refusal:
    """What the guard core does with one scrape under ``policy`` (the table above)."""
    extraction = scrape.extraction
    same = unchanged(extraction, baseline, scrape.clip_chars)
    if policy is Policy.OBSERVED_BOUNDARY:
        content = render_fallback(
            extraction, FallbackReason.COMPLETION_FALLBACK, fatal=scrape.fatal, unchanged=same
        )
        source = (
            ResultSource.FALLBACK if extraction.marker_recognised else ResultSource.RAW_FALLBACK
        )
        return Resolve(content=content, source=source)
    if extraction.capture is CaptureResult.READ_FAILED:
        return Refusal(result=RepairResult.REFUSED_UNREADABLE, detail="pane_read_failed")
    if not extraction.marker_recognised:
        return Refusal(result=RepairResult.REFUSED_AMBIGUOUS_OUTPUT, detail="no_assistant_marker")
    if scrape.fatal is not None:
        return Refusal(result=RepairResult.REFUSED_AMBIGUOUS_OUTPUT, detail="error_on_screen")
    if not extraction.text.strip():
        return Refusal(result=RepairResult.REFUSED_AMBIGUOUS_OUTPUT, detail="no_assistant_text")
    if baseline is None or baseline.capture is not BaselineCapture.PRESENT:
        return Refusal(result=RepairResult.REFUSED_NO_BASELINE, detail="no_baseline")
    if same:
        return Refusal(result=RepairResult.REFUSED_UNCHANGED, detail="same_as_baseline")
    content = render_fallback(extraction, FallbackReason.REPAIRED_COMPLETION)
    return Resolve(content=content, source=ResultSource.REPAIRED)


class Resolution(StrEnum):
    RESOLVED = "resolved"  # this call resolved the exact waiter
    REFUSED = "refused"  # the policy refused the scrape; the waiter is unchanged
    LOST = "lost"  # the waiter was no longer open, or someone else resolved it first


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one :meth:`CompletionResolver.resolve_captured` call did."""

    resolution: Resolution
    refusal: Refusal | None = None
    source: ResultSource | None = None
    fatal: FatalSignature | None = None


def pane_of(session: Session) -> str:
    """The pane of a launched member (a session gets its pane before it can have a turn)."""
    if session.pane_id is None:
        raise HerdrError("pane_not_found", "the session has no pane yet")
    return session.pane_id


class CompletionResolver:
    """The guard core: scrape, judge under a policy, resolve the exact waiter once."""

    def __init__(
        self,
        *,
        control: AgentControl,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        settings: Callable[[], FleetdConfig],
        completion: TurnCompletion,
    ) -> None:
        self._control = control
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._settings = settings
        self._completion = completion

    async def scrape(self, session: Session) -> Scrape:
        """One ``visible`` read of the session's pane, extracted and clipped (never raises)."""
        clip_chars = self._settings().bridge.max_scrape_chars
        try:
            read = await self._control.read(pane_of(session), ReadSource.VISIBLE)
        except HerdrError:
            return Scrape(extraction=Extraction.read_failed(), clip_chars=clip_chars)
        kind = parse_agent_kind(session.kind)
        return Scrape(
            extraction=extract_assistant_block(kind, read.text, max_chars=clip_chars),
            clip_chars=clip_chars,
            fatal=match_fatal(kind, read.text),
        )

    def waiter_open(self, session: Session, turn: TurnState) -> bool:
        """``turn`` is still the session's open turn, its ticket pending, no reply being stored."""
        return self._current(session, turn) is not None

    def _current(self, session: Session, turn: TurnState) -> TurnState | None:
        """The session's open turn now, if it is still ``turn``'s (the value moves with every
        step; the token names the turn), its ticket pending and no reply being stored."""
        ticket = self._tasks.get(turn.token.ticket_id)
        current = self._roster.inflight.get(session.session_id)
        if (
            current is not None
            and current.token.token_id == turn.token.token_id
            and ticket is not None
            and not ticket.terminal
            and not self._completion.storing(session.session_id)
        ):
            return current
        return None

    async def resolve_captured(self, session: Session, turn: TurnState, policy: Policy) -> Outcome:
        """Read the pane and resolve ``turn``'s exact waiter if ``policy`` allows it."""
        opened = self._current(session, turn)
        if opened is None:
            return Outcome(resolution=Resolution.LOST)
        epoch = opened.watch.epoch
        with self._roster.reconciling(session.session_id):
            scrape = await self.scrape(session)
            strict = policy is Policy.LOST_BOUNDARY_REPAIR
            current = self._current(session, turn)
            if current is None or (strict and current.watch.epoch != epoch):
                return Outcome(resolution=Resolution.LOST, fatal=scrape.fatal)
            verdict = judge_scrape(policy, scrape, current.baseline)
            if isinstance(verdict, Refusal):
                return Outcome(resolution=Resolution.REFUSED, refusal=verdict, fatal=scrape.fatal)
            won = await self._completion.complete(
                session, turn.token, content=verdict.content, source=verdict.source
            )
            if not won:
                return Outcome(resolution=Resolution.LOST, fatal=scrape.fatal)
            # a pane-derived result: a late fleet_reply must stay with this ticket
            if session.session_id in self._roster.sessions:
                self._roster.update(session.session_id, fallback_at=self._clock.now())
            return Outcome(
                resolution=Resolution.RESOLVED, source=verdict.source, fatal=scrape.fatal
            )
