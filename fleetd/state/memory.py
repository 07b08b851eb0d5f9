"""The in-memory state store: the fake the unit tests use, and the benchmark's baseline."""

from __future__ import annotations

from fleetd.errors import StateStoreError
from fleetd.state.facts import MemberRecord, Snapshot, TicketRecord, TurnRecord
from fleetd.state.port import Change

__all__ = ["MemoryStateStore"]


class MemoryStateStore:
    """Records in dicts; ``fail`` makes every write raise (a store that cannot be written)."""

    def __init__(self) -> None:
        self.members: dict[str, MemberRecord] = {}
        self.tickets: dict[str, TicketRecord] = {}
        self.turns: dict[str, TurnRecord] = {}
        self.writes = 0
        self.fail = False
        self.closed = False

    def load(self) -> Snapshot:
        self._check()
        return Snapshot(
            members=tuple(self.members.values()),
            tickets=tuple(sorted(self.tickets.values(), key=lambda t: t.seq)),
            turns=tuple(self.turns.values()),
        )

    def apply(self, change: Change) -> None:
        self._check()
        if self.fail:
            raise StateStoreError("write", "unavailable")
        self.writes += 1
        for sid in change.drop_members:
            self.members.pop(sid, None)
        for tid in change.drop_tickets:
            self.tickets.pop(tid, None)
        for sid in change.drop_turns:
            self.turns.pop(sid, None)
        for member in change.members:
            self.members[member.session_id] = member
        for ticket in change.tickets:
            self.tickets[ticket.ticket_id] = ticket
        for turn in change.turns:
            self.turns[turn.session_id] = turn

    def discard(self) -> None:
        self._check()
        self.members.clear()
        self.tickets.clear()
        self.turns.clear()

    def close(self) -> None:
        self.closed = True

    def _check(self) -> None:
        if self.closed:
            raise StateStoreError("call", "closed")
