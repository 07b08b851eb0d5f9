"""The state store's records: plain frozen values, one per durable fact.

They are what a later pure ``step(state, event, now)`` will produce; the bridge writes them at the
points where it changes durable state, always before the effect that change causes.

* :class:`MemberRecord` — a member herdr started for a lead, with its token's SHA-256 hash, and
  the cause of its release once one began (a restart finishes that release).
* :class:`TicketRecord` — one accepted send: ``queued`` (its prompt kept, nothing typed yet),
  ``uncertain`` (the prompt is about to be typed or may have been: never typed again, the prompt is
  gone), ``typed`` (herdr answered ok), and its outcome once it ends.
* :class:`TurnRecord` — the open turn of a member: the token that ties the member's reply to its
  ticket.
* :class:`Snapshot` — everything :meth:`~fleetd.state.port.StateStore.load` gives back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = [
    "DeliveryState",
    "InstanceHolder",
    "MemberRecord",
    "Snapshot",
    "TicketRecord",
    "TurnRecord",
]


class DeliveryState(StrEnum):
    """How far a ticket's prompt got."""

    QUEUED = "queued"  # not typed: a restart delivers it (never typed before, so not a replay)
    UNCERTAIN = "uncertain"  # about to be typed, or herdr's answer could not say: never again
    TYPED = "typed"  # herdr answered ok


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberRecord:
    session_id: str
    name: str
    profile: str
    kind: str
    role: str | None
    owner: str
    created_at: datetime
    pane_id: str | None
    terminal_id: str | None
    token_hash: str  # hex SHA-256 of the member's bearer token
    presence: bool = False
    turn: int = 0
    worktree_repo: str | None = None
    worktree_path: str | None = None
    worktree_branch: str | None = None
    worktree_ref: str | None = None
    worktree_base: str | None = None
    releasing: str | None = None  # the cause of a release under way (written ahead of it)
    #: while the member has no pane yet (stored ahead of herdr's ``workspace.create``): the pane
    #: ids herdr had under its label before, space-separated; ``None`` when herdr could not say
    panes_before: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TicketRecord:
    ticket_id: str
    target: str
    owner: str
    accepted_at: datetime
    seq: int  # order of acceptance (the send queue's order after a restart)
    delivery: DeliveryState = DeliveryState.QUEUED
    prompt: str | None = None  # only while queued
    outcome: str = "pending"
    source: str | None = None
    content: str | None = None
    reason: str | None = None
    hint: str | None = None
    refusals: int = 0
    turn: int | None = None
    delivered_at: datetime | None = None
    resolved_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.prompt is not None and self.delivery is not DeliveryState.QUEUED:
            raise ValueError("a prompt is kept only while its ticket is queued")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord:
    session_id: str
    token_id: str
    ticket_id: str
    turn: int
    delivered_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceHolder:
    """Who holds an instance's writer lock: enough for the refusal to name it."""

    instance: str
    pid: int
    host: str
    started_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Everything a start needs, as stored."""

    members: tuple[MemberRecord, ...] = ()
    tickets: tuple[TicketRecord, ...] = ()  # in acceptance order
    turns: tuple[TurnRecord, ...] = ()
