"""What the rest of fleetd may read of the bridge: one narrow, read-only view.

:class:`BridgeReads` answers the questions the fleet tools, the runtime, the test harness and the
benchmarks ask of the bridge — a session by id or by target, the live members, a ticket, the
pending tickets and the queued sends of a session, its open turn, the records held for the inbox,
the mute events since a cursor — and nothing else. It changes nothing: each answer is a fresh list
or tuple, a read-only sequence, or one of the bridge's own values that callers only read, so no
caller reaches the roster's tables or the ticket book through it. The
:class:`~fleetd.bridge.service.Bridge` builds one and exposes it as ``bridge.reads``; the roster,
ticket book and turn tables stay inside :mod:`fleetd.bridge` (the ``bridge-internals`` import
contract holds that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleetd.bridge.mutes import MuteEvent, MuteLog
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import TaskBook, Ticket
from fleetd.bridge.turn_machine import TurnState
from fleetd.errors import UnknownTargetError
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.records import InboxRecord

__all__ = ["BridgeReads"]


class BridgeReads:
    """Read-only answers about the bridge's sessions, tickets, turns and held records."""

    __slots__ = ("_mutes", "_name_taken", "_outbox", "_releasing", "_roster", "_tasks")

    def __init__(
        self,
        *,
        roster: Roster,
        tasks: TaskBook,
        outbox: LeadOutbox,
        mutes: MuteLog,
        name_taken: Callable[[str], bool],
        releasing: Callable[[str], bool],
    ) -> None:
        self._roster = roster
        self._tasks = tasks
        self._outbox = outbox
        self._mutes = mutes
        self._name_taken = name_taken
        self._releasing = releasing

    @property
    def revision(self) -> int:
        """How many writes the fleet view shows the bridge has made: equal values mean nothing
        it shows was touched in between (a send accepted, a prompt delivered, a ticket ended, a
        member added, moved or retired, a teardown failure noted)."""
        return self._roster.touches.count

    # -------------------------------------------------------------- sessions
    def session(self, session_id: str) -> Session | None:
        """A session by id, live or among the recently released."""
        return self._roster.get(session_id)

    def find_live(self, target: str) -> Session | None:
        """A live session by id, agent name or pane id."""
        return self._roster.find(target)

    def sessions(self) -> list[Session]:
        """Every session kept: the live ones and the recently released (bounded)."""
        return list(self._roster.sessions.values())

    def live_members(self) -> list[Session]:
        """The live sessions."""
        return self._roster.live()

    def find_owned(self, owner: str, target: str, *, released: bool = False) -> Session:
        """A live session the caller owns, or an error listing the valid targets. With
        ``released``, a session id of the caller's among the recently released (kept bounded) is
        found too, so the lead can read how it ended."""
        session = self._roster.find(target)
        if session is None and released:
            kept = self._roster.get(target)
            session = kept if kept is not None and not kept.live else None
        if session is None or session.owner != owner:
            valid = sorted(s.session_id for s in self._roster.live() if s.owner == owner)
            raise UnknownTargetError(
                f"no live member {target!r} for this lead", hint={"liveMembers": valid}
            )
        return session

    def name_taken(self, name: str) -> bool:
        """True while a live member or an orphan of a previous run has the agent name."""
        return self._name_taken(name)

    def releasing(self, session_id: str) -> bool:
        """True while a release of this session is under way."""
        return self._releasing(session_id)

    # ----------------------------------------------------------- work held
    def queued(self, session_id: str) -> tuple[Ticket, ...]:
        """The sends waiting in a session's queue, oldest first (none once it is released)."""
        return tuple(self._roster.queues.get(session_id, ()))

    def open_turn(self, session_id: str) -> TurnState | None:
        """The session's open turn (a frozen value), or ``None`` when none is open."""
        return self._roster.inflight.get(session_id)

    # --------------------------------------------------------------- tickets
    def ticket(self, ticket_id: str) -> Ticket | None:
        """A ticket by id (terminal tickets included)."""
        return self._tasks.get(ticket_id)

    def tickets(self) -> list[Ticket]:
        """Every ticket held: pending and kept ended ones."""
        return self._tasks.all()

    def tickets_kept(self) -> int:
        """How many tickets are held: pending plus kept ended ones."""
        return self._tasks.kept

    def pending_for(self, session_id: str) -> list[Ticket]:
        """The tickets of a session that have not ended."""
        return self._tasks.pending_for(session_id)

    def ticket_expired(self, ticket_id: str) -> bool:
        """True for a ticket of this run whose ended record is no longer kept."""
        return self._tasks.expired(ticket_id)

    # ------------------------------------------------------- held and mutes
    @property
    def unpublished(self) -> Sequence[InboxRecord]:
        """The records waiting in memory for the inbox, oldest first (read as they stand, not
        copied: the fleet view's fingerprint reads their count on every request)."""
        return self._outbox.held

    @property
    def held_dropped(self) -> int:
        """How many held records gave way to the bound."""
        return self._outbox.gave_way

    @property
    def drains(self) -> int:
        """How many lead drains took something from the inbox (its counts changed)."""
        return self._outbox.drains

    def mutes_since(self, cursor: int) -> tuple[list[MuteEvent], int]:
        """Fallback resolutions after ``cursor`` that are still kept, and the new cursor."""
        return self._mutes.since(cursor)
