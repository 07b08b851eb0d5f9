"""A restart of fleetd carries on: what the state store holds is the bridge's again.

At start :func:`restore` rebuilds, from the state store's :class:`~fleetd.state.facts.Snapshot`,

* every stored member as a live session with its token (by hash: the member's token still
  works), its turn count and its presence; a member with an open turn is BUSY on it, since its
  delivery; one whose last turn ended is DONE since that end (its ``stateAgeSeconds`` and
  ``idleForSeconds`` go on from before the restart);
* every stored ticket with its real outcome (``fleet_poll(ticket)`` answers tickets of before the
  restart), queued sends back in their member's queue in acceptance order (never typed before, so
  delivering them is not a replay);
* every open turn, marked ``restored``: it has no delivery baseline, so it is resolved only by the
  member's own ``fleet_reply``. No fallback reads its pane and lost-boundary repair refuses it
  with the detail ``fleetd_restarted_during_turn``, which the lead's incident carries (M4 §8: a
  post-restart baseline never authorises repair). The ticket stays pending meanwhile.

A pending ticket whose member is not stored, or that was typed with no open turn left to answer
it, fails once (``fleetd_restarted``). Then :func:`confirm` matches the restored members against
herdr's first successful ``agent.list``: a member whose pane is still listed under its name is
a member again; one whose pane is gone is released as GONE, its pending tickets failed once.

A member stored in the middle of its release (a crash after the release was written ahead, before
its record was dropped) is not taken back: once herdr's list answers, :func:`confirm` finishes
that release with the cause it was stored with — its pending tickets failed once, its pane closed
if herdr still lists it — so a member a lead stopped never comes back live. A member stored
before herdr made its pane (a crash inside ``fleet_spawn``, between the write ahead of
``workspace.create`` and the pane's) has its spawn rolled back: a pane herdr made for it under its
label is closed (one that was there before is not), its worktree goes, and health tells the lead
that spawned it that it never became ready (``fleetd_restarted``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from fleetd.bridge.answers import ReleaseResult
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionState
from fleetd.bridge.tasks import Delivery, ResultSource, TaskBook, Ticket, TicketOutcome
from fleetd.bridge.turn_machine import TurnRestored, TurnState, TurnToken, step
from fleetd.bridge.worktrees import Worktree
from fleetd.herdr.model import AgentInfo
from fleetd.state.facts import DeliveryState, MemberRecord, Snapshot, TicketRecord, TurnRecord

__all__ = ["Restored", "confirm", "restore"]

_log = logging.getLogger("fleetd.bridge")

RESTART_REASON = "fleetd_restarted"
_RESTART_HINT = (
    "fleetd restarted after this task was typed and no turn was left open to answer it; nothing "
    "was typed again. Ask the member with fleet_status, and send the task again if needed."
)


@dataclass(slots=True)
class Restored:
    """What :func:`restore` rebuilt; ``unconfirmed`` waits for herdr's list."""

    members: int = 0
    tickets: int = 0
    turns: int = 0
    unconfirmed: set[str] = field(default_factory=set)
    releasing: dict[str, ReleaseCause] = field(default_factory=dict)
    #: members stored before herdr made their pane: the pane ids under their label before
    creating: dict[str, frozenset[str] | None] = field(default_factory=dict)


def restore(
    snapshot: Snapshot,
    *,
    roster: Roster,
    tasks: TaskBook,
    adopt_token: Callable[[str, str, str], None],
    now: datetime,
) -> Restored:
    """Rebuild the bridge's sessions, tickets and open turns from ``snapshot``."""
    restored = Restored()
    tickets = {record.ticket_id: record for record in snapshot.tickets}
    turns = {
        turn.session_id: turn
        for turn in snapshot.turns
        if (ticket := tickets.get(turn.ticket_id)) is not None and ticket.outcome == "pending"
    }
    settled = _last_settled(snapshot.tickets)
    for member in snapshot.members:
        turn = turns.get(member.session_id)
        session = _session(member, turn=turn, settled=settled.get(member.session_id), now=now)
        roster.add(session)
        adopt_token(member.session_id, member.name, member.token_hash)
        restored.members += 1
        restored.unconfirmed.add(member.session_id)
        if member.releasing is not None:  # closed to sends; its release ends its work
            restored.releasing[member.session_id] = _cause(member.releasing)
            roster.gates.add(member.session_id)
        if member.pane_id is None:  # its spawn never got its pane: rolled back
            restored.creating[member.session_id] = _panes(member.panes_before)
            roster.gates.add(member.session_id)
        if turn is not None:
            token = TurnToken(
                token_id=turn.token_id,
                session_id=turn.session_id,
                ticket_id=turn.ticket_id,
                turn=turn.turn,
            )
            roster.issue(token)
            opened, _ = step(TurnState.pending(token), TurnRestored(turn.delivered_at), now)
            roster.inflight.open(opened)
            restored.turns += 1
    ended = sorted(
        (r for r in snapshot.tickets if r.outcome != "pending"),
        key=lambda r: (r.resolved_at or r.accepted_at, r.seq),
    )
    pending = [r for r in snapshot.tickets if r.outcome == "pending"]
    for record in [*ended, *pending]:
        tasks.restore(_ticket(record))
        restored.tickets += 1
    for record in pending:
        held = tasks.get(record.ticket_id)
        assert held is not None
        if record.target not in roster.queues:
            tasks.fail(record.ticket_id, reason="target_gone", now=now)
        elif record.delivery is DeliveryState.QUEUED:
            if record.target not in roster.gates:  # never typed: its release fails it
                roster.enqueue(record.target, held)
        else:
            open_turn = roster.inflight.get(record.target)
            if open_turn is None or open_turn.token.ticket_id != record.ticket_id:
                tasks.fail(record.ticket_id, reason=RESTART_REASON, now=now, hint=_RESTART_HINT)
    return restored


