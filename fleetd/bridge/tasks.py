"""Tickets: one per accepted send, with exactly one terminal outcome.

A ticket is created when ``fleet_send`` accepts a send. It ends exactly once — ``done`` (with the
reply, and where it came from), ``failed`` (with a reason code) or ``cancelled`` — and each end is
counted once. :meth:`TaskBook.fail_target` is the one idempotent target-wide failure operation:
stop, gone, never-ready and release all call it, and calling it twice fails nothing twice.

The prompt is held only until delivery, then dropped: no path can replay a delivered task.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from fleetd.runs import new_run_id, ticket_id

__all__ = ["ResultSource", "TaskBook", "Ticket", "TicketOutcome"]


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
    delivered_at: datetime | None = None
    resolved_at: datetime | None = None
    turn: int | None = None
    collected_sync: bool = False
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
        if self.terminal:
            view["resolvedAt"] = self.resolved_at.isoformat() if self.resolved_at else None
        if self.source is not None:
            view["source"] = self.source.value
        if self.content is not None:
            view["content"] = self.content
        if self.reason is not None:
            view["reason"] = self.reason
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

    def all(self) -> list[Ticket]:
        return list(self._tickets.values())

    def mark_delivered(self, ticket: Ticket, *, turn: int, now: datetime) -> None:
        ticket.delivered_at = now
        ticket.turn = turn
        ticket.prompt = None

    def resolve(self, ticket_id: str, *, content: str, source: ResultSource, now: datetime) -> bool:
        """Finish a ticket as done; False when it was already terminal."""
        return self._finish(
            ticket_id, TicketOutcome.DONE, now=now, content=content, source=source, reason=None
        )

    def fail(self, ticket_id: str, *, reason: str, now: datetime) -> bool:
        return self._finish(ticket_id, TicketOutcome.FAILED, now=now, reason=reason)

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
    ) -> bool:
        ticket = self._tickets.get(ticket_id)
        if ticket is None or ticket.terminal:
            return False
        ticket.outcome = outcome
        ticket.content = content
        ticket.source = source
        ticket.reason = reason
        ticket.resolved_at = now
        ticket.prompt = None
        ticket.done_event.set()
        self.on_terminal(ticket)
        return True
