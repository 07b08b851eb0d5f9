"""Tickets: one per accepted send, with exactly one terminal outcome.

A ticket is created when ``fleet_send`` accepts a send. It ends exactly once — ``done`` (with the
reply, and where it came from), ``failed`` (with a reason code) or ``cancelled`` — and each end is
counted once. :meth:`TaskBook.fail_target` is the one idempotent target-wide failure operation:
stop, gone, never-ready and release all call it, and calling it twice fails nothing twice.

Tickets are indexed by target, so a member's pending work is found without scanning the history.
An ended ticket is kept for ``bridge.ticketRetentionSeconds`` and among the last
``bridge.ticketsKept`` (both floored, so a lead's ``fleet_poll(ticket)`` works for at least ten
minutes); after that :meth:`TaskBook.expired` tells an id this run issued and forgot from one it
never issued, and the lead gets ``ticket_expired``.

The prompt is held only until delivery, then dropped: no path can replay a delivered task. A
delivered ticket says how sure the delivery is (:class:`Delivery`): ``uncertain`` when herdr's
answer could have come after the prompt was typed. A prompt herdr refused before typing it is kept
with a count of refusals and the earliest time to try again; past the budget the ticket fails,
with a hint. What may happen to a ticket, and when, is the table of
:mod:`~fleetd.bridge.ticket_machine`; this book carries it out.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from fleetd.bridge.ticket_machine import TicketEvent, TicketPhase, ticket_step
from fleetd.runs import new_run_id, run_of_ticket, ticket_id, ticket_number

__all__ = ["Delivery", "ResultSource", "Retention", "TaskBook", "Ticket", "TicketOutcome"]


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
    counted: int = 0  # terminal outcomes the metric counted (the teardown invariant reads it)
    seq: int = 0  # order of acceptance across restarts (the state store's queue order)
    stored: bool = False  # the state store holds it
    _done: asyncio.Event | None = field(default=None, repr=False)  # made for a waiter only

    @property
    def terminal(self) -> bool:
        return self.outcome is not TicketOutcome.PENDING

    @property
    def phase(self) -> TicketPhase:
        """Where the ticket stands in :data:`~fleetd.bridge.ticket_machine.TRANSITIONS` (typed
        once it has a delivery time or a delivery: either says its prompt may have been typed)."""
        if self.outcome is not TicketOutcome.PENDING:
            return TicketPhase(self.outcome.value)
        if self.delivered_at is None and self.delivery is None:
            return TicketPhase.QUEUED
        return TicketPhase.DELIVERED

    @property
    def done_event(self) -> asyncio.Event:
        """Set once the ticket has ended. Made when a synchronous caller first waits: the ten
        thousand tickets a book keeps carry none."""
        if self._done is None:
            self._done = asyncio.Event()
            if self.terminal:
                self._done.set()
        return self._done

    @property
    def waited_on(self) -> bool:
        """True while a synchronous caller waits for this ticket to end."""
        return self._done is not None and not self._done.is_set()


OnTerminal = Callable[[Ticket], None]


@dataclass(frozen=True, slots=True)
class Retention:
    """How long and how many ended tickets are kept (``bridge.ticketRetentionSeconds`` and
    ``bridge.ticketsKept``)."""

    keep_for: timedelta = timedelta(hours=1)
    keep_count: int = 10_000


@dataclass(slots=True)
class TaskBook:
    """The tickets of this process. Terminal outcomes happen here and only here.

    Ticket ids end in ``run``, the id of this run of fleetd (see :mod:`fleetd.runs`). Pending
    tickets are indexed by target; ended ones are kept in the order they ended, bounded by
    ``retention`` (read at each end, so a reload applies at once). ``on_change`` hears of every
    ticket accepted, delivered or ended.
    """

    on_terminal: OnTerminal = lambda _ticket: None
    on_change: Callable[[], None] = lambda: None
    #: told the target of every ticket accepted, delivered or ended (its member's view and row
    #: read them)
    on_target: Callable[[str], None] = lambda _target: None
    #: told each ended ticket past the retention (an open turn may still name it)
    on_pruned: Callable[[Ticket], None] = lambda _ticket: None
    run: str = field(default_factory=new_run_id)
    retention: Callable[[], Retention] = Retention
    #: told of every ticket delivered or ended (the state store records it before its effects)
    on_write: Callable[[Ticket], None] = lambda _ticket: None
    #: told the ids of ended tickets past the retention (the state store forgets them)
    on_forget: Callable[[list[str]], None] = lambda _ids: None
    seq_base: int = 0  # the highest sequence number a previous run stored
    _pending: dict[str, dict[str, Ticket]] = field(default_factory=dict)  # target -> id -> ticket
    _by_id: dict[str, Ticket] = field(default_factory=dict)  # pending and kept ended tickets
    _ended: OrderedDict[str, Ticket] = field(default_factory=OrderedDict)
    _last_delivered: dict[str, Ticket] = field(default_factory=dict)  # target -> ticket
    _issued: int = 0

    def accept(self, *, target: str, owner: str, prompt: str, now: datetime, nonce: str) -> Ticket:
        self._issued += 1
        ticket = Ticket(
            ticket_id=ticket_id(self.run, self._issued, nonce),
            target=target,
            owner=owner,
            accepted_at=now,
            prompt=prompt,
            seq=self.seq_base + self._issued,
        )
        self._by_id[ticket.ticket_id] = ticket
        self._pending.setdefault(target, {})[ticket.ticket_id] = ticket
        self.on_target(target)
        self._prune(now)
        self.on_change()
        return ticket

    def restore(self, ticket: Ticket) -> None:
        """Hold a ticket a previous run stored (pending or ended), as it was."""
        self._by_id[ticket.ticket_id] = ticket
        self.seq_base = max(self.seq_base, ticket.seq)
        if ticket.terminal:
            self._ended[ticket.ticket_id] = ticket
        else:
            self._pending.setdefault(ticket.target, {})[ticket.ticket_id] = ticket
        if ticket.delivered_at is not None:
            self._last_delivered[ticket.target] = ticket
        self.on_target(ticket.target)

    def get(self, ticket_id: str) -> Ticket | None:
        return self._by_id.get(ticket_id)

    def expired(self, ticket_id: str) -> bool:
        """True for an id this run issued whose ended ticket is no longer kept."""
        number = ticket_number(ticket_id)
        return (
            ticket_id not in self._by_id
            and run_of_ticket(ticket_id) == self.run
            and number is not None
            and 0 < number <= self._issued
        )

    def pending_for(self, target: str) -> list[Ticket]:
        return list(self._pending.get(target, {}).values())

    def pending_count(self, target: str) -> int:
        """How many tickets of ``target`` have not ended (no list built: the tick reads it for
        every member)."""
        return len(self._pending.get(target, ()))

    def last_delivered(self, target: str) -> Ticket | None:
        """The ticket most recently typed into ``target``, if any."""
        return self._last_delivered.get(target)

    def forget_target(self, target: str) -> None:
        """A released target's index entries go; its ended tickets age out like any other."""
        self._last_delivered.pop(target, None)
        if not self._pending.get(target):
            self._pending.pop(target, None)

    def all(self) -> list[Ticket]:
        """Pending and kept ended tickets."""
        return list(self._by_id.values())

    @property
    def kept(self) -> int:
        """How many tickets are held: pending plus kept ended ones."""
        return len(self._by_id)

    def mark_delivered(
        self,
        ticket: Ticket,
        *,
        turn: int,
        now: datetime,
        delivery: Delivery = Delivery.CONFIRMED,
    ) -> None:
        """herdr typed the ticket's prompt, or may have (``delivery``): it is never typed again.
        :class:`~fleetd.errors.IllegalTransitionError` for a ticket typed or ended before."""
        ticket_step(ticket.phase, TicketEvent.TYPED)
        ticket.delivered_at = now
        ticket.turn = turn
        ticket.delivery = delivery
        ticket.retry_at = None
        ticket.prompt = None
        self._last_delivered[ticket.target] = ticket
        self.on_write(ticket)
        self.on_target(ticket.target)  # its member's row shows the delivery
        self.on_change()

    def refused(self, ticket: Ticket, *, retry_at: datetime | None) -> None:
        """herdr typed nothing of the ticket's prompt: it waits for ``retry_at`` in its queue
        (``None``: the retry budget is spent, and the caller fails it). Counted either way.
        :class:`~fleetd.errors.IllegalTransitionError` for a ticket typed or ended before."""
        ticket_step(ticket.phase, TicketEvent.REFUSED)
        ticket.refusals += 1
        ticket.retry_at = retry_at

    def stored(self, ticket: Ticket) -> None:
        """The state store holds the ticket (accepted, or about to be typed)."""
        ticket.stored = True

    def counted_end(self, ticket: Ticket) -> None:
        """The tickets metric counted the ticket's end (the teardown invariant checks that each
        ended ticket was counted once)."""
        ticket.counted += 1

    def held_for_caller(self, ticket: Ticket, held: bool) -> None:
        """A synchronous ``fleet_send`` waits for the ticket (``held``), and takes its result
        from the ticket rather than from the lead's inbox; or stops waiting before it ended."""
        if held or not ticket.terminal:
            ticket.collected_sync = held

    def claim_late_reply(self, ticket: Ticket) -> bool:
        """Claim the one late reply a ticket read from the pane may keep; False when it has
        one (or a claim is under way). Claimed before the reply is stored, so a concurrent second
        reply is refused."""
        if ticket.late_reply:
            return False
        ticket.late_reply = True
        return True

    def release_late_reply(self, ticket: Ticket) -> None:
        """The claimed late reply could not be stored: the member may call again."""
        ticket.late_reply = False

    def resolve(self, ticket_id: str, *, content: str, source: ResultSource, now: datetime) -> bool:
        """Finish a ticket as done; False when it was already terminal."""
        return self._finish(
            ticket_id, TicketEvent.RESOLVED, now=now, content=content, source=source, reason=None
        )

    def fail(self, ticket_id: str, *, reason: str, now: datetime, hint: str | None = None) -> bool:
        """Finish a ticket as failed; False when it was already terminal."""
        return self._finish(ticket_id, TicketEvent.FAILED, now=now, reason=reason, hint=hint)

    def cancel(self, ticket_id: str, *, reason: str, now: datetime) -> bool:
        """Finish a ticket as cancelled; False when it was already terminal."""
        return self._finish(ticket_id, TicketEvent.CANCELLED, now=now, reason=reason)

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
        event: TicketEvent,
        *,
        now: datetime,
        content: str | None = None,
        source: ResultSource | None = None,
        reason: str | None,
        hint: str | None = None,
    ) -> bool:
        ticket = self._by_id.get(ticket_id)
        if ticket is None:
            return False
        phase = ticket.phase
        after = ticket_step(phase, event)
        if after is phase:  # already ended: its one outcome stays
            return False
        pending = self._pending.get(ticket.target)
        if pending is not None:
            pending.pop(ticket_id, None)
            if not pending:
                del self._pending[ticket.target]
        self._ended[ticket_id] = ticket
        ticket.outcome = TicketOutcome(after.value)
        ticket.content = content
        ticket.source = source
        ticket.reason = reason
        ticket.hint = hint
        ticket.retry_at = None
        ticket.resolved_at = now
        ticket.prompt = None
        self.on_write(ticket)  # stored before a waiter or the lead's inbox hears of it
        if ticket._done is not None:
            ticket._done.set()
        self.on_target(ticket.target)
        self.on_terminal(ticket)
        self._prune(now)
        self.on_change()
        return True

    def prune(self, now: datetime) -> None:
        """Forget the ended tickets past the count or the age now (a start does it once: what a
        previous run stored under another retention, or failed to forget, goes here)."""
        self._prune(now)

    def _prune(self, now: datetime) -> None:
        """Forget the oldest ended tickets past the count or the age."""
        retention = self.retention()
        horizon = now - retention.keep_for
        ended = self._ended
        forgotten: list[str] = []
        while ended:
            oldest = next(iter(ended.values()))
            resolved = oldest.resolved_at
            if len(ended) <= retention.keep_count and resolved is not None and resolved > horizon:
                break
            ended.popitem(last=False)
            del self._by_id[oldest.ticket_id]
            forgotten.append(oldest.ticket_id)
            self.on_pruned(oldest)
        if forgotten:
            self.on_forget(forgotten)
