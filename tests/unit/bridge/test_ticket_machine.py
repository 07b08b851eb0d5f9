"""The ticket table: every (phase, event) pair has one row with its cause, or is refused; and the
ticket book, driven through its operations in any order, keeps what the table says."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetd.bridge.tasks import Delivery, ResultSource, TaskBook, Ticket, TicketOutcome
from fleetd.bridge.ticket_machine import (
    ENDED,
    TRANSITIONS,
    TicketEvent,
    TicketPhase,
    ticket_step,
)
from fleetd.errors import IllegalTransitionError
from fleetd.runs import new_run_id

T0 = datetime(2026, 1, 1, tzinfo=UTC)
P, E = TicketPhase, TicketEvent

#: Every pair, spelled out: the next phase, or None where the table refuses.
EXPECTED: dict[tuple[TicketPhase, TicketEvent], TicketPhase | None] = {
    (P.QUEUED, E.TYPED): P.DELIVERED,
    (P.QUEUED, E.REFUSED): P.QUEUED,
    (P.QUEUED, E.RESOLVED): None,  # a result needs a prompt typed
    (P.QUEUED, E.FAILED): P.FAILED,
    (P.QUEUED, E.CANCELLED): P.CANCELLED,
    (P.DELIVERED, E.TYPED): None,  # never typed twice
    (P.DELIVERED, E.REFUSED): None,  # typed already: no refusal after it
    (P.DELIVERED, E.RESOLVED): P.DONE,
    (P.DELIVERED, E.FAILED): P.FAILED,
    (P.DELIVERED, E.CANCELLED): P.CANCELLED,
    **{(ended, E.TYPED): None for ended in ENDED},
    **{(ended, E.REFUSED): None for ended in ENDED},
    **{(ended, event): ended for ended in ENDED for event in (E.RESOLVED, E.FAILED, E.CANCELLED)},
}


@pytest.mark.parametrize(("phase", "event"), list(itertools.product(P, E)))
def test_every_pair_has_its_row_or_is_refused(phase: TicketPhase, event: TicketEvent) -> None:
    """The table holds exactly the expected rows, each with a cause; every other pair raises
    and names the machine, the phase and the event."""
    expected = EXPECTED[(phase, event)]
    if expected is None:
        assert (phase, event) not in TRANSITIONS
        with pytest.raises(IllegalTransitionError) as refused:
            ticket_step(phase, event)
        assert (refused.value.machine, refused.value.state, refused.value.event) == (
            "ticket",
            phase.value,
            event.value,
        )
        return
    assert ticket_step(phase, event) is expected
    assert TRANSITIONS[(phase, event)][1]  # a cause


def test_no_ended_phase_is_left() -> None:
    """Every row out of an ended phase stays in it."""
    for (phase, _event), (after, _cause) in TRANSITIONS.items():
        if phase in ENDED:
            assert after is phase


def test_the_book_refuses_to_type_a_ticket_twice_or_after_it_ended() -> None:
    """mark_delivered on a delivered or ended ticket raises and changes nothing; a refusal after
    typing raises too; a result for a prompt never typed raises."""
    book = TaskBook(run=new_run_id())
    ticket = book.accept(target="a", owner="lead", prompt="p", now=T0, nonce="n")
    with pytest.raises(IllegalTransitionError):
        book.resolve(ticket.ticket_id, content="x", source=ResultSource.REPLY, now=T0)
    book.mark_delivered(ticket, turn=1, now=T0)
    later = T0 + timedelta(seconds=5)
    with pytest.raises(IllegalTransitionError):
        book.mark_delivered(ticket, turn=2, now=later)
    with pytest.raises(IllegalTransitionError):
        book.refused(ticket, retry_at=later)
    assert (ticket.turn, ticket.delivered_at, ticket.refusals) == (1, T0, 0)
    assert book.cancel(ticket.ticket_id, reason="stop", now=later)
    with pytest.raises(IllegalTransitionError):
        book.mark_delivered(ticket, turn=3, now=later)
    assert (ticket.phase, ticket.turn, book.last_delivered("a")) == (P.CANCELLED, 1, ticket)


_OPERATIONS = st.lists(
    st.sampled_from(["type", "type_uncertain", "refuse", "resolve", "fail", "cancel"]),
    max_size=12,
)


def _apply(book: TaskBook, ticket: Ticket, operation: str, now: datetime) -> bool:
    """One operation through the book's public surface; False where the table refused it."""
    try:
        match operation:
            case "type" | "type_uncertain":
                uncertain = operation == "type_uncertain"
                delivery = Delivery.UNCERTAIN if uncertain else Delivery.CONFIRMED
                book.mark_delivered(ticket, turn=1, now=now, delivery=delivery)
            case "refuse":
                book.refused(ticket, retry_at=now + timedelta(seconds=1))
            case "resolve":
                book.resolve(ticket.ticket_id, content="r", source=ResultSource.REPLY, now=now)
            case "fail":
                book.fail(ticket.ticket_id, reason="gone", now=now)
            case _:
                book.cancel(ticket.ticket_id, reason="stop", now=now)
    except IllegalTransitionError:
        return False
    return True


@given(_OPERATIONS)
def test_any_order_of_operations_ends_a_ticket_once_and_types_it_at_most_once(
    operations: list[str],
) -> None:
    """Whatever the order: the ticket is typed at most once and never after it ended, ends at
    most once with the outcome of the first ending the table allowed, is counted once, and its
    phase always follows the table from where it stood."""
    ends: list[Ticket] = []
    writes: list[TicketPhase] = []
    book = TaskBook(run=new_run_id(), on_terminal=ends.append)
    book.on_write = lambda t: writes.append(t.phase)
    ticket = book.accept(target="a", owner="lead", prompt="p", now=T0, nonce="n")
    typed = 0
    first_end: TicketOutcome | None = None
    for n, operation in enumerate(operations):
        before = ticket.phase
        allowed = _apply(book, ticket, operation, T0 + timedelta(seconds=n))
        event = {
            "type": E.TYPED,
            "type_uncertain": E.TYPED,
            "refuse": E.REFUSED,
            "resolve": E.RESOLVED,
            "fail": E.FAILED,
            "cancel": E.CANCELLED,
        }[operation]
        assert allowed == ((before, event) in TRANSITIONS)
        assert ticket.phase is (TRANSITIONS[(before, event)][0] if allowed else before)
        if allowed and event is E.TYPED:
            typed += 1
        if first_end is None and ticket.terminal:
            first_end = ticket.outcome
    assert typed <= 1
    assert len(ends) == (1 if ticket.terminal else 0)
    assert ticket.outcome is (first_end or TicketOutcome.PENDING)
    assert len(writes) == typed + (1 if ticket.terminal else 0)  # stored once per change
    assert ticket.prompt is (None if ticket.phase is not P.QUEUED else "p")


def test_a_ticket_with_a_delivery_but_no_delivery_time_counts_as_typed() -> None:
    """A stored ticket that says its prompt may have been typed is delivered for the table even
    without a delivery time: its result is taken, and it is never typed again."""
    book = TaskBook(run=new_run_id())
    ticket = Ticket(
        ticket_id="t1-abc-r1",
        target="a",
        owner="lead",
        accepted_at=T0,
        prompt=None,
        delivery=Delivery.UNCERTAIN,
    )
    book.restore(ticket)
    assert ticket.phase is P.DELIVERED
    with pytest.raises(IllegalTransitionError):
        book.mark_delivered(ticket, turn=1, now=T0)
    assert book.resolve(ticket.ticket_id, content="r", source=ResultSource.REPLY, now=T0)
    assert ticket.outcome is TicketOutcome.DONE
