"""Delivery and turn boundaries: the 250 ms status poller's work.

For every session with outstanding work the poller asks herdr for the agent's live status (at
most :data:`LOOKUPS_AT_ONCE` lookups at a time; a member whose lookup herdr is slow to answer is
judged at a later pass, never holding up the others), then:

* a starting member is watched until herdr says it is interactive (or its launch failed);
* queued sends are injected when the target is injectable — session READY or DONE, herdr ``idle``
  or ``done``, no open turn, not being released and no resolver holding the target's
  reconciliation gate (:mod:`fleetd.bridge.resolver`). Every answer to the prompt is classified by
  :mod:`fleetd.bridge.prompt_policy`: only a refusal herdr gives before typing anything is tried
  again (with backoff, within ``bridge.promptRetries``; then the ticket fails once, nothing typed);
  any answer that may have come after typing — an unknown code, an unreadable result, a broken
  link — opens the turn as ``delivery: uncertain`` and is never typed again;
* an open turn records every status it is seen with (its :class:`~.turns.BoundaryWatch`, which
  lost-boundary repair reads) and ``working`` when seen; ``working`` then ``idle``/``done`` for the
  same turn is a trusted boundary. If the member has not called ``fleet_reply`` within a short
  grace after the boundary, the completion fallback — the resolver guard core under the observed
  boundary policy — reads the pane and resolves the turn with the extracted assistant block,
  marked as a fallback (the MUTE outcome), and with the tested fatal signature the same read
  shows, if any (ERROR_ON_SCREEN); while a resolver holds the turn the poller leaves it alone;
* if a delivered prompt does not start working within the submit window, Enter is re-submitted once
  (the paste/submit race);
* a ``*_not_found`` answer with a healthy link is target loss: the target's work fails once.

Nothing here ever re-sends a delivered prompt.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from fleetd.bridge.completion import refusal_record
from fleetd.bridge.durable import DurableState
from fleetd.bridge.evidence import FatalScreenSeen
from fleetd.bridge.lifecycle import TargetLifecycle
from fleetd.bridge.mutes import MuteLog
from fleetd.bridge.prompt_policy import (
    PromptOutcome,
    RetryBudget,
    classify_prompt_error,
    retry_delay,
)
from fleetd.bridge.resolver import CompletionResolver, Policy, Resolution
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import Delivery, TaskBook, Ticket
from fleetd.bridge.turn_machine import (
    BaselineCapture,
    BaselineRead,
    CaptureBaseline,
    DeliveryBaseline,
    ForgetTurnRecord,
    PromptRefused,
    PromptTyped,
    PromptUncertain,
    ReadBoundary,
    RecordUncertain,
    RecordUntyped,
    ResubmitEnter,
    StatusPolled,
    StoreRefused,
    TicketWithdrawn,
    TurnEffect,
    TurnState,
    TurnToken,
    TypePrompt,
    TypingBegan,
    step,
)
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import ControlLinkError, HerdrError, StateStoreError, TargetNotFoundError
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo, AgentStatus
from fleetd.inbox.outbox import LeadOutbox
from fleetd.metrics import Metrics
from fleetd.screens.extract import CaptureResult

__all__ = ["Deliverer"]

_log = logging.getLogger("fleetd.bridge")

#: After a turn is read from the pane, how long the next queued send waits, so that a member's
#: fleet_reply arriving just after the fallback is kept as a late reply to *that* ticket instead of
#: answering the next one (a reply always answers the turn open when it arrives).
LATE_REPLY_WINDOW = timedelta(seconds=2)

#: How long a pass waits for herdr's answers to its status lookups (seconds of clock time).
LOOKUP_WAIT = 1.0
#: Status lookups in flight at once (each is one connection to herdr's socket).
LOOKUPS_AT_ONCE = 16

#: A lookup answered with a line fleetd cannot read (not JSON, not the answer to it): herdr is
#: there and answering, so only that agent is skipped; a link that is down fails every lookup,
#: and its own checks say so.
_UNREADABLE = "invalid_response"


class Deliverer:
    """The poller step: one pass over every session with outstanding work."""

    def __init__(
        self,
        *,
        control: AgentControl,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        settings: Callable[[], FleetdConfig],
        metrics: Metrics,
        lifecycle: TargetLifecycle,
        resolver: CompletionResolver,
        mutes: MuteLog,
        durable: DurableState,
        outbox: LeadOutbox,
    ) -> None:
        self._control = control
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._lifecycle = lifecycle
        self._resolver = resolver
        self._mutes = mutes
        self._durable = durable
        self._outbox = outbox
        self._unreadable: dict[str, str] = {}  # session -> the error its lookup answers (live)
        #: the members whose status lookup is in flight, with the open turn's token when asked
        self._asked: dict[str, TurnToken | None] = {}
        #: answers (or the errors they came as) not yet judged, with that token
        self._answered: dict[str, tuple[AgentInfo | Exception, TurnToken | None]] = {}
        #: the members a prompt is being typed into now, each set once herdr's answer is
        #: carried out
        self._typing: dict[str, asyncio.Event] = {}

    async def poll_once(self) -> None:
        """Ask herdr for every polled member's status and judge each member on its answer.

        At most :data:`LOOKUPS_AT_ONCE` lookups are in flight, each asked by one of as many
        askers that take the next member as they finish, and a pass waits at most
        :data:`LOOKUP_WAIT` for them: a lookup herdr has not answered by then stays in flight,
        its member judged at a later pass once the answer comes. One agent herdr is slow to
        answer for never holds up the others' watch."""
        polled = [s for s in self._roster.needs_poll() if s.live]
        watched = {s.session_id for s in polled}
        self._unreadable = {sid: c for sid, c in self._unreadable.items() if sid in watched}
        for sid in [sid for sid in self._answered if sid not in watched]:
            del self._answered[sid]  # released or at rest meanwhile: nothing to judge
        todo = deque(
            s
            for s in polled
            if s.session_id not in self._asked and s.session_id not in self._answered
        )
        if todo:
            askers = [
                asyncio.ensure_future(self._ask(todo))
                for _ in range(min(LOOKUPS_AT_ONCE, len(todo)))
            ]
            try:
                await self._wait(askers)
            finally:
                todo.clear()  # an asker still waiting on herdr takes no other member after it
        answers = [
            (s, self._answered.pop(s.session_id)) for s in polled if s.session_id in self._answered
        ]
        link_down = bool(answers) and all(_link_failure(outcome) for _, (outcome, _) in answers)
        for picked, (outcome, asked) in answers:
            if link_down:
                continue  # every answer failed on the link: nothing can be judged this pass
            if isinstance(outcome, TargetNotFoundError):
                await self._lifecycle.target_not_found(picked, outcome.code)
                continue
            if isinstance(outcome, HerdrError):
                self._skip(picked, outcome.code)  # one unreadable agent never stalls the others
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            session = self._roster.sessions.get(picked.session_id)  # as it is after awaits
            if session is None or not session.live:
                continue  # released while herdr was asked
            now_open = self._roster.inflight.get(session.session_id)
            if (now_open.token if now_open is not None else None) != asked:
                continue  # a turn opened or closed while herdr was asked: its status is older
            if self._unreadable.pop(session.session_id, None) is not None:
                _log.info("session %s: herdr answers for it again", session.session_id)
            self._roster.see_status(session.session_id, outcome.agent_status.value)
            await self._step(session, outcome)
        await self._lifecycle.check_readiness()

    async def _ask(self, todo: deque[Session]) -> None:
        """Ask herdr for the status of the members of ``todo``, one after another, each answer
        (or the error it came as) kept with the open turn's token of when it was asked."""
        while todo:
            member = todo.popleft()
            sid = member.session_id
            turn = self._roster.inflight.get(sid)
            self._asked[sid] = turn.token if turn is not None else None
            outcome: AgentInfo | Exception
            try:
                outcome = await self._control.get_agent(member.name)
            except Exception as exc:  # noqa: BLE001 - judged with the member, raised there if odd
                outcome = exc
            finally:
                asked = self._asked.pop(sid)
            self._answered[sid] = (outcome, asked)

    async def _wait(self, askers: Sequence[asyncio.Future[None]]) -> None:
        """Wait until every asker is done, or :data:`LOOKUP_WAIT` of clock time."""
        pending: set[asyncio.Future[None]] = set(askers)
        timer = asyncio.ensure_future(self._clock.sleep(LOOKUP_WAIT))
        try:
            while pending and not timer.done():
                _done, pending = await asyncio.wait(
                    {*pending, timer}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(timer)
        finally:
            timer.cancel()

    def _skip(self, session: Session, code: str) -> None:
        """herdr answered this agent's lookup with an error that is not target loss: nothing is
        judged for it this pass (said once per code, not four times a second)."""
        turn = self._roster.inflight.get(session.session_id)
        if turn is not None:  # an unreadable agent breaks a stable boundary
            self._roster.inflight.sight(turn, None, None, self._clock.now())
        if self._unreadable.get(session.session_id) != code:
            _log.warning(
                "session %s: its status lookup failed (%s); skipped until it reads again",
                session.session_id,
                code,
            )
        self._unreadable[session.session_id] = code

    async def _step(self, session: Session, info: AgentInfo) -> None:
        if session.state is SessionState.SPAWNING:
            await self._lifecycle.start_progress(session, info)
            return
        turn = self._roster.inflight.get(session.session_id)
        if turn is not None:
            await self._watch_turn(session, turn, info)
            return
        await self.inject_next(session, info.agent_status)

    async def _watch_turn(self, session: Session, turn: TurnState, info: AgentInfo) -> None:
        """Feed the status just read to the turn machine and carry out what it asks: Enter once
        more (the paste/submit race), or the completion fallback at a trusted boundary. A
        resolver holding the turn leaves it alone until it lets go; a turn that spans a restart
        is resolved only by the member's reply (M4 §8)."""
        polled = StatusPolled(
            info.agent_status,
            info.state_change_seq,
            held=self._roster.is_reconciling(session.session_id),
            submit_window=self._settings().bridge.submit_retry,
        )
        for effect in self._roster.inflight.step(turn.token, polled, self._clock.now()) or ():
            if isinstance(effect, ResubmitEnter):
                try:
                    await self._control.send_keys(session.name, ["enter"])
                except HerdrError as exc:
                    sid = session.session_id
                    _log.warning("session %s: Enter re-submit failed: %s", sid, exc.code)
            elif isinstance(effect, ReadBoundary):
                current = self._roster.inflight.get(session.session_id)
                if current is not None and current.token == effect.token:
                    await self._fallback(self._roster.sessions[session.session_id], current)

    async def _fallback(self, session: Session, turn: TurnState) -> None:
        """Resolve a turn at a trusted boundary from the pane, marked as a fallback.

        The resolver guard core reads the pane under the observed-boundary policy. The same read
        is matched against the tested fatal signatures: herdr shows an errored Claude Code or
        Codex turn as ``idle``, so this boundary is where such a turn ends. A match is named in
        the result's markers and recorded on the session for ERROR_ON_SCREEN.
        """
        outcome = await self._resolver.resolve_captured(session, turn, Policy.OBSERVED_BOUNDARY)
        if outcome.resolution is not Resolution.RESOLVED:
            return
        # as the resolver left it (it marked the fallback)
        session = self._roster.sessions.get(session.session_id, session)
        now = session.fallback_at or self._clock.now()
        self._metrics.mute_total.labels(profile=session.profile).inc()
        self._mutes.note(session_id=session.session_id, profile=session.profile, at=now)
        if outcome.fatal is not None:
            seen = FatalScreenSeen(
                signature_id=outcome.fatal.id, ticket=turn.token.ticket_id, turn=turn.token.turn
            )
            self._roster.update(session.session_id, fatal_screen=seen)

    async def inject_next(self, session: Session, status: AgentStatus | None = None) -> None:
        """Deliver the head of the session's queue if the session can take it now.

        ``status`` is herdr's live status when the caller has just read it; otherwise it is read
        here. Nothing is typed into a member that herdr does not show at its prompt, and a
        refused prompt waits out its backoff.
        """
        sid = session.session_id
        if sid in self._typing:
            return
        now = self._clock.now()
        ticket = self._deliverable(session, now)
        if ticket is None:
            return
        # one prompt at a time per target, never typed twice; a reply waits for its answer
        answered = self._typing[sid] = asyncio.Event()
        try:
            if status is None:
                try:
                    status = (await self._control.get_agent(session.name)).agent_status
                except TargetNotFoundError as exc:
                    await self._lifecycle.target_not_found(session, exc.code)
                    return
                except HerdrError:
                    return  # nothing was sent: stays at the head of the queue
                held = self._roster.sessions.get(sid)  # as it is now: herdr was asked meanwhile
                if held is None or self._deliverable(held, now) is not ticket:
                    return  # released, stopped, or its head moved meanwhile: the next pass sees
                session = held
            if not status.at_prompt:
                return
            token = TurnToken(
                token_id=f"turn-{secrets.token_hex(6)}",
                session_id=sid,
                ticket_id=ticket.ticket_id,
                turn=session.turn + 1,  # the turn its delivery opens
            )
            turn, effects = step(TurnState.pending(token), TypingBegan(), now)
            outcome, code = PromptOutcome.NOT_SENT, "not_typed"
            for effect in effects:  # in order: stored as uncertain, then typed (write-ahead)
                if isinstance(effect, RecordUncertain) and not self._record_typing(
                    session, ticket, token
                ):
                    step(turn, StoreRefused(), self._clock.now())  # UNTYPED: nothing to record
                    return  # nothing was typed: stays at the head of the queue
                if isinstance(effect, TypePrompt):
                    outcome, code = await self._prompt(session, ticket.prompt or "")
            # still held while herdr's answer is carried out: a lost target is checked with a
            # ping, and meanwhile another send must not type the same head of the queue
            await self._typed(session, ticket, turn, outcome, code)
        finally:
            del self._typing[sid]
            answered.set()

    async def typed(self, session_id: str) -> None:
        """Wait until the prompt being typed into the member now, if any, has herdr's answer
        carried out (its turn open, or its ticket back in the queue). A member may finish its
        task and reply before herdr answers ``agent.prompt``: its reply answers that turn. The
        wait ends within herdr's request deadline and the reads that follow its answer."""
        answered = self._typing.get(session_id)
        if answered is not None:
            await answered.wait()

    def _deliverable(self, session: Session, now: datetime) -> Ticket | None:
        """The head of the member's queue if it may be typed now: the member at rest (ready or
        done) with no open turn, no release, reconciliation or backoff under way, and no late
        reply to a turn just read from its pane still expected."""
        sid = session.session_id
        queue = self._roster.queue(sid)
        if (
            not queue
            or session.state not in (SessionState.READY, SessionState.DONE)
            or sid in self._roster.inflight
            or sid in self._roster.gates
            or self._roster.is_reconciling(sid)
        ):
            return None
        ticket = queue[0]
        if ticket.retry_at is not None and now < ticket.retry_at:
            return None
        if session.fallback_at is not None and now - session.fallback_at < LATE_REPLY_WINDOW:
            return None  # a late reply to the turn just read from the pane may still be on its way
        return ticket

    def _record_typing(self, session: Session, ticket: Ticket, token: TurnToken) -> bool:
        """Store the prompt as uncertain before anything is typed: a crash never types it again.
        False when the store refused (then nothing may be typed)."""
        try:
            self._durable.typing(session, ticket, token_id=token.token_id, now=self._clock.now())
        except StateStoreError as exc:
            sid = session.session_id
            _log.warning("session %s: send not typed, the state store refused (%s)", sid, exc)
            return False
        self._tasks.stored(ticket)
        return True

    async def _typed(
        self, session: Session, ticket: Ticket, turn: TurnState, outcome: PromptOutcome, code: str
    ) -> None:
        """herdr answered the prompt: feed its answer to the turn machine and open the turn, or
        put the ticket back (nothing typed), or drop the turn (its send was cancelled meanwhile)."""
        sid = session.session_id
        if outcome is PromptOutcome.NOT_SENT:
            # nothing reached herdr: stays at the head of the queue
            self._untyped(session, ticket, step(turn, PromptRefused(code), self._clock.now())[1])
            return
        if outcome is PromptOutcome.TARGET_LOST:
            await self._lifecycle.target_not_found(session, code)
            session = self._roster.sessions.get(sid, session)
        if outcome in (PromptOutcome.REFUSED, PromptOutcome.TARGET_LOST):
            failed = self._refused(session, ticket, code)
            self._untyped(session, ticket, step(turn, PromptRefused(code), self._clock.now())[1])
            if failed and not ticket.collected_sync:  # a waiting fleet_send hears it in person
                now = self._clock.now()
                await self._outbox.keep(refusal_record(session, ticket, code=code, now=now))
            return
        queue = self._roster.queue(sid)  # as it is now: herdr was asked meanwhile
        if not queue or queue[0] is not ticket or ticket.terminal:
            # the send was cancelled while the prompt was in flight: no turn opens for it
            for effect in step(turn, TicketWithdrawn(), self._clock.now())[1]:
                if isinstance(effect, ForgetTurnRecord):
                    self._durable.turn_closed(sid)
            return
        if outcome is PromptOutcome.UNCERTAIN:
            # herdr may have typed the prompt: typing it again could run the task twice, so the
            # turn opens as delivered, and the ticket says the delivery is uncertain.
            _log.warning("session %s: prompt delivery uncertain (%s)", sid, code)
        self._roster.dequeue(sid, ticket)
        now = self._clock.now()
        session = self._roster.apply(sid, SessionEvent.DELIVERED, now)
        delivery = Delivery.UNCERTAIN if outcome is PromptOutcome.UNCERTAIN else Delivery.CONFIRMED
        self._tasks.mark_delivered(ticket, turn=session.turn, now=now, delivery=delivery)
        answer = PromptUncertain(code) if outcome is PromptOutcome.UNCERTAIN else PromptTyped()
        turn, effects = step(turn, answer, now)
        token = turn.token
        self._roster.issue(token)
        self._roster.inflight.open(turn)
        for effect in effects:
            if isinstance(effect, CaptureBaseline):
                baseline = await self._capture_baseline(session, token)
                self._roster.inflight.step(token, BaselineRead(baseline), self._clock.now())

    def _untyped(self, session: Session, ticket: Ticket, effects: tuple[TurnEffect, ...]) -> None:
        """Carry out what the machine asks of a turn nothing was typed for: the ticket is
        stored as queued again, with its prompt."""
        if ticket.delivered_at is not None:
            return  # typed meanwhile by another pass: its turn and record are that pass's
        for effect in effects:
            if isinstance(effect, RecordUntyped):
                self._durable.untyped(session, ticket)

    async def _prompt(self, session: Session, prompt: str) -> tuple[PromptOutcome, str]:
        """One ``agent.prompt`` and what its answer means (see :mod:`~.prompt_policy`)."""
        try:
            await self._control.prompt(session.name, prompt)
        except HerdrError as exc:
            link = isinstance(exc, ControlLinkError)
            return classify_prompt_error(exc.code, link=link), exc.code
        except Exception as exc:  # noqa: BLE001 - the request left: it may have been typed
            _log.error(
                "session %s: agent.prompt failed unexpectedly (%s)",
                session.session_id,
                type(exc).__name__,
            )
            return PromptOutcome.UNCERTAIN, "unexpected_error"
        return PromptOutcome.DELIVERED, "ok"

    def _refused(self, session: Session, ticket: Ticket, code: str) -> bool:
        """herdr typed nothing: try again after a backoff, or fail the ticket past the budget
        (then ``True``: the owning lead is told)."""
        queue = self._roster.queue(session.session_id)
        if ticket.terminal or not queue or queue[0] is not ticket:
            return False  # failed with its target, or cancelled meanwhile
        config = self._settings().bridge
        budget = RetryBudget(retries=config.prompt_retries, base=config.prompt_retry_base)
        now = self._clock.now()
        delay = retry_delay(ticket.refusals + 1, budget)
        self._tasks.refused(ticket, retry_at=None if delay is None else now + delay)
        if delay is not None:
            return False
        self._roster.dequeue(session.session_id, ticket)
        _log.warning(
            "session %s: prompt refused %d times (%s); ticket failed, nothing typed",
            session.session_id,
            ticket.refusals,
            code,
        )
        self._tasks.fail(
            ticket.ticket_id,
            reason="prompt_refused",
            now=now,
            hint=(
                f"herdr refused the prompt {ticket.refusals} times ({code}) before typing it; "
                "nothing was typed. Check the member with "
                f'fleet_status(sessionId="{session.session_id}") and send the task again.'
            ),
        )
        return True

    async def _capture_baseline(self, session: Session, token: TurnToken) -> DeliveryBaseline:
        """The pane right after the prompt, read by the resolver's own scrape (M4 §8.2)."""
        scrape = await self._resolver.scrape(session)
        extraction = scrape.extraction
        return DeliveryBaseline(
            token_id=token.token_id,
            captured_at=self._clock.now(),
            source="visible",
            text=extraction.text,
            marker_recognised=extraction.marker_recognised,
            capture=_CAPTURES[extraction.capture],
            clip_chars=scrape.clip_chars,
        )


_CAPTURES = {
    CaptureResult.PRESENT: BaselineCapture.PRESENT,
    CaptureResult.UNRECOGNISED: BaselineCapture.UNRECOGNISED,
    CaptureResult.READ_FAILED: BaselineCapture.READ_FAILED,
}


def _link_failure(outcome: AgentInfo | Exception) -> bool:
    """Whether a lookup failed on the link (not an answer herdr gave, readable or not)."""
    return isinstance(outcome, ControlLinkError) and outcome.code != _UNREADABLE
