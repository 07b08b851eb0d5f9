"""The end of a turn: the completion guard core and the reply-storing window.

:meth:`TurnCompletion.complete` resolves the exact open turn at most once, whichever path found
its end — the member's ``fleet_reply`` (:mod:`~fleetd.bridge.replies`) or the completion fallback
(:mod:`~fleetd.bridge.delivery`). While a member's own reply is being stored, no other path may end
its turn: the reply wins or fails first.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent
from fleetd.bridge.tasks import ResultSource, TaskBook, Ticket
from fleetd.bridge.turn_machine import TurnResolved
from fleetd.bridge.turns import TurnToken
from fleetd.clock import Clock
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.records import InboxRecord, MessageKind, ReplySource, Severity

__all__ = ["TurnCompletion", "reply_record"]

_REPLY_SOURCES = {
    ResultSource.REPLY: ReplySource.REPLY,
    ResultSource.FALLBACK: ReplySource.FALLBACK,
    ResultSource.RAW_FALLBACK: ReplySource.FALLBACK,
    ResultSource.REPAIRED: ReplySource.REPAIRED,
}


class TurnCompletion:
    """Resolves open turns exactly once and hands uncollected results to the lead's inbox."""

    def __init__(self, *, roster: Roster, tasks: TaskBook, clock: Clock, outbox: LeadOutbox):
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._outbox = outbox
        self._storing: set[str] = set()  # sessions whose reply is being stored (bounded: live)

    def storing(self, session_id: str) -> bool:
        """True while the member's own reply is being stored: it wins or fails first."""
        return session_id in self._storing

    @contextmanager
    def storing_reply(self, session_id: str) -> Iterator[None]:
        """Hold the session's turn for the reply being stored."""
        self._storing.add(session_id)
        try:
            yield
        finally:
            self._storing.discard(session_id)

    async def complete(
        self,
        session: Session,
        token: TurnToken,
        *,
        content: str,
        source: ResultSource,
        stored: bool = False,
    ) -> bool:
        """Resolve the exact open turn at most once.

        ``stored`` says the reply is already in the lead's inbox; otherwise a result no
        synchronous caller collects is handed to the inbox (held in memory while it is down).
        """
        turn = self._roster.inflight.get(session.session_id)
        if turn is None or turn.token.token_id != token.token_id:
            return False
        if session.session_id in self._storing:
            return False  # the member's own reply is being stored: it wins or fails first
        now = self._clock.now()
        if not self._tasks.resolve(token.ticket_id, content=content, source=source, now=now):
            return False
        self._roster.inflight.step(token, TurnResolved(source.value), now)
        sid = session.session_id
        if source is ResultSource.REPAIRED:
            # health resolves its incident as repaired
            self._roster.update(sid, repaired_token=token.token_id)
            session = self._roster.apply(sid, SessionEvent.TURN_RECONCILED, now)
        else:
            session = self._roster.apply(sid, SessionEvent.TURN_COMPLETED, now)
        ticket = self._tasks.get(token.ticket_id)
        if ticket is not None and not ticket.collected_sync and not stored:
            await self._outbox.keep(
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


def reply_record(
    session: Session, *, ticket: Ticket | None, content: str, source: ReplySource, now: datetime
) -> InboxRecord:
    """The inbox record of a reply (a ticket's reply is named after its ticket; a late reply to a
    ticket gets an id of its own, so it never collides with the ticket's fallback record)."""
    prefix = "late" if source is ReplySource.LATE else "reply"
    return InboxRecord(
        kind=MessageKind.REPLY,
        msg_id=f"{prefix}-{ticket.ticket_id if ticket else secrets.token_hex(8)}",
        target=session.name,
        recipient_lead=session.owner,
        created_at_epoch_millis=int(now.timestamp() * 1000),
        content=content,
        ticket=ticket.ticket_id if ticket else None,
        source=source,
    )


#: The ``state`` of the notice a lead gets when a task of its failed before anything was typed.
DELIVERY_REFUSED = "DELIVERY_REFUSED"


def refusal_record(session: Session, ticket: Ticket, *, code: str, now: datetime) -> InboxRecord:
    """The notice telling the owning lead that ``ticket`` failed with nothing typed: herdr refused
    its prompt past the retry budget (``code`` the last refusal). A health-kind record, never a
    reply: it carries no result, and says what the lead may do."""
    now_ms = int(now.timestamp() * 1000)
    accepted_ms = min(int(ticket.accepted_at.timestamp() * 1000), now_ms)
    return InboxRecord(
        kind=MessageKind.HEALTH,
        msg_id=f"refused-{ticket.ticket_id}",
        target=session.name,
        recipient_lead=session.owner,
        created_at_epoch_millis=now_ms,
        content=(
            f"herdr refused the prompt of ticket {ticket.ticket_id} for {session.name} "
            f"{ticket.refusals} times ({code}) before typing it: nothing was typed and the ticket "
            "failed. Send the task again once the member can take it."
        ),
        ticket=ticket.ticket_id,
        subject_terminal=session.session_id,
        severity=Severity.WARNING,
        state=DELIVERY_REFUSED,
        evidence={"code": code, "refusals": ticket.refusals},
        first_seen_epoch_millis=accepted_ms,
        last_seen_epoch_millis=now_ms,
        recovery_tried=True,
        suggested_tool_calls=(
            f'fleet_status(sessionId="{session.session_id}")',
            f'fleet_poll(ticket="{ticket.ticket_id}")',
        ),
    )
