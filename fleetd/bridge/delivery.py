"""Delivery and turn boundaries: the 250 ms status poller's work.

For every session with outstanding work the poller asks herdr for the agent's live status, then:

* a starting member is watched until herdr says it is interactive (or its launch failed);
* queued sends are injected when the target is injectable — session READY or DONE, herdr ``idle``
  or ``done``, no open turn and no reconciliation gate;
* an open turn records ``working`` when seen; ``working`` then ``idle``/``done`` for the same turn
  is a trusted boundary. If the member has not called ``fleet_reply`` within a short grace after the
  boundary, the completion fallback reads the pane and resolves the turn with the extracted
  assistant block, marked as a fallback (the MUTE outcome), and with the tested fatal signature
  the same read shows, if any (ERROR_ON_SCREEN);
* if a delivered prompt does not start working within the submit window, Enter is re-submitted once
  (the paste/submit race);
* a ``*_not_found`` answer with a healthy link is target loss: the target's work fails once.

Nothing here ever re-sends a delivered prompt.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from fleetd.bridge.evidence import FatalScreenSeen
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import ResultSource
from fleetd.bridge.turns import BaselineCapture, DeliveryBaseline, InFlightTurn, TurnToken
from fleetd.errors import ControlLinkError, HerdrError, TargetNotFoundError
from fleetd.herdr.model import AgentInfo, AgentStatus, ReadSource
from fleetd.screens.extract import Extraction, extract_assistant_block
from fleetd.screens.fatal import FatalSignature, match_fatal
from fleetd.screens.kinds import parse_agent_kind
from fleetd.screens.markers import FallbackReason, render_fallback

if TYPE_CHECKING:
    from fleetd.bridge.service import Bridge

__all__ = ["Deliverer"]

_log = logging.getLogger("fleetd.bridge")

#: How long after a trusted boundary a member's own fleet_reply may still win over the fallback.
REPLY_GRACE = timedelta(seconds=1)
_AT_PROMPT = frozenset({AgentStatus.IDLE, AgentStatus.DONE})
_RETRY_LATER = frozenset({"agent_blocked", "agent_not_ready", "agent_prompt_failed"})
#: Link failures that happen before a request is written: the prompt surely did not arrive.
_NOT_SENT = frozenset({"connect_failed", "connect_timeout"})


class Deliverer:
    """The poller step: one pass over every session with outstanding work."""

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    async def poll_once(self) -> None:
        bridge = self._bridge
        for session in bridge.roster.needs_poll():
            if not session.live:
                continue
            try:
                info = await bridge.control.get_agent(session.name)
            except TargetNotFoundError as exc:
                await bridge.on_target_not_found(session, exc.code)
                continue
            except ControlLinkError:
                return  # the link is down: nothing can be judged this pass
            bridge.roster.live_status[session.session_id] = info.agent_status.value
            await self._step(session, info)
        await bridge.check_readiness()

    async def _step(self, session: Session, info: AgentInfo) -> None:
        bridge = self._bridge
        if session.state is SessionState.SPAWNING:
            await bridge.on_start_progress(session, info)
            return
        turn = bridge.roster.inflight.get(session.session_id)
        if turn is not None:
            await self._watch_turn(session, turn, info.agent_status)
            return
        await self.inject_next(session, info.agent_status)

    async def _watch_turn(self, session: Session, turn: InFlightTurn, status: AgentStatus) -> None:
        bridge = self._bridge
        now = bridge.clock.now()
        if status is AgentStatus.WORKING:
            turn.saw_working = True
            turn.boundary_at = None
            return
        if status not in _AT_PROMPT:
            return
        if turn.saw_working:
            if turn.boundary_at is None:
                turn.boundary_at = now
            if now - turn.boundary_at >= REPLY_GRACE:
                await self._fallback(session, turn)
            return
        submit_window = timedelta(milliseconds=bridge.settings().bridge.submit_retry_ms)
        if not turn.resubmitted and now - turn.delivered_at >= submit_window:
            turn.resubmitted = True
            try:
                await bridge.control.send_keys(session.name, ["enter"])
            except HerdrError as exc:
                _log.warning("session %s: Enter re-submit failed: %s", session.session_id, exc.code)

    async def _fallback(self, session: Session, turn: InFlightTurn) -> None:
        """Resolve a turn at a trusted boundary from the pane, marked as a fallback.

        The same read is matched against the tested fatal signatures: herdr shows an errored
        Claude Code or Codex turn as ``idle``, so this boundary is where such a turn ends. A match
        is named in the result's markers and recorded on the session for ERROR_ON_SCREEN.
        """
        bridge = self._bridge
        max_chars = bridge.settings().bridge.max_scrape_chars
        fatal: FatalSignature | None = None
        try:
            read = await bridge.control.read(_pane(session), ReadSource.VISIBLE)
        except HerdrError:
            extraction = Extraction.read_failed()
        else:
            kind = parse_agent_kind(session.kind)
            extraction = extract_assistant_block(kind, read.text, max_chars=max_chars)
            fatal = match_fatal(kind, read.text)
        content = render_fallback(extraction, FallbackReason.COMPLETION_FALLBACK, fatal=fatal)
        source = (
            ResultSource.FALLBACK if extraction.marker_recognised else ResultSource.RAW_FALLBACK
        )
        if await bridge.complete_turn(session, turn.token, content=content, source=source):
            bridge.metrics.mute_total.labels(profile=session.profile).inc()
            bridge.note_mute(session)
            if fatal is not None:
                session.fatal_screen = FatalScreenSeen(
                    signature_id=fatal.id, ticket=turn.token.ticket_id, turn=turn.token.turn
                )

    async def inject_next(self, session: Session, status: AgentStatus | None = None) -> None:
        """Deliver the head of the session's queue if the session can take it now.

        ``status`` is herdr's live status when the caller has just read it; otherwise it is read
        here. Nothing is typed into a member that herdr does not show at its prompt.
        """
        bridge = self._bridge
        sid = session.session_id
        queue = bridge.roster.queues.get(sid)
        if (
            not queue
            or session.state not in (SessionState.READY, SessionState.DONE)
            or sid in bridge.roster.inflight
            or sid in bridge.roster.gates
            or sid in bridge.roster.delivering
        ):
            return
        ticket = queue[0]
        prompt = ticket.prompt or ""
        bridge.roster.delivering.add(sid)  # one prompt at a time per target: never typed twice
        try:
            if status is None:
                status = (await bridge.control.get_agent(session.name)).agent_status
            if status not in _AT_PROMPT:
                return
            await bridge.control.prompt(session.name, prompt)
        except TargetNotFoundError:
            await bridge.on_target_not_found(session)
            return
        except ControlLinkError as exc:
            if exc.code in _NOT_SENT:
                return  # nothing reached herdr: stays at the head of the queue
            # The request left, the answer did not come back: herdr may have typed the prompt.
            # Typing it again could run the task twice, so the turn opens as delivered.
            _log.warning("session %s: prompt delivery uncertain (%s)", sid, exc.code)
        except HerdrError as exc:
            if exc.code not in _RETRY_LATER:
                _log.warning("session %s: prompt refused: %s", sid, exc.code)
            return  # stays at the head of the queue; retried on a later pass
        finally:
            bridge.roster.delivering.discard(sid)
        if not queue or queue[0] is not ticket or ticket.terminal:
            return  # the send was cancelled while the prompt was in flight
        queue.popleft()
        now = bridge.clock.now()
        session.apply(SessionEvent.DELIVERED, now)
        bridge.tasks.mark_delivered(ticket, turn=session.turn, now=now)
        token = TurnToken(
            token_id=f"turn-{secrets.token_hex(6)}",
            session_id=sid,
            ticket_id=ticket.ticket_id,
            turn=session.turn,
        )
        turn = InFlightTurn(token=token, delivered_at=now)
        bridge.roster.inflight[sid] = turn
        turn.baseline = await self._capture_baseline(session, token)

    async def _capture_baseline(self, session: Session, token: TurnToken) -> DeliveryBaseline:
        bridge = self._bridge
        max_chars = bridge.settings().bridge.max_scrape_chars
        try:
            read = await bridge.control.read(_pane(session), ReadSource.VISIBLE)
        except HerdrError:
            return DeliveryBaseline(
                token_id=token.token_id,
                captured_at=bridge.clock.now(),
                source="visible",
                text="",
                marker_recognised=False,
                capture=BaselineCapture.READ_FAILED,
            )
        extraction = extract_assistant_block(
            parse_agent_kind(session.kind), read.text, max_chars=max_chars
        )
        return DeliveryBaseline(
            token_id=token.token_id,
            captured_at=bridge.clock.now(),
            source="visible",
            text=extraction.text,
            marker_recognised=extraction.marker_recognised,
            capture=(
                BaselineCapture.PRESENT
                if extraction.marker_recognised
                else BaselineCapture.UNRECOGNISED
            ),
        )


def _pane(session: Session) -> str:
    """The pane of a launched member (a session gets its pane before it can have a turn)."""
    if session.pane_id is None:
        raise HerdrError("pane_not_found", "the session has no pane yet")
    return session.pane_id
