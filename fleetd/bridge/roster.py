"""The bridge's in-memory view: sessions, send queues and open turns.

One :class:`Roster` per process. Lookups accept what a lead may name a member by: the session id,
the herdr agent name, or the pane id. Released sessions stay visible (read-only) so the teardown
invariant and the fleet view can still see them; they never accept work again.

A session is a frozen value (:class:`~fleetd.bridge.sessions.Session`) and the roster is the one
place that changes one: :meth:`Roster.apply` moves a member along the session table,
:meth:`Roster.update` sets the facts the table does not govern (its pane, its worktree's
measures, its teardown record ...). Both read the member's current value by id, put the new value
in its place and hand it back, so a caller that awaited meanwhile never writes over a change made
in between. A member's send queue is a value too (a tuple, oldest first), which only
:meth:`Roster.enqueue`, :meth:`Roster.dequeue` and :meth:`Roster.clear_queue` replace: a caller
reads it again after an ``await`` rather than hold it.

Every change — adding, updating, moving, retiring, and what the member's open turn, send queue,
tickets and last polled status show — is a touch of the member in :attr:`Roster.touches`, the
record of what the roster's writes touched (:class:`Touches`): its count is the bridge's revision,
which the fleet view's version follows, and each part that keeps something built from members
(the health tick's views, the fleet view's rows, the terminal edges) reads the members touched
since its last read through a :class:`TouchReader` of its own.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NoReturn

from fleetd.bridge.sessions import TABLE_FIELDS, Session, SessionEvent, SessionState
from fleetd.bridge.tasks import Ticket
from fleetd.bridge.turn_machine import (
    ForgetTurnRecord,
    StatusSighted,
    TurnClosed,
    TurnEffect,
    TurnEvent,
    TurnState,
    TurnToken,
    step,
)
from fleetd.herdr.model import AgentStatus

__all__ = ["OpenTurns", "Roster", "TouchReader", "Touches"]

_RELEASED_KEPT = 256
_TOKENS_KEPT = 4096


class Touches:
    """What the roster's writes touched, in order.

    Every write the fleet view shows is a touch: of a member (its session, open turn, send queue,
    tickets, last polled status) or of the bridge as a whole (a teardown failure noted).
    :attr:`count` numbers them: equal counts mean nothing was touched in between. Each member is
    kept once, at its last touch, in the order of those touches, so the members touched after a
    count are found in time that follows how many there are, not the fleet's size; what is kept is
    bounded by the roster's sessions (a member the roster forgets is forgotten here too)."""

    __slots__ = ("_last", "count")

    def __init__(self) -> None:
        self.count = 0
        self._last: OrderedDict[str, int] = OrderedDict()  # member -> the count of its last touch

    def touch(self, session_id: str | None = None) -> None:
        self.count += 1
        if session_id is not None:
            last = self._last
            last[session_id] = self.count
            last.move_to_end(session_id)

    def since(self, count: int) -> set[str]:
        """The members touched after ``count``."""
        last = self._last
        touched: set[str] = set()
        for session_id in reversed(last):
            if last[session_id] <= count:
                break
            touched.add(session_id)
        return touched

    def forget(self, session_id: str) -> None:
        self._last.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._last)

    def reader(self) -> TouchReader:
        """A reader of its own, from now on."""
        return TouchReader(self)


class TouchReader:
    """One part's reads of :class:`Touches`: the members touched since it last took them."""

    __slots__ = ("_at", "_touches")

    def __init__(self, touches: Touches) -> None:
        self._touches = touches
        self._at = touches.count

    def take(self) -> set[str]:
        """The members touched since the last take; the next take starts from here."""
        touches = self._touches
        taken = touches.since(self._at)
        self._at = touches.count
        return taken

    def marked(self) -> frozenset[str]:
        """The members touched since the last take, without taking them."""
        return frozenset(self._touches.since(self._at))


