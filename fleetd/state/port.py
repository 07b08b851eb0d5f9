"""The state store port: one atomic write of records, one load, nothing else.

Every call is synchronous and bounded by ``state.operationTimeoutMs``: the bridge writes a record
in the same step that changes its memory, before it awaits the effect, so no other step can see
the change before it is stored. A failed call raises :class:`~fleetd.errors.StateStoreError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fleetd.state.facts import MemberRecord, Snapshot, TicketRecord, TurnRecord

__all__ = ["Change", "StateStore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """Records to put and keys to drop, written in one transaction (puts replace by key)."""

    members: tuple[MemberRecord, ...] = ()
    tickets: tuple[TicketRecord, ...] = ()
    turns: tuple[TurnRecord, ...] = ()
    drop_members: tuple[str, ...] = ()  # session ids
    drop_tickets: tuple[str, ...] = ()  # ticket ids
    drop_turns: tuple[str, ...] = ()  # session ids

    def __bool__(self) -> bool:
        return any(
            (
                self.members,
                self.tickets,
                self.turns,
                self.drop_members,
                self.drop_tickets,
                self.drop_turns,
            )
        )


class StateStore(Protocol):
    """Where the bridge's durable state is kept (SQLite, PostgreSQL, or memory in tests)."""

    def load(self) -> Snapshot:
        """Everything this store's instance stored (tickets in acceptance order); a store shared
        by several instances keeps each one's rows apart."""
        ...

    def apply(self, change: Change) -> None:
        """Write ``change`` in one transaction, or raise and write nothing."""
        ...

    def discard(self) -> None:
        """Forget everything this instance stored (``fleetd serve --discard-state``)."""
        ...

    def close(self) -> None:
        """Release connections; later calls fail."""
        ...
