"""The bridge's side of the state store: records written at the points that change durable state.

:class:`DurableState` turns the bridge's live values (a :class:`~fleetd.bridge.sessions.Session`,
a :class:`~fleetd.bridge.tasks.Ticket`) into the store's frozen records and writes them, always
*before* the effect the change causes:

* a send is stored (its prompt kept) before ``fleet_send`` answers;
* a member is stored before herdr is asked for its pane, with the panes herdr already had under
  its label, and again before ``agent.start`` with the pane it got;
* a prompt about to be typed is stored as ``uncertain`` (its prompt dropped), with the member's
  next turn and its token, before ``agent.prompt`` is called; herdr's answer then stores it
  ``typed``, or (nothing typed) ``queued`` again with its prompt. A crash between the two leaves
  the turn uncertain: it is never typed again. A send typed at once, before ``fleet_send``
  answers, is stored by this one write (one commit ahead of the prompt, not two): the lead hears
  of the ticket only after it;
* a member's release is stored, with its cause, before anything of it runs (its tickets failed,
  its pane closed): a crash in the middle leaves a release the next start finishes, never a
  member taken back live after a lead stopped it;
* a ticket's end is stored before its result is handed on; an open turn's close, a member's
  release and an ended ticket's expiry drop their records.

A member's token is stored as its SHA-256 hash, never as is. Writes that must hold before an
effect (:meth:`accepted`, :meth:`typing`) raise :class:`~fleetd.errors.StateStoreError` and the
effect does not run; the others only log, as the change they record has already happened.

``FLEETD_CRASH_AT`` is a test hook, inert unless set: naming one of :data:`CRASH_POINTS` makes
the process exit at once (status 137, as ``kill -9`` would) right after that write, so the crash
tests can stop fleetd between a write and its effect.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Final

from fleetd.bridge.sessions import Session
from fleetd.bridge.tasks import Delivery, Ticket
from fleetd.errors import StateStoreError
from fleetd.state.facts import DeliveryState, MemberRecord, TicketRecord, TurnRecord
from fleetd.state.port import Change, StateStore

__all__ = ["CRASH_ENV", "CRASH_POINTS", "DurableState", "token_hash"]

_log = logging.getLogger("fleetd.state")

CRASH_ENV: Final = "FLEETD_CRASH_AT"
CRASH_POINTS: Final = frozenset(
    {
        "creating",
        "spawned",
        "accepted",
        "typing",
        "typed",
        "reply",
        "ended",
        "releasing",
        "released",
    }
)


def token_hash(token: str) -> str:
    """The hex SHA-256 of a bearer token (what the store keeps; the token itself never)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class DurableState:
    """Writes the bridge's durable changes to a :class:`~fleetd.state.port.StateStore`."""

    def __init__(self, store: StateStore, *, environ: Mapping[str, str] | None = None) -> None:
        self.store = store
        self._hashes: dict[str, str] = {}  # session id -> token hash (live members only)
        self._releasing: dict[str, str] = {}  # session id -> cause of the release under way
        crash = (environ if environ is not None else os.environ).get(CRASH_ENV)
        self._crash_at = crash if crash in CRASH_POINTS else None
        self.failures = 0

    # ------------------------------------------------------------ members
    def token_minted(self, session_id: str, token: str) -> None:
        self._hashes[session_id] = token_hash(token)

    def adopt_hash(self, session_id: str, digest: str, *, releasing: str | None = None) -> None:
        """A member taken back at start: its token's hash, and the release it was in, if any."""
        self._hashes[session_id] = digest
        if releasing is not None:
            self._releasing[session_id] = releasing

    def member(self, session: Session, *, launching: bool = False) -> None:
        """A member started (or changed what a restart needs: presence). With ``launching`` it
        is about to be started in the pane it has: stored ahead of ``agent.start``, so a restart
        after a crash there adopts it (herdr lists it) or releases it as gone, pane and all (herdr
        does not), instead of finding an orphan, or nothing at all."""
        record = self._member(session, launching=launching)
        if record is not None:
            self._write(Change(members=(record,)), "member")
            self._crash("spawned")

    def creating(self, session: Session, panes_before: Iterable[str] | None) -> None:
        """herdr is about to be asked for the member's pane: stored first, with the panes herdr
        already has under its label (``None``: herdr could not say), so a restart after a crash
        before the pane is stored rolls the spawn back and closes a pane herdr made for it —
        never one that was there before."""
        before = None if panes_before is None else " ".join(sorted(panes_before))
        record = self._member(session, launching=True, panes_before=before)
        if record is not None:
            self._write(Change(members=(record,)), "member")
            self._crash("creating")

    def releasing(self, session: Session, cause: str) -> None:
        """A release of ``session`` with ``cause`` is about to begin: stored first, so a crash in
        the middle of it is finished by the next start (every later write of the member keeps
        the cause). Only logs when it could not be stored: the release goes on either way."""
        self._releasing[session.session_id] = cause
        record = self._member(session)
        if record is not None:
            self._write(Change(members=(record,)), "release")
            self._crash("releasing")

    def retired(self, session_id: str) -> None:
        """A member was released: its record and its open turn go."""
        self._hashes.pop(session_id, None)
        self._releasing.pop(session_id, None)
        self._write(Change(drop_members=(session_id,), drop_turns=(session_id,)), "release")
        self._crash("released")

    # ------------------------------------------------------------ tickets
    def accepted(self, ticket: Ticket) -> None:
        """A send was accepted and waits in its queue; raises when it could not be stored
        (nothing is accepted)."""
        self.store.apply(Change(tickets=(ticket_record(ticket),)))
        self._crash("accepted")

    def ticket(self, ticket: Ticket) -> None:
        """A ticket was delivered, refused or ended."""
        if not ticket.stored and ticket.delivered_at is None and ticket.terminal:
            return  # ended before anything stored it (a send refused at acceptance)
        self._write(Change(tickets=(ticket_record(ticket),)), "ticket")
        if ticket.terminal:
            self._crash("ended")
        elif ticket.delivered_at is not None:
            self._crash("typed")

    def forgotten(self, ticket_ids: list[str]) -> None:
        """Ended tickets past the retention: compaction."""
        if ticket_ids:
            self._write(Change(drop_tickets=tuple(ticket_ids)), "compact")

    def typing(self, session: Session, ticket: Ticket, *, token_id: str, now: datetime) -> None:
        """The prompt of ``ticket`` is about to be typed into ``session``: stored as uncertain
        with the turn it opens, before anything is typed. Raises when it could not be."""
        turn = session.turn + 1
        record = ticket_record(ticket)
        member = self._member(session, turn=turn)
        self.store.apply(
            Change(
                tickets=(
                    _replace(
                        record,
                        delivery=DeliveryState.UNCERTAIN,
                        prompt=None,
                        turn=turn,
                        delivered_at=now,
                    ),
                ),
                turns=(
                    TurnRecord(
                        session_id=session.session_id,
                        token_id=token_id,
                        ticket_id=ticket.ticket_id,
                        turn=turn,
                        delivered_at=now,
                    ),
                ),
                members=(member,) if member is not None else (),
            )
        )
        self._crash("typing")

    def untyped(self, session: Session, ticket: Ticket) -> None:
        """herdr typed nothing: the ticket is queued again, with its prompt, and no turn opened."""
        member = self._member(session)
        self._write(
            Change(
                tickets=(ticket_record(ticket),),
                drop_turns=(session.session_id,),
                members=(member,) if member is not None else (),
            ),
            "untyped",
        )

    def turn_closed(self, session_id: str) -> None:
        self._write(Change(drop_turns=(session_id,)), "turn")

    def replied(self) -> None:
        self._crash("reply")

    # ------------------------------------------------------------ helpers
    def _member(
        self,
        session: Session,
        *,
        turn: int | None = None,
        launching: bool = False,
        panes_before: str | None = None,
    ) -> MemberRecord | None:
        digest = self._hashes.get(session.session_id)
        if digest is None or not (session.launched or launching) or not session.live:
            return None
        tree = session.worktree
        return MemberRecord(
            session_id=session.session_id,
            name=session.name,
            profile=session.profile,
            kind=session.kind,
            role=session.role,
            owner=session.owner,
            created_at=session.created_at,
            pane_id=session.pane_id,
            terminal_id=session.terminal_id,
            token_hash=digest,
            presence=session.presence,
            turn=session.turn if turn is None else turn,
            worktree_repo=str(tree.repo) if tree else None,
            worktree_path=str(tree.path) if tree else None,
            worktree_branch=tree.branch if tree else None,
            worktree_ref=tree.base_ref if tree else None,
            worktree_base=tree.base_commit if tree else None,
            releasing=self._releasing.get(session.session_id),
            panes_before=panes_before if session.pane_id is None else None,
        )

    def _write(self, change: Change, what: str) -> None:
        try:
            self.store.apply(change)
        except StateStoreError as exc:
            self.failures += 1
            _log.warning("state store: %s not recorded (%s)", what, exc)

    def _crash(self, point: str) -> None:
        if self._crash_at == point:
            os._exit(137)  # the test hook: stop as kill -9 would, right after the write


def ticket_record(ticket: Ticket) -> TicketRecord:
    """The stored form of ``ticket`` (its prompt only while nothing was typed)."""
    if ticket.delivered_at is None:
        delivery = DeliveryState.QUEUED
    elif ticket.delivery is Delivery.CONFIRMED:
        delivery = DeliveryState.TYPED
    else:
        delivery = DeliveryState.UNCERTAIN
    return TicketRecord(
        ticket_id=ticket.ticket_id,
        target=ticket.target,
        owner=ticket.owner,
        accepted_at=ticket.accepted_at,
        seq=ticket.seq,
        delivery=delivery,
        prompt=ticket.prompt if delivery is DeliveryState.QUEUED else None,
        outcome=ticket.outcome.value,
        source=ticket.source.value if ticket.source else None,
        content=ticket.content,
        reason=ticket.reason,
        hint=ticket.hint,
        refusals=ticket.refusals,
        turn=ticket.turn,
        delivered_at=ticket.delivered_at,
        resolved_at=ticket.resolved_at,
    )


def _replace(record: TicketRecord, **changes: object) -> TicketRecord:
    values = {name: getattr(record, name) for name in record.__dataclass_fields__}
    values.update(changes)
    return TicketRecord(**values)
