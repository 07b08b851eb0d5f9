"""The state store keeps what a restart needs and no more: ended tickets past
``bridge.ticketsKept`` or ``bridge.ticketRetentionSeconds`` and released members are deleted, as
they end and again at start, so start-up replay stays bounded (the bridge on fakes, the in-memory
store)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetd.herdr.model import AgentStatus
from fleetd.state.facts import DeliveryState, TicketRecord
from fleetd.state.memory import MemoryStateStore
from fleetd.state.port import Change
from fleetd.testing import TestFleet, build_test_fleet, sample_document

KEPT = 1000  # bridge.ticketsKept's floor


def _document(root: Path, **bridge: Any) -> dict[str, Any]:
    document = sample_document(root)
    document["bridge"] = {**document["bridge"], **bridge}
    return document


async def _fleet(root: Path, store: MemoryStateStore, **bridge: Any) -> TestFleet:
    fleet = build_test_fleet(
        root, document=_document(root, **bridge), state=store, check_views=False
    )
    await fleet.service.own_lead_keys()
    return fleet


async def test_a_store_fed_far_more_tickets_than_tickets_kept_holds_at_most_the_bound(
    tmp_path: Path,
) -> None:
    """1,300 sends answered through the bridge with ``bridge.ticketsKept`` 1,000: the store never
    holds more than 1,000 ended tickets, and the ones it holds are the newest."""
    store = MemoryStateStore()
    fleet = await _fleet(tmp_path, store, ticketsKept=KEPT, ticketRetentionSeconds=86_400)
    sid = await fleet.spawn_ready()
    member = fleet.member(sid)
    tickets: list[str] = []
    most = 0
    for n in range(KEPT + 300):
        tickets.append((await fleet.ok("fleet_send", target=sid, prompt=f"task {n}"))["ticket"])
        await fleet.ok("fleet_reply", member, content="done")
        fleet.set_status(sid, AgentStatus.IDLE)
        await fleet.poll(0.5)
        most = max(most, len(store.tickets))
    assert most <= KEPT
    assert set(store.tickets) == set(tickets[-KEPT:])
    assert all(t.outcome == "done" for t in store.tickets.values())


async def test_ended_tickets_past_the_age_are_deleted_as_the_next_one_ends(
    tmp_path: Path,
) -> None:
    """``bridge.ticketRetentionSeconds`` 600: tickets ended more than ten minutes before the next
    end are deleted from the store with it."""
    store = MemoryStateStore()
    fleet = await _fleet(tmp_path, store, ticketRetentionSeconds=600)
    sid = await fleet.spawn_ready()
    member = fleet.member(sid)
    old = []
    for n in range(3):
        old.append((await fleet.ok("fleet_send", target=sid, prompt=f"old {n}"))["ticket"])
        await fleet.ok("fleet_reply", member, content="done")
        fleet.set_status(sid, AgentStatus.IDLE)
        await fleet.poll(0.5)
    fleet.clock.advance(601)
    new = (await fleet.ok("fleet_send", target=sid, prompt="new"))["ticket"]
    await fleet.ok("fleet_reply", member, content="done")
    assert set(store.tickets) == {new}


async def test_a_start_deletes_what_the_retention_no_longer_keeps(tmp_path: Path) -> None:
    """A store holding 5,000 ended tickets (a run with a larger ``bridge.ticketsKept``, or one
    whose deletes failed) and some ended past the age: the start keeps the newest 1,000 within
    the age, in memory and in the store, and ``fleet_poll`` still answers those."""
    store = MemoryStateStore()
    seed = await _fleet(tmp_path / "seed", store)
    now = seed.clock.now()
    records = [
        TicketRecord(
            ticket_id=f"t{n}-abcdef-r00000000",
            target="s-gone",
            owner="lead",
            accepted_at=now - timedelta(minutes=30),
            seq=n,
            delivery=DeliveryState.TYPED,
            outcome="done",
            source="reply",
            content="an answer",
            turn=n,
            delivered_at=now - timedelta(minutes=30),
            # the first 100 ended two hours ago (past the hour kept), the rest in order since
            resolved_at=now - (timedelta(hours=2) if n <= 100 else timedelta(seconds=5000 - n)),
        )
        for n in range(1, 5001)
    ]
    store.apply(Change(tickets=tuple(records)))
    root = tmp_path / "fleet"
    fleet = build_test_fleet(
        root, document=_document(root, ticketsKept=KEPT), state=store, check_views=False
    )
    assert fleet.clock.now() == now  # both start at the fake clock's origin
    await fleet.service.restore()
    kept = {r.ticket_id for r in records[-KEPT:]}
    assert set(store.tickets) == kept
    assert fleet.bridge.reads.tickets_kept() == KEPT
    polled = await fleet.ok("fleet_poll", ticket=records[-1].ticket_id)
    assert polled["status"] == "done"
