"""Lost-boundary repair: ``reconcile_lost_boundary(target, expected_turn_token)`` (M4 §8).

This is the only path in fleetd that rebuilds a result, and it prefers a visible stall to a
fabricated reply. The health monitor calls it for a token it saw BUSY at the prompt on two
snapshots; :class:`LostBoundaryRepair` then

1. takes a fresh look at the agent (``agent.get``, not a pane read) and records it on the turn's
   :class:`~fleetd.bridge.turns.BoundaryWatch`, beside what the poller and the monitor's fleet
   lists recorded (:meth:`LostBoundaryRepair.observe`);
2. judges the gates before any pane read with the pure :func:`~.repair_gates.judge_turn`;
3. if they hold, hands the turn to the resolver guard core under the repair policy
   (:class:`~fleetd.bridge.resolver.CompletionResolver`), which reads the pane once, refuses
   anything but a recognised, non-blank, new assistant block, and resolves the exact waiter
   while holding the target's reconciliation gate;
4. keeps the token's ledger (:func:`~.repair_gates.record`): which answer, how many attempts,
   whether one more may come and when.

Exactly one :class:`~.repair_gates.RepairResult` comes back. Only REPAIRED (through the resolver:
the session takes TURN_RECONCILED) and an ALREADY_RESOLVED of the same turn (the ticket ended but
the session still shows that turn BUSY: it takes TURN_COMPLETED) move a turn from BUSY to DONE.
Nothing here types into herdr, re-sends a prompt, rebuilds a brief or picks another target: the
only herdr calls are ``agent.get`` and one ``pane.read``. A refusal leaves the ticket pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from fleetd.bridge.completion import TurnCompletion
from fleetd.bridge.repair_gates import (
    BASELINE_DEADLINE,
    RETRYABLE,
    BaselineFacts,
    Refusal,
    RepairResult,
    TurnFacts,
    judge_turn,
)
from fleetd.bridge.resolver import CompletionResolver, Policy, Resolution
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.tasks import TaskBook
from fleetd.bridge.turn_machine import RepairAnswered
from fleetd.bridge.turns import RepairLedger, TurnState, TurnToken
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import HerdrError
from fleetd.herdr.control import AgentControl
from fleetd.herdr.model import AgentInfo
from fleetd.screens.extract import repair_supported
from fleetd.screens.kinds import parse_agent_kind

__all__ = ["LostBoundaryRepair", "RepairOutcome"]

_log = logging.getLogger("fleetd.bridge")


@dataclass(frozen=True, slots=True, kw_only=True)
class RepairOutcome:
    """The answer of one ``reconcile_lost_boundary`` call: codes, ids and counts, no pane text.

    ``attempts`` and ``retry_at`` are the token's ledger after this call (``retry_at`` ``None``:
    repair will not try this token again).
    """

    result: RepairResult
    detail: str
    target: str
    session_id: str | None = None
    ticket: str | None = None
    attempts: int = 0
    retry_at: datetime | None = None

    @property
    def reconstructed(self) -> bool:
        """True only when this call rebuilt the result from the pane."""
        return self.result is RepairResult.REPAIRED


#: Terminals of closed turns kept in the watch before a full sighting rebuilds it.
_SLACK = 64


@dataclass(slots=True)
class _Watch:
    """What the observation of open turns keeps between two lists: the member of each terminal
    sighted (session ids whose turn may since have closed) and the members matched by name."""

    terminals: dict[str, str] = field(default_factory=dict)
    unbound: set[str] = field(default_factory=set)


class LostBoundaryRepair:
    """``reconcile_lost_boundary`` and the observations its stable gate reads."""

    def __init__(
        self,
        *,
        control: AgentControl,
        roster: Roster,
        tasks: TaskBook,
        clock: Clock,
        settings: Callable[[], FleetdConfig],
        resolver: CompletionResolver,
        completion: TurnCompletion,
    ) -> None:
        self._control = control
        self._roster = roster
        self._tasks = tasks
        self._clock = clock
        self._settings = settings
        self._resolver = resolver
        self._completion = completion
        self._watch: _Watch | None = None  # None: the next list sights every open turn

    def observe(
        self, by_terminal: Mapping[str, AgentInfo], *, moved: Sequence[AgentInfo] | None = None
    ) -> None:
        """Record one successful fleet list (by terminal id) on every open turn; an absent agent
        breaks it.

        With ``moved`` (the agents that changed since the previous list, every other one being
        that list's very object at the same terminal), only the turns that could record
        something new are sighted: those whose agent moved, those opened or whose watch moved
        since the last list (:attr:`~fleetd.bridge.roster.OpenTurns.fresh`: the same sighting
        may move it again), and those whose member has no terminal (matched by name). Any other
        turn would record the very sighting it already holds, which changes nothing
        (:meth:`~fleetd.bridge.turn_machine.BoundaryWatch.observe`). Without ``moved``, every open
        turn is sighted."""
        turns = self._roster.inflight
        fresh, turns.fresh = turns.fresh, set()
        watch = self._watch
        if moved is None or watch is None or len(watch.terminals) > 2 * len(turns) + _SLACK:
            self._watch = self._sight(by_terminal, list(turns))
            return
        of_terminal = watch.terminals.get
        visit = fresh | watch.unbound
        for agent in moved:
            sid = of_terminal(agent.terminal_id)
            if sid is not None:
                visit.add(sid)
        seen = self._sight(by_terminal, visit)
        watch.terminals.update(seen.terminals)
        watch.unbound = seen.unbound

    def _sight(self, by_terminal: Mapping[str, AgentInfo], sids: Iterable[str]) -> _Watch:
        """Sight the open turns of ``sids`` in the list; the terminals sighted and the members
        matched by name."""
        by_name: dict[str, AgentInfo] | None = None  # built only for a member without a terminal
        session_of, agent_of = self._roster.sessions.get, by_terminal.get
        turns = self._roster.inflight
        turn_of = turns.get
        now = self._clock.now()
        result = _Watch()
        terminals, unbound = result.terminals, result.unbound
        for sid in sids:
            turn = turn_of(sid)
            session = session_of(sid) if turn is not None else None
            if turn is None or session is None:
                continue
            terminal = session.terminal_id
            if terminal is not None:
                terminals[terminal] = sid
                agent = agent_of(terminal)
            else:
                unbound.add(sid)  # matched by name: nothing says when its agent moves
                if by_name is None:
                    by_name = {a.name: a for a in by_terminal.values() if a.name is not None}
                agent = by_name.get(session.name)
            if agent is None:
                turns.sight(turn, None, None, now)
            else:
                turns.sight(turn, agent.agent_status, agent.state_change_seq, now)
        return result

    async def reconcile_lost_boundary(self, target: str, token_id: str) -> RepairOutcome:
        """Repair the lost boundary of ``token_id`` on ``target`` if every gate holds."""
        session = self._roster.find(target)
        token = self._roster.token(token_id)
        if session is None or token is None or token.session_id != session.session_id:
            unknown = Refusal(result=RepairResult.STALE_TURN, detail="token_unknown")
            return self._answer(target, session, token, None, unknown)
        turn = self._open(session, token)
        sid = session.session_id
        if turn is not None:
            await self._fresh_look(session, turn)
            session = self._roster.sessions.get(sid, session)  # as it is after the look
            turn = self._open(session, token)
        before = turn.repair.attempts if turn is not None else 0
        refusal = judge_turn(self._facts(session, token, turn))
        if refusal is None:
            assert turn is not None  # every gate held, so the token's turn is open
            before += 1  # this call is an attempt, whatever becomes of the turn
            outcome = await self._resolver.resolve_captured(
                session, turn, Policy.LOST_BOUNDARY_REPAIR
            )
            if outcome.resolution is Resolution.RESOLVED:
                refusal = Refusal(result=RepairResult.REPAIRED, detail="resolved")
            elif outcome.refusal is not None:
                refusal = outcome.refusal
            else:
                refusal = Refusal(result=RepairResult.RACE_LOST, detail="lost_at_resolution")
            session = self._roster.sessions.get(sid, session)  # as the resolution left it
        elif refusal.result is RepairResult.ALREADY_RESOLVED:
            self._close_same_turn(session, token)
        turn = self._open(session, token)
        return self._answer(target, session, token, turn, refusal, attempts=before)

    def _open(self, session: Session, token: TurnToken) -> TurnState | None:
        turn = self._roster.inflight.get(session.session_id)
        return turn if turn is not None and turn.token.token_id == token.token_id else None

    async def _fresh_look(self, session: Session, turn: TurnState) -> None:
        """One ``agent.get``: the snapshot the stable gate ends with (never a pane read)."""
        try:
            info = await self._control.get_agent(session.name)
        except HerdrError:  # missing or unreadable: not stable
            status, seq = None, None
        else:
            status, seq = info.agent_status, info.state_change_seq
        current = self._open(session, turn.token)
        if current is not None:
            self._roster.inflight.sight(current, status, seq, self._clock.now())

    def _facts(self, session: Session, token: TurnToken, turn: TurnState | None) -> TurnFacts:
        ticket = self._tasks.get(token.ticket_id)
        baseline = turn.baseline if turn is not None else None
        codex = self._settings().health.repair.codex
        return TurnFacts(
            token_known=True,
            token_open=turn is not None,
            ticket=ticket.outcome if ticket is not None else None,
            same_turn_busy=session.state is SessionState.BUSY and session.turn == token.turn,
            stable=turn is not None and turn.watch.stable,
            storing_reply=self._completion.storing(session.session_id),
            kind_enabled=repair_supported(parse_agent_kind(session.kind), codex=codex),
            baseline=(
                BaselineFacts(
                    capture=baseline.capture,
                    same_token=baseline.token_id == token.token_id,
                    late=turn is not None
                    and baseline.captured_at - turn.opened_at > BASELINE_DEADLINE,
                )
                if baseline is not None
                else None
            ),
            ledger=turn.repair if turn is not None else RepairLedger(),
            now=self._clock.now(),
            restored=turn is not None and turn.restored,
        )

    def _close_same_turn(self, session: Session, token: TurnToken) -> None:
        """The token's ticket ended but the session still shows that turn BUSY: finish it."""
        turn = self._roster.inflight.get(session.session_id)
        if turn is not None and turn.token.token_id != token.token_id:
            return  # another turn is open: the session is not on the token's turn
        held = self._roster.sessions.get(session.session_id)
        if held is None or held.state is not SessionState.BUSY or held.turn != token.turn:
            return
        now = self._clock.now()
        self._roster.inflight.close(session.session_id, "ticket_ended", now)
        self._roster.apply(session.session_id, SessionEvent.TURN_COMPLETED, now)

    def _answer(
        self,
        target: str,
        session: Session | None,
        token: TurnToken | None,
        turn: TurnState | None,
        answer: Refusal,
        *,
        attempts: int = 0,
    ) -> RepairOutcome:
        """Record an attempt on a still-open turn, log the answer, and return it."""
        retry_at = None
        if turn is not None and token is not None and session is not None:
            answered = RepairAnswered(
                answer.result.value,
                answer.detail,
                retryable=answer.result in RETRYABLE,
                race_lost=answer.result is RepairResult.RACE_LOST,
            )
            self._roster.inflight.step(token, answered, self._clock.now())
            turn = self._open(session, token)
            assert turn is not None  # a repair answer leaves its turn open
            attempts, retry_at = turn.repair.attempts, turn.repair.retry_at
        outcome = RepairOutcome(
            result=answer.result,
            detail=answer.detail,
            target=target,
            session_id=session.session_id if session is not None else None,
            ticket=token.ticket_id if token is not None else None,
            attempts=attempts,
            retry_at=retry_at,
        )
        _log.info(
            "lost boundary of %s on %s: %s (%s)%s",
            token.token_id if token is not None else "an unknown token",
            outcome.session_id or target,
            outcome.result.value,
            outcome.detail,
            "" if outcome.reconstructed else "; no reply was reconstructed, no task replayed",
        )
        return outcome
