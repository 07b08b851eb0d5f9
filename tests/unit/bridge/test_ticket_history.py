"""The ticket book stays bounded: indexed pending work, ended tickets kept by age and count.

A service that runs for months must not keep every ticket it ever accepted; a lead that asks for
a ticket after it aged out is told it expired, not that it never existed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetd.bridge.tasks import ResultSource, Retention, TaskBook, TicketOutcome
from fleetd.runs import new_run_id, ticket_number
from fleetd.testing import TestFleet, build_test_fleet, sample_document

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _book(keep_for: timedelta = timedelta(hours=1), keep_count: int = 3) -> TaskBook:
    return TaskBook(run=new_run_id(), retention=lambda: Retention(keep_for, keep_count))


def _accept(book: TaskBook, target: str, at: datetime = T0) -> str:
    return book.accept(target=target, owner="lead", prompt="p", now=at, nonce="abc").ticket_id


def test_pending_work_is_indexed_by_target_and_leaves_the_index_when_it_ends() -> None:
    """pending_for lists a target's pending tickets in order; a resolved or failed ticket leaves it,
    and failing a target twice fails nothing more."""
    book = _book()
    a1, a2, b1 = _accept(book, "a"), _accept(book, "a"), _accept(book, "b")
    assert [t.ticket_id for t in book.pending_for("a")] == [a1, a2]
    first = book.get(a1)
    assert first is not None
    book.mark_delivered(first, turn=1, now=T0)  # a result is for a prompt typed
    assert book.resolve(a1, content="x", source=ResultSource.REPLY, now=T0)
    assert [t.ticket_id for t in book.pending_for("a")] == [a2]
    assert [t.ticket_id for t in book.fail_target("b", reason="gone", now=T0)] == [b1]
    assert book.pending_for("b") == []
    assert book.fail_target("b", reason="gone", now=T0) == []  # idempotent


def test_ended_tickets_past_the_count_are_forgotten_oldest_first() -> None:
    """Past the kept count, ended tickets are forgotten oldest first and then read as expired."""
    book = _book(keep_count=3)
    ids = [_accept(book, "a") for _ in range(5)]
    for ticket in ids:
        book.cancel(ticket, reason="r", now=T0)
    assert [t.ticket_id for t in book.all()] == ids[2:]
    assert [book.expired(t) for t in ids] == [True, True, False, False, False]
    assert book.kept == 3


def test_pending_tickets_are_never_forgotten_whatever_the_count() -> None:
    """Pending tickets are kept whatever the kept count says."""
    book = _book(keep_count=1)
    ids = [_accept(book, "a") for _ in range(10)]
    assert book.kept == 10
    assert all(book.get(t) is not None and not book.expired(t) for t in ids)


def test_ended_tickets_older_than_the_retention_are_forgotten_at_the_next_change() -> None:
    """An ended ticket older than the retention is forgotten at the next change to the book, not
    before; younger ones stay."""
    book = _book(keep_for=timedelta(minutes=10), keep_count=100)
    old = _accept(book, "a")
    book.fail(old, reason="r", now=T0)
    young = _accept(book, "a", at=T0 + timedelta(minutes=5))
    book.fail(young, reason="r", now=T0 + timedelta(minutes=5))
    assert book.get(old) is not None
    _accept(book, "b", at=T0 + timedelta(minutes=10, seconds=1))
    assert book.get(old) is None
    assert book.expired(old)
    assert book.get(young) is not None


def test_expired_is_only_for_ids_this_run_issued() -> None:
    """expired() is true only for a ticket this run issued and forgot: not for a kept one, a number
    never issued, another run's id or a malformed id."""
    book = _book()
    issued = _accept(book, "a")
    number = ticket_number(issued)
    assert number == 1
    assert not book.expired(issued)  # still kept
    assert not book.expired(issued.replace(f"t{number}-", "t2-"))  # never issued
    assert not book.expired(f"t1-abc-{new_run_id()}")  # another run
    assert not book.expired("t-unknown")
    assert ticket_number("x12-abc-r00000000") is None


