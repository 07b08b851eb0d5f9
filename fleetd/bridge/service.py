"""The bridge: leads delegate, members reply.

:class:`Bridge` composes the roster, the tickets and the turn machinery. Its own operations are the
ones that span several parts (``send``, ``spawn``, ``presence``, ``restore`` …); every other call
goes straight to the part that does the work, which the bridge holds as a public attribute, and
``Bridge`` forwards nothing. What the rest of fleetd reads goes through one read-only view,
``bridge.reads`` (a :class:`~fleetd.bridge.reads.BridgeReads`: ``session``, ``ticket``,
``pending_for`` …); nothing outside the bridge reaches into the roster or the ticket book. The
parts, each taking only what it uses:

* ``deliverer``, a :class:`~fleetd.bridge.delivery.Deliverer` — the poller step
  (``poll_once``): delivery, turn watching, fallback;
* ``replies``, :class:`~fleetd.bridge.replies.Replies` — a member's ``fleet_reply``, stored
  before it answers;
* ``outbox``, :class:`~fleetd.inbox.outbox.LeadOutbox` — records kept for a lead until its inbox
  takes them (``keep``, ``flush``), and a lead's ``fleet_poll`` (``drain``);
* ``lifecycle``, :class:`~fleetd.bridge.lifecycle.TargetLifecycle` — every terminal cause for a
  target, through the one idempotent target-wide failure operation (``fail_target_work``) and one
  release per session (``release``, ``release_all``, ``check_readiness``), and the commits a
  release would have to preserve (``measure_terminal_edges``);
* ``repair``, :class:`~fleetd.bridge.repair.LostBoundaryRepair` — the health monitor's one call,
  ``reconcile_lost_boundary`` (M4 §8), and the sightings of each list that gate it (``observe``);
* ``view``, :class:`~fleetd.bridge.view.BridgeView` — the fleet view's member rows and capacity;
* ``mutes``, :class:`~fleetd.bridge.mutes.MuteLog` — the fallback resolutions health counts;
* ``orphans``, :class:`~fleetd.bridge.orphans.OrphanBook` — members of an earlier run found in
  herdr (``check``, ``find``, ``stop``);
* inside: :class:`~fleetd.bridge.completion.TurnCompletion` (resolves the exact open turn once),
  :class:`~fleetd.bridge.resolver.CompletionResolver` (the resolver guard core, with the
  observed-boundary and lost-boundary-repair policies) and
  :func:`~fleetd.bridge.spawn.spawn_member`.

It talks to herdr through the :class:`~fleetd.herdr.control.AgentControl` port, hands records to
leads and drains their inboxes through the :class:`~fleetd.inbox.outbox.LeadOutbox`, and
provisions worktrees through the :class:`~fleetd.bridge.worktrees.Worktrees` port.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from pathlib import Path

from fleetd.bridge.adopt import RESTART_REASON, Restored, confirm, restore
from fleetd.bridge.answers import ReleaseResult
from fleetd.bridge.completion import TurnCompletion
from fleetd.bridge.delivery import Deliverer
from fleetd.bridge.durable import DurableState
from fleetd.bridge.lifecycle import TargetLifecycle
from fleetd.bridge.marks import mark_of
from fleetd.bridge.mutes import MuteEvent, MuteLog
from fleetd.bridge.orphans import OrphanBook
from fleetd.bridge.placement import NO_BENCH, ModelBench
from fleetd.bridge.reads import BridgeReads
from fleetd.bridge.release import ReleaseCause
from fleetd.bridge.repair import LostBoundaryRepair, RepairOutcome
from fleetd.bridge.replies import Replies
from fleetd.bridge.resolver import CompletionResolver
from fleetd.bridge.roster import Roster
from fleetd.bridge.sessions import Session, SessionEvent, SessionState
from fleetd.bridge.spawn import SpawnParts, SpawnRequest, reclaim_pane, spawn_member
from fleetd.bridge.tasks import Retention, TaskBook, Ticket
from fleetd.bridge.view import BridgeView
from fleetd.bridge.worktrees import Worktrees
from fleetd.clock import Clock, wait_event
from fleetd.config import FleetdConfig
from fleetd.errors import (
    ConflictError,
    HerdrError,
    InvalidArgumentsError,
    StateStoreError,
    UnavailableError,
)
from fleetd.herdr.control import AgentControl
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.registry import LeadInboxRegistry
from fleetd.metrics import Metrics
from fleetd.runs import Runs
from fleetd.state.facts import Snapshot
from fleetd.state.memory import MemoryStateStore

__all__ = ["Bridge", "MuteEvent", "RepairOutcome"]

_log = logging.getLogger("fleetd.bridge")

_FAILURES_KEPT = 256


class Bridge:
    """The message bus between leads and members."""

    def __init__(
        self,
        *,
        clock: Clock,
        control: AgentControl,
        inbox: ReplyInbox,
        worktrees: Worktrees,
        metrics: Metrics,
        settings: Callable[[], FleetdConfig],
        manifest_root: Path,
        lead_inboxes: LeadInboxRegistry,
        revoke: Callable[[str], None] = lambda _session_id: None,
        runs: Runs | None = None,
        bench: ModelBench = NO_BENCH,
        durable: DurableState | None = None,
    ) -> None:
        self.clock = clock
        self.control = control
        self.inbox = inbox
        self.worktrees = worktrees
        self.metrics = metrics
        self.settings = settings
        self.manifest_root = manifest_root
        self.lead_inboxes = lead_inboxes
        self.runs = runs or Runs()
        # what a restart needs is written here before the effects it causes (a fake by default)
        self.durable = durable or DurableState(MemoryStateStore())
        self.restored = Restored()
        # every write the fleet view shows touches the roster's record (bridge.reads.revision)
        self.roster = Roster(on_retire=self.durable.retired)
        self.roster.inflight.on_close = self.durable.turn_closed
        self.tasks = TaskBook(
            on_terminal=self._count_terminal,
            on_change=self.roster.touch,
            on_target=self.roster.touch,
            on_pruned=self.roster.pruned,
            run=self.runs.current,
            retention=self._retention,
            on_write=self.durable.ticket,
            on_forget=self.durable.forgotten,
        )
        self.mutes = MuteLog()
        self.outbox = LeadOutbox(lead_inboxes, inbox)
        self.stopping = asyncio.Event()  # set when fleetd is asked to stop: waiters let go
        self.teardown_failures: list[str] = []
        self.orphans = OrphanBook(
            control=control,
            clock=clock,
            manifest_root=manifest_root,
            run=self.runs.current,
            on_failure=self._note_failure,
            known=lambda session_id: self.roster.get(session_id) is not None,
        )
        self.lifecycle = TargetLifecycle(
            control=control,
            roster=self.roster,
            tasks=self.tasks,
            clock=clock,
            settings=settings,
            worktrees=worktrees,
            manifest_root=manifest_root,
            revoke=revoke,
            on_failure=self._note_failure,
            unclosed=lambda session: self.orphans.watch(mark_of(session, run=self.runs.current)),
            ahead=lambda session, cause: self.durable.releasing(session, cause.value),
        )
        self.completion = TurnCompletion(
            roster=self.roster, tasks=self.tasks, clock=clock, outbox=self.outbox
        )
        self.resolver = CompletionResolver(
            control=control,
            roster=self.roster,
            tasks=self.tasks,
            clock=clock,
            settings=settings,
            completion=self.completion,
        )
        self.deliverer = Deliverer(
            control=control,
            roster=self.roster,
            tasks=self.tasks,
            clock=clock,
            settings=settings,
            metrics=metrics,
            lifecycle=self.lifecycle,
            resolver=self.resolver,
            mutes=self.mutes,
            durable=self.durable,
            outbox=self.outbox,
        )
        self.repair = LostBoundaryRepair(
            control=control,
            roster=self.roster,
            tasks=self.tasks,
            clock=clock,
            settings=settings,
            resolver=self.resolver,
            completion=self.completion,
        )
        self.replies = Replies(
            roster=self.roster,
            tasks=self.tasks,
            clock=clock,
            outbox=self.outbox,
            completion=self.completion,
            typed=self.deliverer.typed,
        )
        self.view = BridgeView(
            roster=self.roster,
            tasks=self.tasks,
            orphans=self.orphans,
            settings=settings,
            bench=bench,
        )
        self._spawn_parts = SpawnParts(
            control=control,
            roster=self.roster,
            clock=clock,
            settings=settings,
            worktrees=worktrees,
            lifecycle=self.lifecycle,
            orphans=self.orphans,
            run=self.runs.current,
            bench=bench,
            free=self.free_slots,
            launching=lambda session: self.durable.member(session, launching=True),
            creating=self.durable.creating,
        )
        #: what the rest of fleetd reads of the bridge (nothing else reaches its tables)
        self.reads = BridgeReads(
            roster=self.roster,
            tasks=self.tasks,
            outbox=self.outbox,
            mutes=self.mutes,
            name_taken=self._spawn_parts.name_taken,
            releasing=self.lifecycle.releasing,
        )

    def free_slots(self) -> dict[str, int | None]:
        """Each profile's free slots now, from the capacity view (``None``: no cap)."""
        rows = self.view.capacity_view(now=self.clock.now())
        return {row.profile: row.free for row in rows}

    # ------------------------------------------------------------------ sends
    async def send(self, *, owner: str, target: str, prompt: str, wait: float | None) -> Ticket:
        """Accept a send; with ``wait`` > 0 wait that long for the result."""
        limit = self.settings().api.max_prompt_chars
        if not prompt.strip():
            raise InvalidArgumentsError("prompt is only whitespace", path="prompt", rule="blank")
        if len(prompt) > limit:
            raise InvalidArgumentsError(
                f"prompt is longer than api.maxPromptChars ({limit} characters)",
                path="prompt",
                rule="string_too_long",
            )
        session = self.reads.find_owned(owner, target)
        if session.session_id in self.roster.gates:
            raise ConflictError(f"session {session.session_id} is being released")
        queued = len(self.roster.queue(session.session_id))
        if queued >= self.settings().bridge.max_queued_sends:
            raise ConflictError(
                f"session {session.session_id} already has {queued} sends waiting "
                f"(bridge.maxQueuedSends); nothing was accepted",
                hint={
                    "queued": queued,
                    "retry": f'when fleet_status(sessionId="{session.session_id}") shows fewer '
                    "sends waiting, or send to another member",
                },
            )
        ticket = self.tasks.accept(
            target=session.session_id,
            owner=owner,
            prompt=prompt,
            now=self.clock.now(),
            nonce=secrets.token_hex(3),
        )
        self.roster.enqueue(session.session_id, ticket)
        waiting = wait is not None and wait > 0
        # a synchronous caller takes the result from the ticket, never also from the inbox: held
        # from the start, since a reply may come as soon as the prompt is typed
        self.tasks.held_for_caller(ticket, waiting)
        try:
            if session.state in (SessionState.READY, SessionState.DONE):
                # typed at once: the write ahead of the prompt (uncertain) stores the send too
                await self.deliverer.inject_next(session)
            if not ticket.stored:
                self._store_accepted(session, ticket)
            if waiting:
                await wait_event(self.clock, ticket.done_event, wait or 0, unless=self.stopping)
        finally:  # the caller stops waiting; the ticket as it stands is its answer
            self.tasks.held_for_caller(ticket, False)
        return ticket

    def _store_accepted(self, session: Session, ticket: Ticket) -> None:
        """Store a send that waits in its queue, prompt and all, before the lead hears of it; a
        send the store refuses is withdrawn (nothing accepted)."""
        try:
            self.durable.accepted(ticket)
        except StateStoreError as exc:
            self.roster.dequeue(session.session_id, ticket)
            self.tasks.cancel(ticket.ticket_id, reason="not_stored", now=self.clock.now())
            raise UnavailableError(
                "the state store cannot record the send right now; nothing was accepted",
                hint={"retry": "send the task again"},
            ) from exc
        self.tasks.stored(ticket)

    # ------------------------------------------------------------ presence
    def presence(self, session_id: str) -> None:
        """The member's first authenticated contact makes it READY."""
        session = self.roster.get(session_id)
        if session is None or not session.live or session.state is SessionState.FAILED:
            return
        first = not session.presence
        session = self.roster.apply(session_id, SessionEvent.PRESENCE, self.clock.now())
        if first and session.launched:
            self.durable.member(session)

    # ----------------------------------------------------------------- spawn
    async def spawn(
        self,
        request: SpawnRequest,
        *,
        mint_token: Callable[[str, str], str],
        base_url: str,
        session_root: Path,
    ) -> Session:
        """Start one member (see :func:`~fleetd.bridge.spawn.spawn_member`)."""

        def mint(session_id: str, name: str) -> str:
            token = mint_token(session_id, name)
            self.durable.token_minted(session_id, token)  # its hash, never the token
            return token

        session = await spawn_member(
            self._spawn_parts,
            request,
            mint_token=mint,
            base_url=base_url,
            session_root=session_root,
        )
        self.durable.member(session)  # herdr started it: a restart adopts it from here on
        return session

    # --------------------------------------------------------------- restart
    def restore(
        self, snapshot: Snapshot, *, adopt_token: Callable[[str, str, str], None]
    ) -> Restored:
        """Take back what a previous run stored (see :mod:`~fleetd.bridge.adopt`)."""
        for member in snapshot.members:
            self.durable.adopt_hash(
                member.session_id, member.token_hash, releasing=member.releasing
            )
        self.restored = restore(
            snapshot,
            roster=self.roster,
            tasks=self.tasks,
            adopt_token=adopt_token,
            now=self.clock.now(),
        )
        self.tasks.prune(self.clock.now())  # the store keeps only what the retention keeps
        return self.restored

    async def confirm_restored(self) -> None:
        """Match restored members against herdr's list once it answers; gone ones are released
        as GONE (their pending tickets failed once). Nothing to do once matched."""
        if not self.restored.unconfirmed:
            return
        try:
            agents = await self.control.list_agents()
        except HerdrError:
            return  # nothing is decided without a list; the next check tries again
        await confirm(
            self.restored,
            agents,
            roster=self.roster,
            gone=lambda session: self.lifecycle.target_not_found(session, "pane_not_found"),
            finish=self.lifecycle.release,
            roll_back=self._roll_back,
        )

    async def _roll_back(self, session: Session, before: frozenset[str] | None) -> ReleaseResult:
        """A spawn a restart cut short before its pane was stored: a pane herdr made for it is
        closed, its worktree goes, and health tells its lead it never became ready."""
        await reclaim_pane(self.control, session, before)
        session = self.roster.apply(session.session_id, SessionEvent.START_FAILED, self.clock.now())
        return await self.lifecycle.release(
            session, ReleaseCause.SPAWN_ROLLBACK, code=RESTART_REASON, loss=ReleaseCause.NEVER_READY
        )

    def _retention(self) -> Retention:
        config = self.settings().bridge
        return Retention(keep_for=config.ticket_retention, keep_count=config.tickets_kept)

    def _note_failure(self, what: str) -> None:
        self.teardown_failures.append(what)
        del self.teardown_failures[:-_FAILURES_KEPT]
        self.roster.touch()

    def _count_terminal(self, ticket: Ticket) -> None:
        self.tasks.counted_end(ticket)  # what the teardown invariant checks: one count per ticket
        self.metrics.tickets_total.labels(
            outcome=ticket.outcome.value,
            source=ticket.source.value if ticket.source else "none",
        ).inc()
