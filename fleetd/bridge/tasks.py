"""Tickets: one per accepted send, with exactly one terminal outcome.

A ticket is created when ``fleet_send`` accepts a send. It ends exactly once — ``done`` (with the
reply, and where it came from), ``failed`` (with a reason code) or ``cancelled`` — and each end is
counted once. :meth:`TaskBook.fail_target` is the one idempotent target-wide failure operation:
stop, gone, never-ready and release all call it, and calling it twice fails nothing twice.

The prompt is held only until delivery, then dropped: no path can replay a delivered task. A
delivered ticket says how sure the delivery is (:class:`Delivery`): ``uncertain`` when herdr's
answer could have come after the prompt was typed. A prompt herdr refused before typing it is kept
with a count of refusals and the earliest time to try again; past the budget the ticket fails,
with a hint.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from fleetd.runs import new_run_id, ticket_id

__all__ = ["Delivery", "ResultSource", "TaskBook", "Ticket", "TicketOutcome"]


class TicketOutcome(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ResultSource(StrEnum):
    """Where a ``done`` result came from; the lead sees it on the ticket."""

    REPLY = "reply"  # the member called fleet_reply during the turn
    FALLBACK = "fallback"  # observed boundary, text read from the pane (the MUTE outcome)
    RAW_FALLBACK = "raw_fallback"  # as above, but no assistant marker was recognised
    REPAIRED = "repaired"  # lost boundary reconciled under strict gates


class Delivery(StrEnum):
    """How sure fleetd is that a delivered prompt reached the member; the lead sees it."""

    CONFIRMED = "confirmed"  # herdr answered ok: the bytes reached the PTY
    UNCERTAIN = "uncertain"  # herdr's answer may have come after typing: never typed again


@dataclass(slots=True, kw_only=True)
class Ticket:
    """One accepted send and its single outcome."""

    ticket_id: str
    target: str  # session id of the member
    owner: str  # the lead that sent it
    accepted_at: datetime
    prompt: str | None  # dropped once delivered
    outcome: TicketOutcome = TicketOutcome.PENDING
    source: ResultSource | None = None
    content: str | None = None
    reason: str | None = None
    hint: str | None = None
    delivery: Delivery | None = None
    refusals: int = 0  # prompts herdr refused before typing anything
    retry_at: datetime | None = None  # no new attempt before this
    delivered_at: datetime | None = None
    resolved_at: datetime | None = None
    turn: int | None = None
    collected_sync: bool = False
    late_reply: bool = False  # a fleet_reply after the fallback resolved it was kept (once)
    done_event: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def terminal(self) -> bool:
        return self.outcome is not TicketOutcome.PENDING

    def public(self) -> dict[str, object]:
        """The ticket as a tool result (the prompt never leaves)."""
        view: dict[str, object] = {
            "ticket": self.ticket_id,
            "target": self.target,
            "status": self.outcome.value,
            "acceptedAt": self.accepted_at.isoformat(),
        }
        if self.delivered_at is not None:
            view["deliveredAt"] = self.delivered_at.isoformat()
        if self.delivery is not None:
            view["delivery"] = self.delivery.value
        if self.refusals:
            view["promptRefusals"] = self.refusals
        if self.terminal:
            view["resolvedAt"] = self.resolved_at.isoformat() if self.resolved_at else None
        if self.source is not None:
            view["source"] = self.source.value
        if self.content is not None:
            view["content"] = self.content
        if self.reason is not None:
            view["reason"] = self.reason
        if self.hint is not None:
            view["hint"] = self.hint
        return view


OnTerminal = Callable[[Ticket], None]


@dataclass(slots=True)
class TaskBook:
    """All tickets of this process. Terminal outcomes happen here and only here.

    Ticket ids end in ``run``, the id of this run of fleetd (see :mod:`fleetd.runs`).
    """

    on_terminal: OnTerminal = lambda _ticket: None
    _tickets: dict[str, Ticket] = field(default_factory=dict)
    run: str = field(default_factory=new_run_id)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def accept(self, *, target: str, owner: str, prompt: str, now: datetime, nonce: str) -> Ticket:
        ticket = Ticket(
            ticket_id=ticket_id(self.run, next(self._ids), nonce),
            target=target,
            owner=owner,
            accepted_at=now,
            prompt=prompt,
        )
        self._tickets[ticket.ticket_id] = ticket
        return ticket

    def get(self, ticket_id: str) -> Ticket | None:
        return self._tickets.get(ticket_id)

    def pending_for(self, target: str) -> list[Ticket]:
        return [t for t in self._tickets.values() if t.target == target and not t.terminal]

    def last_delivered(self, target: str) -> Ticket | None:
        """The ticket most recently typed into ``target``, if any."""
        delivered = [t for t in self._tickets.values() if t.target == target and t.turn is not None]
        return max(delivered, key=lambda t: t.turn or 0, default=None)

    def all(self) -> list[Ticket]:
        return list(self._tickets.values())

    def mark_delivered(
        self,
        ticket: Ticket,
        *,
        turn: int,
        now: datetime,
        delivery: Delivery = Delivery.CONFIRMED,
    ) -> None:
        ticket.delivered_at = now
        ticket.turn = turn
        ticket.delivery = delivery
        ticket.retry_at = None
        ticket.prompt = None

    def resolve(self, ticket_id: str, *, content: str, source: ResultSource, now: datetime) -> bool:
        """Finish a ticket as done; False when it was already terminal."""
        return self._finish(
            ticket_id, TicketOutcome.DONE, now=now, content=content, source=source, reason=None
        )

    def fail(self, ticket_id: str, *, reason: str, now: datetime, hint: str | None = None) -> bool:
        return self._finish(ticket_id, TicketOutcome.FAILED, now=now, reason=reason, hint=hint)

    def cancel(self, ticket_id: str, *, reason: str, now: datetime) -> bool:
        return self._finish(ticket_id, TicketOutcome.CANCELLED, now=now, reason=reason)

    def fail_target(self, target: str, *, reason: str, now: datetime) -> list[Ticket]:
        """Fail every pending ticket of ``target`` once; terminal tickets stay as they are."""
        failed = []
        for ticket in self.pending_for(target):
            if self.fail(ticket.ticket_id, reason=reason, now=now):
                failed.append(ticket)
        return failed

    def _finish(
        self,
        ticket_id: str,
        outcome: TicketOutcome,
        *,
        now: datetime,
        content: str | None = None,
        source: ResultSource | None = None,
        reason: str | None,
        hint: str | None = None,
    ) -> bool:
        ticket = self._tickets.get(ticket_id)
        if ticket is None or ticket.terminal:
            return False
        ticket.outcome = outcome
        ticket.content = content
        ticket.source = source
        ticket.reason = reason
        ticket.hint = hint
        ticket.retry_at = None
        ticket.resolved_at = now
        ticket.prompt = None
        ticket.done_event.set()
        self.on_terminal(ticket)
        return True