def test_the_last_delivered_ticket_is_found_without_a_scan_and_forgotten_with_its_target() -> None:
    """last_delivered answers a target's most recently delivered ticket even after the count dropped
    it from the history, and forget_target clears it."""
    book = _book(keep_count=1)
    first, second = _accept(book, "a"), _accept(book, "a")
    for number, ticket in enumerate((first, second), start=1):
        found = book.get(ticket)
        assert found is not None
        book.mark_delivered(found, turn=number, now=T0)
        book.resolve(ticket, content="x", source=ResultSource.FALLBACK, now=T0)
    last = book.last_delivered("a")
    assert last is not None
    assert last.ticket_id == second
    book.forget_target("a")
    assert book.last_delivered("a") is None


@pytest.fixture
async def short_memory(tmp_path: Path) -> TestFleet:
    document = sample_document(tmp_path)
    document["bridge"] = {**document["bridge"], "ticketRetentionSeconds": 600, "ticketsKept": 1000}
    return build_test_fleet(tmp_path, document=document)


async def test_a_lead_polling_an_aged_out_ticket_is_told_it_expired(
    short_memory: TestFleet,
) -> None:
    """fleet_poll on a ticket aged out of the history answers ticket_expired (404, hint expired); a
    ticket never issued answers unknown_ticket."""
    fleet = short_memory
    sid = await fleet.spawn_ready()
    ticket = (await fleet.ok("fleet_send", target=sid, prompt="task"))["ticket"]
    await fleet.ok("fleet_stop", sessionId=sid)
    polled = await fleet.ok("fleet_poll", ticket=ticket)
    assert polled["status"] == TicketOutcome.FAILED.value
    fleet.clock.advance(601)
    other = await fleet.spawn_ready()
    await fleet.ok("fleet_send", target=other, prompt="next")  # a change prunes the history
    result = await fleet.call("fleet_poll", ticket=ticket)
    assert result.error is not None
    assert (result.error.code, result.error.http_status) == ("ticket_expired", 404)
    assert result.error.hint is not None
    assert result.error.hint["expired"] is True
    unknown = await fleet.call("fleet_poll", ticket=ticket.replace("t1-", "t99-"))
    assert unknown.error is not None
    assert unknown.error.code == "unknown_ticket"


def test_retention_floors_hold(tmp_path: Path) -> None:
    """ticketRetentionSeconds and ticketsKept below their floors are raised to 600 seconds and 1000
    tickets."""
    document = sample_document(tmp_path)
    document["bridge"] = {**document["bridge"], "ticketRetentionSeconds": 5, "ticketsKept": 3}
    fleet = build_test_fleet(tmp_path, document=document)
    config = fleet.service.config.current.bridge
    assert (config.ticket_retention_seconds, config.tickets_kept) == (600, 1000)


def test_a_ticket_carries_a_done_event_only_once_someone_waits() -> None:
    """Kept tickets hold no event of their own; a waiter's event is set at the end, or at once
    for a ticket that already ended; every change is told to the book's listener."""
    changes: list[int] = []
    book = TaskBook(run=new_run_id(), on_change=lambda: changes.append(1))
    waited = book.get(_accept(book, "a"))
    ended = book.get(_accept(book, "a"))
    assert waited is not None
    assert ended is not None
    event = waited.done_event
    assert not event.is_set()
    book.cancel(ended.ticket_id, reason="x", now=T0)
    assert ended._done is None  # ended without a waiter: no event was ever made
    assert ended.done_event.is_set()
    book.mark_delivered(waited, turn=1, now=T0)
    book.fail(waited.ticket_id, reason="gone", now=T0)
    assert event.is_set()
    assert len(changes) == 5  # two accepted, one delivered, two ended
