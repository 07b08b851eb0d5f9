"""Member replies: stored in the lead's inbox before ``fleet_reply`` answers.

A member's ``fleet_reply`` resolves its open turn. Unless a synchronous ``fleet_send`` waits for
the result in person, the reply is first stored in the owning lead's inbox — on AMQP that means
published persistent and confirmed by the broker — and only then is the turn resolved and the
call answered. A reply that cannot be stored is refused with the retryable ``inbox_unavailable``:
nothing was kept, the ticket stays pending, and the member calls again. Nothing a member sent
therefore lives only in this process's memory.

While a reply is being stored, the completion fallback leaves the turn alone (it would otherwise
resolve the ticket from the pane under the same message id). A caller that goes away meanwhile
does not stop the work half-way: a stored reply always resolves its turn.

A member may do its task and reply before herdr has answered the ``agent.prompt`` that typed it:
such a reply waits for that answer to be carried out, and then answers the turn it opened.

A reply with no open turn answers nothing and is refused (``no_open_task``, hinting at the
member's last ticket) — with one exception: the member's last delivered ticket was resolved by the
completion fallback or by lost-boundary repair, so the member's own words arrive after fleetd read
them from the pane. That one reply is stored for the lead as a *late* reply to that ticket
(``source: late``, its own id); the ticket keeps its pane-derived result. A second reply of one
turn whose ticket id is already taken is stored as a late reply under a fresh id, never folded
into another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from fleetd.bridge.answers import ReplyResult
from fleetd.bridge.completion import TurnCompletion, reply_record
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import ResultSource, TaskBook, Ticket
from fleetd.clock import Clock
from fleetd.errors import (
    ConflictError,
    InboxError,
    InboxRetryError,
    NoOpenTaskError,
)
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.records import ReplySource

__all__ = ["Replies"]

_log = logging.getLogger("fleetd.bridge")

# Results read from the pane: the member's own reply may still arrive after them (kept as late).
_FALLBACKS = frozenset({ResultSource.FALLBACK, ResultSource.RAW_FALLBACK, ResultSource.REPAIRED})


class Replies:
    """The ``fleet_reply`` calls of one bridge."""

    def __init__(
        self,
        *,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        outbox: LeadOutbox,
        completion: TurnCompletion,
        typed: Callable[[str], Awaitable[None]],
    ) -> None:
        self._typed = typed  # waits out a prompt being typed into the member (the Deliverer's)
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._outbox = outbox
        self._completion = completion

    async def reply(self, *, session_id: str, content: str) -> ReplyResult:
        """Store the reply, then resolve the open turn (or keep it as a late reply)."""
        task = asyncio.ensure_future(self._reply(session_id=session_id, content=content))
        task.add_done_callback(_settled)
        return await asyncio.shield(task)

    async def _reply(self, *, session_id: str, content: str) -> ReplyResult:
        if session_id not in self._roster.inflight:
            await self._typed(session_id)  # its turn opens once herdr's answer is carried out
        session = self._roster.get(session_id)
        if session is None or not session.live:
            raise ConflictError("this session is no longer live")
        turn = self._roster.inflight.get(session_id)
        ticket = self._tasks.get(turn.token.ticket_id) if turn is not None else None
        if turn is None or ticket is None or ticket.terminal:
            return await self._after_fallback(session, content)
        stored = not ticket.collected_sync  # a waiting fleet_send takes it from the ticket
        if stored:
            with self._completion.storing_reply(session_id):
                if not await self._store(session, ticket, content, ReplySource.REPLY):
                    # another reply of this turn holds the ticket's id: keep this one apart
                    return await self._late(session, content)
        if await self._completion.complete(
            session, turn.token, content=content, source=ResultSource.REPLY, stored=stored
        ):
            return ReplyResult(accepted=True, ticket=ticket.ticket_id, late=False)
        if stored:  # stored under its ticket; the turn ended while it was being stored
            return ReplyResult(accepted=True, ticket=ticket.ticket_id, late=True)
        return await self._late(session, content)

    async def _late(self, session: Session, content: str) -> ReplyResult:
        """A second reply of one turn: kept apart under a fresh id, never folded or dropped."""
        await self._store(session, None, content, ReplySource.LATE)
        return ReplyResult(accepted=True, ticket=None, late=True)

    async def _after_fallback(self, session: Session, content: str) -> ReplyResult:
        """No turn is open: refused, unless the last turn was read from the pane (kept once)."""
        last = self._tasks.last_delivered(session.session_id)
        if last is None or last.source not in _FALLBACKS or not self._tasks.claim_late_reply(last):
            raise NoOpenTaskError(
                "no task of yours is open: fleet_reply answers the task your lead sent, once",
                hint={
                    "lastTicket": last.ticket_id if last else None,
                    "lastTicketStatus": last.outcome.value if last else None,
                    "lastTicketSource": last.source.value if last and last.source else None,
                },
            )
        try:  # claimed before the await: a concurrent second reply is refused
            await self._store(session, last, content, ReplySource.LATE)
        except InboxRetryError:
            self._tasks.release_late_reply(last)  # not stored: the member may call again
            raise
        sid = session.session_id
        if sid in self._roster.sessions and self._tasks.last_delivered(sid) is last:
            # the late reply is in: the next send need not wait for it (unless another turn was
            # read from the pane meanwhile, whose late reply may still be on its way)
            self._roster.update(sid, fallback_at=None)
        return ReplyResult(accepted=True, ticket=last.ticket_id, late=True)

    async def _store(
        self, session: Session, ticket: Ticket | None, content: str, source: ReplySource
    ) -> bool:
        """Store a reply durably now, or refuse; False when its id was already taken."""
        record = reply_record(
            session, ticket=ticket, content=content, source=source, now=self._clock.now()
        )
        try:
            return await self._outbox.store(record)  # records held earlier go first
        except InboxError as exc:
            _log.warning(
                "reply of %s refused: the inbox of %s cannot store it (%s)",
                session.session_id,
                session.owner,
                type(exc).__name__,
            )
            raise InboxRetryError(
                "the lead's inbox cannot store replies right now; your reply was not stored",
                action="retry fleet_reply with the same content; your reply was not stored",
            ) from exc


def _settled(task: asyncio.Future[ReplyResult]) -> None:
    """Collect the outcome of a reply whose caller left, so it is not reported as lost."""
    if not task.cancelled():
        task.exception()
