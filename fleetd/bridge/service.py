"""The bridge: leads delegate, members reply.

:class:`Bridge` owns the roster, the tickets and the turn machinery, and is what the fleet tools
call. It talks to herdr through the :class:`~fleetd.herdr.control.AgentControl` port, hands
records to leads and drains their inboxes through the :class:`~fleetd.inbox.outbox.LeadOutbox`,
and provisions worktrees through the :class:`~fleetd.bridge.worktrees.Worktrees` port. Every
terminal cause for a target — stop, gone, never-ready, release — goes through
:meth:`Bridge.fail_target_work`, the one idempotent target-wide failure operation.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleetd.bridge.delivery import Deliverer
from fleetd.bridge.orphans import OrphanBook
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.replies import Replies, reply_record
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import ResultSource, TaskBook, Ticket
from fleetd.bridge.teardown import Teardown
from fleetd.bridge.turns import TurnToken
from fleetd.bridge.worktrees import Worktrees
from fleetd.clock import Clock, wait_event
from fleetd.config import FleetdConfig
from fleetd.errors import (
    ConflictError,
    HerdrError,
    InvalidArgumentsError,
    UnknownTargetError,
)
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import InboxRecord, ReplySource
from fleetd.inbox.registry import LeadInboxRegistry
from fleetd.metrics import Metrics
from fleetd.runs import Runs

__all__ = ["Bridge", "MuteEvent"]

_log = logging.getLogger("fleetd.bridge")

_MUTES_KEPT = 1000


_REPLY_SOURCES = {
    ResultSource.REPLY: ReplySource.REPLY,
    ResultSource.FALLBACK: ReplySource.FALLBACK,
    ResultSource.RAW_FALLBACK: ReplySource.FALLBACK,
    ResultSource.REPAIRED: ReplySource.REPAIRED,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class MuteEvent:
    """One turn resolved through the completion fallback (for the health monitor)."""

    session_id: str
    profile: str
    at: datetime


class Bridge:
    """The message bus between leads and members."""

    def __init__(
        self,
        *,
        clock: Clock,
        control: AgentControl,
        inbox: ReplyInbox,
        worktrees: Worktrees,
        metrics: Metrics,
        settings: Callable[[], FleetdConfig],
        manifest_root: Path,
        lead_inboxes: LeadInboxRegistry,
        revoke: Callable[[str], None] = lambda _session_id: None,
        runs: Runs | None = None,
    ) -> None:
        self.clock = clock
        self.control = control
        self.inbox = inbox
        self.worktrees = worktrees
        self.metrics = metrics
        self.settings = settings
        self.manifest_root = manifest_root
        self.lead_inboxes = lead_inboxes
        self.revoke = revoke
        self.runs = runs or Runs()
        self.roster = Roster()
        self.tasks = TaskBook(on_terminal=self._count_terminal, run=self.runs.current)
        self.mutes: list[MuteEvent] = []
        self.outbox = LeadOutbox(lead_inboxes, inbox)
        self.stopping = asyncio.Event()  # set when fleetd is asked to stop: waiters let go
        self.mutes_total = 0
        self.teardown_failures: list[str] = []
        self.deliverer = Deliverer(self)
        self.replies = Replies(self)
        self.teardown = Teardown(self)
        self.orphans = OrphanBook(self)

    # ------------------------------------------------------------------ sends
    async def send(self, *, owner: str, target: str, prompt: str, wait: float | None) -> Ticket:
        """Accept a send; with ``wait`` > 0 wait that long for the result."""
        limit = self.settings().api.max_prompt_chars
        if not prompt.strip():
            raise InvalidArgumentsError("prompt is only whitespace", path="prompt", rule="blank")
        if len(prompt) > limit:
            raise InvalidArgumentsError(
                f"prompt is longer than api.maxPromptChars ({limit} characters)",
                path="prompt",
                rule="string_too_long",
            )
        session = self.find_owned(owner, target)
        if session.session_id in self.roster.gates:
            raise ConflictError(f"session {session.session_id} is being released")
        ticket = self.tasks.accept(
            target=session.session_id,
            owner=owner,
            prompt=prompt,
            now=self.clock.now(),
            nonce=secrets.token_hex(3),
        )
        self.roster.queues[session.session_id].append(ticket)
        if session.state in (SessionState.READY, SessionState.DONE):
            await self.deliverer.inject_next(session)
        if wait and wait > 0:
            await self.wait_for(ticket, wait)
        return ticket

    async def wait_for(self, ticket: Ticket, seconds: float) -> None:
        """Hold a synchronous caller until the ticket ends, ``seconds`` pass, or fleetd is asked
        to stop (the caller then gets the ticket as it stands, so a stop never waits on it)."""
        ticket.collected_sync = True
        try:
            await wait_event(self.clock, ticket.done_event, seconds, unless=self.stopping)
        finally:
            if not ticket.terminal:
                ticket.collected_sync = False

    # ---------------------------------------------------------------- replies
    async def reply(self, *, session_id: str, content: str) -> dict[str, object]:
        """A member's ``fleet_reply``: stored first, then resolves its open turn (see
        :mod:`~fleetd.bridge.replies`)."""
        return await self.replies.reply(session_id=session_id, content=content)

    async def complete_turn(
        self,
        session: Session,
        token: TurnToken,
        *,
        content: str,
        source: ResultSource,
        stored: bool = False,
    ) -> bool:
        """The completion guard core: resolve the exact open turn at most once.

        ``stored`` says the reply is already in the lead's inbox; otherwise a result no
        synchronous caller collects is handed to the inbox (held in memory while it is down).
        """
        turn = self.roster.inflight.get(session.session_id)
        if turn is None or turn.token.token_id != token.token_id:
            return False
        if self.replies.storing(session.session_id):
            return False  # the member's own reply is being stored: it wins or fails first
        now = self.clock.now()
        if not self.tasks.resolve(token.ticket_id, content=content, source=source, now=now):
            return False
        del self.roster.inflight[session.session_id]
        event = (
            SessionEvent.TURN_RECONCILED
            if source is ResultSource.REPAIRED
            else SessionEvent.TURN_COMPLETED
        )
        session.apply(event, now)
        ticket = self.tasks.get(token.ticket_id)
        if ticket is not None and not ticket.collected_sync and not stored:
            await self.keep_for_lead(
                reply_record(
                    session,
                    ticket=ticket,
                    content=content,
                    source=_REPLY_SOURCES[source],
                    now=now,
                )
            )
        # The next queued send waits for the poller to see the member at its prompt: a member
        # that has just called fleet_reply is usually still finishing its turn.
        return True

    async def keep_for_lead(self, record: InboxRecord) -> None:
        """Hand a reply or health record to its lead's inbox, held until it is taken."""
        await self.outbox.keep(record)

    async def flush_unpublished(self) -> None:
        """Publish held records oldest first; keep what still fails."""
        await self.outbox.flush()

    @property
    def unpublished(self) -> list[InboxRecord]:
        """The records waiting in memory for the inbox, oldest first."""
        return self.outbox.held

    @property
    def held_dropped(self) -> int:
        """How many held records gave way to the bound."""
        return self.outbox.gave_way

    async def drain_inbox(self, key: str) -> list[InboxRecord]:
        """Collect a lead's inbox for ``fleet_poll``; a cancelled poll loses nothing."""
        return await self.outbox.drain(key)

    # ------------------------------------------------------------ presence
    def presence(self, session_id: str) -> None:
        """The member's first authenticated contact makes it READY."""
        session = self.roster.get(session_id)
        if session is None or not session.live or session.state is SessionState.FAILED:
            return
        session.apply(SessionEvent.PRESENCE, self.clock.now())

    # --------------------------------------------------------------- lookups
    def find_owned(self, owner: str, target: str, *, released: bool = False) -> Session:
        """A live session the caller owns, or an error listing the valid targets. With
        ``released``, a session id of the caller's among the recently released (kept bounded) is
        found too, so the lead can read how it ended."""
        session = self.roster.find(target)
        if session is None and released:
            kept = self.roster.get(target)
            session = kept if kept is not None and not kept.live else None
        if session is None or session.owner != owner:
            valid = sorted(s.session_id for s in self.roster.live() if s.owner == owner)
            raise UnknownTargetError(
                f"no live member {target!r} for this lead", hint={"liveMembers": valid}
            )
        return session

    def name_taken(self, name: str) -> bool:
        """True while a live member or an orphan of a previous run has the agent name."""
        return self.roster.name_taken(name) or self.orphans.name_taken(name)

    # -------------------------------------------------------------- teardown
    def fail_target_work(self, session: Session, *, reason: str) -> list[Ticket]:
        """Fail every queued, accepted and async task of a target exactly once (idempotent)."""
        sid = session.session_id
        self.roster.gates.add(sid)
        queue = self.roster.queues.get(sid)
        if queue is not None:
            queue.clear()
        self.roster.inflight.pop(sid, None)
        return self.tasks.fail_target(sid, reason=reason, now=self.clock.now())

    def releasing(self, session_id: str) -> bool:
        """True while a release of this session is under way."""
        return self.teardown.releasing(session_id)

    async def release(
        self, session: Session, cause: ReleaseCause, *, code: str | None = None
    ) -> dict[str, object]:
        """Stop a member and settle its work and worktree (see :class:`Teardown`)."""
        return await self.teardown.release(session, cause, code=code)

    async def release_all(self, cause: ReleaseCause) -> None:
        """Release every live member with ``cause`` (a clean stop: SHUTDOWN), all at once."""
        live = self.roster.live()
        outcomes = await asyncio.gather(
            *(self.release(session, cause) for session in live), return_exceptions=True
        )
        for session, outcome in zip(live, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                _log.warning("session %s: release failed: %s", session.session_id, outcome)
        if live:
            _log.info("released %d members (%s)", len(live), cause.value)

    async def on_target_not_found(self, session: Session, code: str | None = None) -> None:
        """herdr says the target is gone; confirm the link works, then fail its work once.

        ``code`` is herdr's ``*_not_found`` code; the release records it for health.
        """
        try:
            await self.control.ping()
        except HerdrError:
            return  # the link itself is in doubt: not proof of a dead member
        if session.live and not self.releasing(session.session_id):
            session.apply(SessionEvent.TARGET_GONE, self.clock.now())
            await self.release(session, ReleaseCause.GONE, code=code)

    async def on_start_progress(self, session: Session, info: AgentInfo) -> None:
        """Watch a starting member; herdr giving up on the launch ends the spawn.

        With nothing sent yet the spawn rolls back (its worktree goes); with a send waiting the
        member never became ready and its worktree is preserved.
        """
        if session.terminal_id is None:
            session.terminal_id = info.terminal_id
        if (
            info.launch_pending
            or info.interactive_ready
            or session.presence
            or self.releasing(session.session_id)
        ):
            return
        if self.roster.queues.get(session.session_id):
            session.apply(SessionEvent.NEVER_READY, self.clock.now())
            await self.release(session, ReleaseCause.NEVER_READY, code="launch_failed")
        else:
            _log.warning(
                "session %s (%s): herdr gave up on its launch before anything was sent; "
                "the spawn is rolled back (fleet_status shows releasedCause spawn_rollback)",
                session.session_id,
                session.name,
            )
            session.apply(SessionEvent.START_FAILED, self.clock.now())
            await self.release(session, ReleaseCause.SPAWN_ROLLBACK)

    async def check_readiness(self) -> None:
        """A starting member with a waiting send and no presence past the grace never became ready.

        Its queued sends fail, its process stops, and a provisioned worktree is preserved. A member
        with nothing waiting is left starting: readiness expiry alone is not a reason to stop it.
        """
        grace = self.settings().bridge.readiness_grace
        now = self.clock.now()
        for session in self.roster.live():
            if (
                session.state is SessionState.SPAWNING
                and self.roster.queues.get(session.session_id)
                and now - session.created_at >= grace
                and not self.releasing(session.session_id)
            ):
                session.apply(SessionEvent.NEVER_READY, now)
                await self.release(session, ReleaseCause.NEVER_READY)

    def note_mute(self, session: Session) -> None:
        """Keep the last fallback resolutions; ``mutes_total`` counts every one ever noted."""
        self.mutes.append(
            MuteEvent(session_id=session.session_id, profile=session.profile, at=self.clock.now())
        )
        self.mutes_total += 1
        del self.mutes[:-_MUTES_KEPT]

    def _count_terminal(self, ticket: Ticket) -> None:
        self.metrics.tickets_total.labels(
            outcome=ticket.outcome.value,
            source=ticket.source.value if ticket.source else "none",
        ).inc()