class OpenTurns(dict[str, TurnState]):
    """The open turn of each member, by session id: frozen values that only
    :func:`~fleetd.bridge.turn_machine.step` makes. A turn put here is watched for its member.

    :meth:`open` puts a turn the machine opened, :meth:`step` moves one along the machine's table
    (and drops it once the machine ends it); there is no other way in or out. Every change but a
    bare status sighting touches the member (its view reads the turn).
    """

    __slots__ = ("_touch", "fresh", "on_close")

    def __init__(self, touch: Callable[[str], None]) -> None:
        super().__init__()
        self._touch = touch
        #: the members whose turn was opened, or whose boundary watch moved, since the last look
        #: at this set: the observation of open turns takes it and sights each of them at the
        #: next list whatever its agent did (the same sighting may move such a watch again); it
        #: holds open turns only, so it stays bounded while health is off and never looks
        self.fresh: set[str] = set()
        #: told the session id of every turn closed (the state store drops its record)
        self.on_close: Callable[[str], None] = lambda _session_id: None

    def open(self, turn: TurnState) -> None:
        """Watch ``turn``, which the machine has just opened, for its member."""
        sid = turn.token.session_id
        if not turn.phase.open or sid in self:
            raise ValueError(f"a turn in phase {turn.phase} cannot be opened for {sid}")
        super().__setitem__(sid, turn)
        self.fresh.add(sid)
        self._touch(sid)

    def step(
        self, token: TurnToken, event: TurnEvent, now: datetime
    ) -> tuple[TurnEffect, ...] | None:
        """Feed ``event`` to the open turn of ``token`` and keep what :func:`step` makes of it.

        Returns the effects for the caller to carry out, or ``None`` when that turn is no longer
        open (the event came too late: nothing changes). A turn the machine ends is dropped
        here, and its record with it (its :class:`~.turn_machine.ForgetTurnRecord` is carried
        out here). Raises :class:`~fleetd.errors.IllegalTransitionError` as the machine does.
        """
        sid = token.session_id
        turn = self.get(sid)
        if turn is None or turn.token.token_id != token.token_id:
            return None
        new, effects = step(turn, event, now)
        if new is turn:
            return effects
        if new.phase.terminal:
            super().__delitem__(sid)
            self.fresh.discard(sid)  # a closed turn needs no sighting (and health may never look)
            self._touch(sid)
            self.on_close(sid)
            return tuple(e for e in effects if not isinstance(e, ForgetTurnRecord))
        super().__setitem__(sid, new)
        if new.watch is not turn.watch:
            self.fresh.add(sid)
        if type(event) is not StatusSighted:  # a sighting moves only the watch, which no row shows
            self._touch(sid)
        return effects

    def sight(
        self, turn: TurnState, status: AgentStatus | None, seq: int | None, now: datetime
    ) -> None:
        """Record a raw status sighting on the open ``turn`` (``status`` ``None``: the agent was
        missing or unreadable). A sighting its watch already holds would come back from
        :func:`step` as the very same turn, so it is not fed (every open turn, every health tick).
        """
        if turn.watch.observe(status, seq) is not turn.watch:
            self.step(turn.token, StatusSighted(status, seq), now)

    def close(self, session_id: str, cause: str, now: datetime) -> None:
        """End the member's open turn, if any, without a result of its own (``cause``)."""
        turn = self.get(session_id)
        if turn is not None:
            self.step(turn.token, TurnClosed(cause), now)

    def _refused(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise TypeError("open turns change only through open() and step()")

    __setitem__ = __delitem__ = pop = clear = popitem = setdefault = update = __ior__ = _refused


@dataclass(slots=True)
class Roster:
    """Sessions plus the work the bridge holds for each."""

    sessions: dict[str, Session] = field(default_factory=dict)
    #: what every write touched (its count is the bridge's revision)
    touches: Touches = field(init=False, repr=False)
    #: the health tick's reader of the touches (its member views, the teardowns it checks again)
    changes: TouchReader = field(init=False, repr=False)
    #: each held member's queued sends, oldest first (present from :meth:`add` to :meth:`retire`):
    #: values only the roster replaces (:meth:`enqueue`, :meth:`dequeue`, :meth:`clear_queue`)
    queues: dict[str, tuple[Ticket, ...]] = field(init=False, repr=False)
    inflight: OpenTurns = field(init=False, repr=False)
    gates: set[str] = field(default_factory=set)  # session ids closed to new sends
    live_status: dict[str, str] = field(default_factory=dict)  # last raw herdr status
    _gated: dict[str, int] = field(default_factory=dict)  # reconciliation gates held per session
    _tokens: OrderedDict[str, TurnToken] = field(default_factory=OrderedDict)  # issued, bounded
    _released_order: deque[str] = field(default_factory=deque)
    _names: dict[str, str] = field(default_factory=dict)  # live agent name -> session id
    _name_cursor: dict[str, int] = field(default_factory=dict)  # stem -> next number to try
    #: told the session id of every member retired (the state store drops its record)
    on_retire: Callable[[str], None] = field(default=lambda _session_id: None, repr=False)

    def __post_init__(self) -> None:
        # a member touched is a member whose view or row may show something new: the fleet view
        # moves to a new version for it (an open turn seen working, the poller's last status)
        self.touches = Touches()
        self.changes = self.touches.reader()
        self.queues = {}
        self.inflight = OpenTurns(self.touch)

    def touch(self, session_id: str | None = None) -> None:
        """Record a write that a member's view or row (or, with no member, the fleet view) may
        show. A member the roster does not hold is no member of the record, which stays bounded
        by the roster's sessions."""
        self.touches.touch(session_id if session_id in self.sessions else None)

    def add(self, session: Session) -> None:
        sid = session.session_id
        self.sessions[sid] = session
        self.queues[sid] = ()
        self._names[session.name] = sid
        self.touch(sid)

    def apply(self, session_id: str, event: SessionEvent, now: datetime) -> Session:
        """Move the member along the session table and keep the new value; an illegal event
        raises :class:`~fleetd.errors.IllegalTransitionError` and changes nothing."""
        current = self.sessions[session_id]
        new = current.stepped(event, now)
        if new is not current:
            self._put(new)
        return new

    def update(self, session_id: str, /, **facts: Any) -> Session:
        """Set facts of the member the session table does not govern; keep and return the new
        value. Its id never changes."""
        governed = TABLE_FIELDS.intersection(facts)
        if governed:
            raise TypeError(f"{sorted(governed)} change only through Roster.apply")
        if facts.get("session_id", session_id) != session_id:
            raise TypeError("a session's id never changes")
        new = replace(self.sessions[session_id], **facts)
        self._put(new)
        return new

    def queue(self, session_id: str) -> tuple[Ticket, ...]:
        """The member's queued sends as they are now, oldest first (none once retired)."""
        return self.queues.get(session_id, ())

    def enqueue(self, session_id: str, ticket: Ticket) -> None:
        """Queue ``ticket`` behind the member's other sends."""
        self.queues[session_id] = (*self.queues[session_id], ticket)
        self.touch(session_id)

    def dequeue(self, session_id: str, ticket: Ticket) -> bool:
        """Take ``ticket`` out of the member's queue (typed, failed past its budget, or refused
        before it was accepted); False when it is not there."""
        queue = self.queues.get(session_id, ())
        if not any(queued is ticket for queued in queue):
            return False
        self.queues[session_id] = tuple(queued for queued in queue if queued is not ticket)
        self.touch(session_id)
        return True

    def clear_queue(self, session_id: str) -> None:
        """Empty the member's queue (its tickets are failed by the caller)."""
        if self.queues.get(session_id):
            self.queues[session_id] = ()
            self.touch(session_id)

    def _put(self, session: Session) -> None:
        sid = session.session_id
        self.sessions[sid] = session
        self.touch(sid)

    def live(self) -> list[Session]:
        return [s for s in self.sessions.values() if s.state is not SessionState.RELEASED]

    def find(self, target: str) -> Session | None:
        """A live session by id, agent name or pane id."""
        session = self.sessions.get(target)
        if session is not None and session.live:
            return session
        by_name = self._names.get(target)
        if by_name is not None:
            return self.sessions[by_name]
        for candidate in self.live():
            if target == candidate.pane_id:
                return candidate
        return None

    def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    def finds(self, session: Session) -> bool:
        """Whether :meth:`find` would hand out ``session`` for its id, agent name or pane id, read
        from the same tables in O(1): by id or pane id only while it is live, by name while the
        name is still registered to it."""
        return session.live or self._names.get(session.name) == session.session_id

    def name_taken(self, name: str) -> bool:
        return name in self._names

    def next_name(self, stem: str, taken: Callable[[str], bool]) -> str:
        """``<stem>-<n>`` for the lowest ``n`` this run has not handed out that ``taken`` allows.

        Numbers only grow within a run, so finding a name costs O(1) however many members share
        the stem, and a new member never takes the name of one released a moment ago.
        """
        n = self._name_cursor.get(stem, 1)
        while taken(f"{stem}-{n}"):
            n += 1
        self._name_cursor[stem] = n + 1
        return f"{stem}-{n}"

    def retire(self, session: Session, now: datetime) -> None:
        """Forget the work of a released session; keep a bounded trail of released rows."""
        self.queues.pop(session.session_id, None)
        self.inflight.close(session.session_id, "released", now)
        self.live_status.pop(session.session_id, None)
        if self._names.get(session.name) == session.session_id:
            del self._names[session.name]
        self._released_order.append(session.session_id)
        self.touch(session.session_id)
        self.on_retire(session.session_id)
        while len(self._released_order) > _RELEASED_KEPT:
            old = self._released_order.popleft()
            self.sessions.pop(old, None)
            self.touches.forget(old)
            self.gates.discard(old)

    def see_status(self, session_id: str, status: str) -> None:
        """The poller's last raw herdr status of a live member (its row shows it); marked only
        when it moved, since the poller reads busy members several times a second."""
        if self.live_status.get(session_id) != status:
            self.live_status[session_id] = status
            self.touch(session_id)

    def pruned(self, ticket: Ticket) -> None:
        """An ended ticket was forgotten: the one member whose view can still read it is the one
        whose open turn it was (every other view counts only pending tickets), so only it is
        marked."""
        turn = self.inflight.get(ticket.target)
        if turn is not None and turn.token.ticket_id == ticket.ticket_id:
            self.touch(ticket.target)

    @contextmanager
    def reconciling(self, session_id: str) -> Iterator[None]:
        """Hold the session's reconciliation gate: no queued send is delivered to it meanwhile
        (M4 §8.3). Holders nest; the gate opens when the last one lets go."""
        self._gated[session_id] = self._gated.get(session_id, 0) + 1
        try:
            yield
        finally:
            held = self._gated.pop(session_id) - 1
            if held:
                self._gated[session_id] = held

    def is_reconciling(self, session_id: str) -> bool:
        return session_id in self._gated

    def issue(self, token: TurnToken) -> None:
        """Remember a token this run issued (the most recent few thousand are kept)."""
        self._tokens[token.token_id] = token
        while len(self._tokens) > _TOKENS_KEPT:
            self._tokens.popitem(last=False)

    def token(self, token_id: str) -> TurnToken | None:
        """A token this run issued, if it is still remembered."""
        return self._tokens.get(token_id)

    def needs_poll(self) -> list[Session]:
        """Sessions with outstanding work: starting, an open turn, or queued sends."""
        return [
            s
            for s in self.live()
            if (s.state is SessionState.SPAWNING and s.launched)
            or s.session_id in self.inflight
            or self.queues.get(s.session_id)
        ]
