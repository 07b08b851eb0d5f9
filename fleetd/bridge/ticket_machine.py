"""A ticket's life as a table: every (phase, event) pair fleetd allows, with its cause.

A ticket is accepted ``queued``: nothing of it has been typed. herdr's answer to its prompt either
types it — confirmed or uncertain, it is ``delivered`` and never typed again — or types nothing,
and it stays queued for another try after a backoff. It ends once, as ``done`` (a result: the
member's reply, the completion fallback, a repair), ``failed`` or ``cancelled``. An ended ticket
keeps its one outcome: a later result or failure for it is a declared row that changes nothing
(the caller learns the ticket had already ended, and keeps a late reply as such).

Anything not in :data:`TRANSITIONS` raises :class:`~fleetd.errors.IllegalTransitionError`: typing
a ticket twice, a refusal after typing, a result for a prompt never typed. The shell
(:class:`~fleetd.bridge.tasks.TaskBook`) asks :func:`ticket_step` before it changes a ticket, so
the table is the one place that says what may happen to one.
"""

from __future__ import annotations

from enum import StrEnum

from fleetd.errors import IllegalTransitionError

__all__ = ["ENDED", "TRANSITIONS", "TicketEvent", "TicketPhase", "ticket_step"]


class TicketPhase(StrEnum):
    QUEUED = "queued"  # accepted; nothing typed
    DELIVERED = "delivered"  # typed, or may have been: never typed again
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TicketEvent(StrEnum):
    TYPED = "typed"  # herdr typed the prompt, or may have (uncertain)
    REFUSED = "refused"  # herdr typed nothing
    RESOLVED = "resolved"  # a result: reply, fallback, repaired
    FAILED = "failed"
    CANCELLED = "cancelled"


P, E = TicketPhase, TicketEvent

ENDED = frozenset({P.DONE, P.FAILED, P.CANCELLED})
"""The phases a ticket ends in; it leaves none of them."""

_ONCE = "already ended: a ticket has one outcome, and this changes nothing"

#: (phase, event) -> (next phase, cause). The only legal moves.
TRANSITIONS: dict[tuple[TicketPhase, TicketEvent], tuple[TicketPhase, str]] = {
    (P.QUEUED, E.TYPED): (P.DELIVERED, "the prompt reached the member, or may have"),
    (P.QUEUED, E.REFUSED): (P.QUEUED, "herdr typed nothing: tried again after a backoff"),
    (P.QUEUED, E.FAILED): (P.FAILED, "failed before anything was typed"),
    (P.QUEUED, E.CANCELLED): (P.CANCELLED, "withdrawn before anything was typed"),
    (P.DELIVERED, E.RESOLVED): (P.DONE, "its turn's result: a reply, the fallback or a repair"),
    (P.DELIVERED, E.FAILED): (P.FAILED, "its turn ended without a result (target gone, stop)"),
    (P.DELIVERED, E.CANCELLED): (P.CANCELLED, "withdrawn after typing: never typed again"),
    **{
        (ended, event): (ended, _ONCE)
        for ended in ENDED
        for event in (E.RESOLVED, E.FAILED, E.CANCELLED)
    },
}


def ticket_step(phase: TicketPhase, event: TicketEvent) -> TicketPhase:
    """The phase after ``event``, or :class:`~fleetd.errors.IllegalTransitionError`."""
    row = TRANSITIONS.get((phase, event))
    if row is None:
        raise IllegalTransitionError("ticket", phase.value, event.value)
    return row[0]