async def confirm(
    restored: Restored,
    agents: Iterable[AgentInfo],
    *,
    roster: Roster,
    gone: Callable[[Session], Awaitable[bool]],
    finish: Callable[[Session, ReleaseCause], Awaitable[ReleaseResult]],
    roll_back: Callable[[Session, frozenset[str] | None], Awaitable[ReleaseResult]],
) -> None:
    """Match the restored members against one ``agent.list``: gone ones are released (GONE),
    ones stored in the middle of a release have that release ``finish``, and ones stored before
    their pane have their spawn rolled back (``roll_back``, given the panes under their label
    before).

    A member is found by its terminal id, herdr's stable key (a moved pane gets a new pane id,
    and the member then takes it), else by its pane id and name. A member ``gone`` could not
    decide on (the link in doubt) is matched again at the next check."""
    agents = list(agents)
    by_terminal = {agent.terminal_id: agent for agent in agents if agent.terminal_id}
    listed = {(agent.pane_id, agent.name) for agent in agents}
    waiting, restored.unconfirmed = restored.unconfirmed, set()
    for session_id in sorted(waiting):
        session = roster.get(session_id)
        if session is None or not session.live:
            continue
        if session_id in restored.creating:
            _log.info(
                "member %s (%s): its spawn was cut short by a restart before herdr's pane was "
                "stored; rolled back",
                session_id,
                session.name,
            )
            restored.releasing.pop(session_id, None)
            await roll_back(session, restored.creating.pop(session_id))
            continue
        found = by_terminal.get(session.terminal_id) if session.terminal_id else None
        if found is not None and found.pane_id and found.pane_id != session.pane_id:
            _log.info("member %s (%s) moved to pane %s", session_id, session.name, found.pane_id)
            session = roster.update(session_id, pane_id=found.pane_id)
        cause = restored.releasing.pop(session_id, None)
        if cause is not None:
            _log.info(
                "member %s (%s): finishing the release a restart interrupted (%s)",
                session_id,
                session.name,
                cause.value,
            )
            await finish(session, cause)
            continue
        if found is not None or (session.pane_id, session.name) in listed:
            _log.info("member %s (%s) adopted after a restart", session_id, session.name)
            continue
        _log.warning("member %s (%s): its pane is gone after a restart", session_id, session.name)
        if not await gone(session):
            restored.unconfirmed.add(session_id)  # herdr could not confirm it: asked again


def _panes(stored: str | None) -> frozenset[str] | None:
    return None if stored is None else frozenset(stored.split())


def _cause(value: str) -> ReleaseCause:
    """The stored cause; one this build does not know (a newer build wrote it) preserves what
    it can, as a lead's abort does."""
    try:
        return ReleaseCause(value)
    except ValueError:
        return ReleaseCause.LEAD_ABORT


def _last_settled(tickets: Iterable[TicketRecord]) -> dict[str, datetime]:
    """When each member's last typed ticket ended (its turn's end: the member is DONE since)."""
    settled: dict[str, datetime] = {}
    for record in tickets:
        ended = record.resolved_at
        if record.outcome == "pending" or record.delivered_at is None or ended is None:
            continue
        if record.target not in settled or ended > settled[record.target]:
            settled[record.target] = ended
    return settled


def _session(
    member: MemberRecord, *, turn: TurnRecord | None, settled: datetime | None, now: datetime
) -> Session:
    """The member as a live session, in the state it was in and since when it was: BUSY since its
    open turn's delivery, DONE since its last turn ended, READY or SPAWNING since it was made
    (now, when the store no longer keeps what says so)."""
    if turn is not None:
        state, turns, since = SessionState.BUSY, turn.turn, turn.delivered_at
    elif member.presence and member.turn:
        state, turns, since = SessionState.DONE, member.turn, settled or now
    elif member.presence:
        state, turns, since = SessionState.READY, member.turn, member.created_at
    else:
        state, turns, since = SessionState.SPAWNING, member.turn, member.created_at
    worktree = None
    if member.worktree_path and member.worktree_repo and member.worktree_branch:
        worktree = Worktree(
            repo=Path(member.worktree_repo),
            path=Path(member.worktree_path),
            branch=member.worktree_branch,
            base_ref=member.worktree_ref or "HEAD",
            base_commit=member.worktree_base or "0" * 40,
        )
    return Session(
        session_id=member.session_id,
        name=member.name,
        profile=member.profile,
        kind=member.kind,
        role=member.role,
        owner=member.owner,
        created_at=member.created_at,
        pane_id=member.pane_id,
        terminal_id=member.terminal_id,
        worktree=worktree,
        state=state,
        launched=True,
        presence=member.presence,
        presence_at=now if member.presence else None,
        turn=turns,
        state_since=min(since, now),
    )


def _ticket(record: TicketRecord) -> Ticket:
    delivery = {
        DeliveryState.QUEUED: None,
        DeliveryState.UNCERTAIN: Delivery.UNCERTAIN,
        DeliveryState.TYPED: Delivery.CONFIRMED,
    }[record.delivery]
    return Ticket(
        ticket_id=record.ticket_id,
        target=record.target,
        owner=record.owner,
        accepted_at=record.accepted_at,
        prompt=record.prompt,
        outcome=TicketOutcome(record.outcome),
        source=ResultSource(record.source) if record.source else None,
        content=record.content,
        reason=record.reason,
        hint=record.hint,
        delivery=delivery,
        refusals=record.refusals,
        delivered_at=record.delivered_at,
        resolved_at=record.resolved_at,
        turn=record.turn,
        seq=record.seq,
        stored=True,
        counted=1 if record.outcome != "pending" else 0,
    )
