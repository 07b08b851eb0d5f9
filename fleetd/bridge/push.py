"""Nudging leads that have uncollected inbox content, and the bounded idle-lead heartbeat.

A lead is nudged only while herdr shows it at its prompt (``idle`` or ``done``): never into a
``working`` or ``blocked`` lead. Each inbox head gets at most ``push.maxNudgesPerItem`` nudges, at
least :data:`NUDGE_SPACING` apart; when the cap is reached the loop stands down and records it, and
the health monitor judges what that means. The outcome of every decision is kept per lead as
structured evidence (:class:`PushOutcome`), never as log text.

Only what the lead can collect counts as waiting: an entry the inbox holds for a decode failure
(an unsupported version, an entry waiting for quarantine) is not the lead's backlog, so it never
earns a nudge, and the monitor never reads it as a lead neglecting its inbox.

When nothing waits for a lead and it sits at its prompt, the heartbeat may tell it what capacity
it has: per-profile live, cap, free and reclaimable counts — over every live member, from the
capacity rows placement reads, so a free slot shown is one placement grants and a profile whose
model is benched shows no free slot and says its model is down — plus at most three of its own
long-idle members. A heartbeat sequence is at most ``push.heartbeatMax`` beats
``push.heartbeatIntervalSeconds`` apart. Only capacity facts that differ from the last beat sent
(a fingerprint that ignores idle durations) and have held for a whole interval re-arm it, so a
static idle fleet cannot keep a lead busy and churn elsewhere in the fleet, which never settles,
cannot either; a re-armed sequence keeps the interval. Reply pushes come first: no heartbeat while
anything waits.
The heartbeat reports facts; it never spawns, stops or assigns anything.

A nudge or heartbeat whose ``agent.prompt`` answer may have come after herdr typed it (an unknown
code, an unreadable answer, a broken link: :mod:`~fleetd.bridge.prompt_policy` says *uncertain*)
counts as sent, exactly like a task's prompt: it is never typed again on the next pass, so the
caps hold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleetd.bridge.backlog import MemberBacklog, member_backlogs
from fleetd.bridge.prompt_policy import PromptOutcome, classify_prompt_error
from fleetd.bridge.view import BridgeView, health_settings
from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import ControlLinkError, FleetdError, HerdrError
from fleetd.health.capacity import CapacitySummary, capacity_summary
from fleetd.health.snapshot import FleetSnapshot, LiveView
from fleetd.herdr.control import AgentControl
from fleetd.inbox.outbox import LeadOutbox
from fleetd.inbox.port import ReplyInbox
from fleetd.inbox.records import InboxStats
from fleetd.metrics import Metrics

__all__ = ["NUDGE_SPACING", "PushLoop", "PushOutcome", "heartbeat_text", "nudge_text"]

_log = logging.getLogger("fleetd.bridge")

NUDGE_SPACING = timedelta(seconds=30)


@dataclass(slots=True, kw_only=True)
class PushOutcome:
    """What the push loop last knew and did for one lead (``depth``: what it can collect)."""

    lead: str
    depth: int = 0
    oldest_epoch_millis: int | None = None
    nudges_for_head: int = 0
    cap_reached_at: datetime | None = None
    last_nudge_at: datetime | None = None
    last_status: str | None = None
    last_error: str | None = None
    nudges_total: int = 0
    heartbeat_fingerprint: str | None = None  # the facts of the current sequence (last told)
    pending_fingerprint: str | None = None  # other facts seen since, and since when
    pending_since: datetime | None = None
    heartbeats_in_sequence: int = 0
    last_heartbeat_at: datetime | None = None


@dataclass(slots=True, kw_only=True)
class PushLoop:
    """One pass per interval over the configured leads.

    It reads the inbox's figures (``inbox``), flushes what the ``outbox`` holds first, and reads
    the members through the bridge's ``view``; herdr is asked only about leads.
    """

    control: AgentControl
    clock: Clock
    settings: Callable[[], FleetdConfig]
    metrics: Metrics
    inbox: ReplyInbox
    outbox: LeadOutbox
    view: BridgeView
    covering: dict[str, set[str]] = field(default_factory=dict)  # peer -> failed leads it covers
    outcomes: dict[str, PushOutcome] = field(default_factory=dict)
    _covers: int = field(default=0, init=False)  # covers armed so far
    _covered_at: dict[str, int] = field(default_factory=dict, init=False)  # peer -> its last one

    def cover(self, recipient: str, failed: str) -> None:
        """``recipient`` was handed an incident of ``failed``, a lead that cannot act: its next
        nudge names it. Forgotten once the recipient has collected everything."""
        self.covering.setdefault(recipient, set()).add(failed)
        self._covers += 1
        self._covered_at[recipient] = self._covers

    async def push_once(self) -> None:
        await self.outbox.flush()
        config = self.settings()
        cap = config.bridge.push.max_nudges_per_item
        # A cover armed after this point may belong to a record the reads below missed: an
        # empty inbox read then is no proof the recipient collected it.
        read_from = self._covers
        all_stats: dict[str, InboxStats] = {}
        for lead in config.leads:
            outcome = self.outcomes.setdefault(lead.name, PushOutcome(lead=lead.name))
            try:
                all_stats[lead.name] = await self.inbox.stats(lead.name)
            except FleetdError as exc:
                outcome.last_error = type(exc).__name__
        backlogs = member_backlogs(all_stats, self.view.roster.sessions.values())
        for lead in config.leads:
            stats = all_stats.get(lead.name)
            if stats is None:
                continue
            outcome = self.outcomes[lead.name]
            if stats.oldest_created_epoch_millis != outcome.oldest_epoch_millis:
                outcome.nudges_for_head = 0
                outcome.cap_reached_at = None
            outcome.depth = stats.actionable
            outcome.oldest_epoch_millis = stats.oldest_created_epoch_millis
            if outcome.depth == 0:
                if self._covered_at.get(lead.name, 0) <= read_from:
                    self.covering.pop(lead.name, None)
                await self._maybe_heartbeat(lead.name, lead.agent, outcome, backlogs)
                continue
            if outcome.nudges_for_head >= cap:
                continue
            await self._maybe_nudge(lead.name, lead.agent, outcome, cap)

    async def _maybe_heartbeat(
        self, lead: str, agent: str, outcome: PushOutcome, backlogs: dict[str, MemberBacklog]
    ) -> None:
        config = self.settings()
        push = config.bridge.push
        now = self.clock.now()
        live = self.view.roster.live()
        owned = [s for s in live if s.owner == lead]
        if not owned or push.heartbeat_max == 0:
            return
        summary = capacity_summary(
            FleetSnapshot(
                live=LiveView(list_ok=False),
                members=tuple(
                    self.view.member_view(s, backlog=backlogs.get(s.session_id)) for s in live
                ),
                config=health_settings(config),
                profiles=self.view.profile_inputs(now),
            ),
            now,
            owner=lead,
            orphans=self.view.orphans.members(),
        )
        # A sequence is the beats that tell the lead one set of capacity facts. Facts that differ
        # from the last beat sent re-arm a new sequence only once they have held for a whole
        # interval: churn elsewhere in the fleet (members spawned and stopped every few seconds)
        # never settles, so it re-arms nothing, and a static idle fleet cannot reset the cap.
        fingerprint = summary.fingerprint
        if fingerprint == outcome.heartbeat_fingerprint:
            outcome.pending_fingerprint = outcome.pending_since = None
        elif fingerprint != outcome.pending_fingerprint:
            outcome.pending_fingerprint, outcome.pending_since = fingerprint, now
        if (
            outcome.last_heartbeat_at is not None
            and now - outcome.last_heartbeat_at < push.heartbeat_interval
        ):
            return
        settled = (
            outcome.pending_since is not None
            and now - outcome.pending_since >= push.heartbeat_interval
        )
        fresh = outcome.heartbeat_fingerprint is None or settled
        if not fresh and outcome.heartbeats_in_sequence >= push.heartbeat_max:
            return
        if any(self.view.tasks.pending_for(s.session_id) for s in owned):
            return  # work is in flight: its replies will reach the lead, no heartbeat needed
        try:
            info = await self.control.get_agent(agent)
        except HerdrError as exc:
            outcome.last_error = exc.code
            return
        outcome.last_status = info.agent_status.value
        if not info.agent_status.at_prompt:
            return
        try:
            await self.control.prompt(agent, heartbeat_text(summary))
        except HerdrError as exc:
            outcome.last_error = exc.code
            if not _maybe_typed(exc):
                return
        outcome.last_heartbeat_at = now
        if fresh:
            outcome.heartbeat_fingerprint = fingerprint
            outcome.pending_fingerprint = outcome.pending_since = None
            outcome.heartbeats_in_sequence = 0
        outcome.heartbeats_in_sequence += 1

    async def _maybe_nudge(self, lead: str, agent: str, outcome: PushOutcome, cap: int) -> None:
        now = self.clock.now()
        if outcome.last_nudge_at is not None and now - outcome.last_nudge_at < NUDGE_SPACING:
            return
        try:
            info = await self.control.get_agent(agent)
        except HerdrError as exc:
            outcome.last_error = exc.code
            return
        outcome.last_status = info.agent_status.value
        if not info.agent_status.at_prompt:
            return
        text = nudge_text(lead, outcome.depth, sorted(self.covering.get(lead, ())))
        try:
            await self.control.prompt(agent, text)
        except HerdrError as exc:
            outcome.last_error = exc.code
            if not _maybe_typed(exc):
                return
        else:
            outcome.last_error = None
        outcome.last_nudge_at = now
        outcome.nudges_for_head += 1
        outcome.nudges_total += 1
        self.metrics.nudges_total.labels(lead=lead).inc()
        if outcome.nudges_for_head >= cap:
            outcome.cap_reached_at = now
            _log.warning("lead %s: inbox nudge cap reached with %d waiting", lead, outcome.depth)


def nudge_text(lead: str, depth: int, covering: list[str]) -> str:
    """The nudge: how much waits, for which failed leads it stands in, and the exact call."""
    text = f"fleetd: {depth} message(s) wait in your inbox."
    if covering:
        names = ", ".join(covering)
        text += (
            f" They include health incidents of lead {names}, which cannot act: "
            "you receive them as a healthy peer."
        )
    return text + f' Collect them with fleet_poll(target="{lead}").'


def _maybe_typed(exc: HerdrError) -> bool:
    """True when herdr may have typed the text before failing: it counts as sent."""
    link = isinstance(exc, ControlLinkError)
    return classify_prompt_error(exc.code, link=link) is PromptOutcome.UNCERTAIN


def heartbeat_text(summary: CapacitySummary) -> str:
    """The heartbeat a lead reads: capacity facts and the safe calls to act on them. A benched
    profile shows no free slot and says its model is down until when (fleet_spawn refuses it)."""
    rows = "; ".join(
        f"{r.profile} live {r.live}/{'unlimited' if r.max_load is None else r.max_load}, "
        f"free {'-' if r.free is None else r.free}"
        + (
            f" (model down until {r.benched_until.isoformat(timespec='minutes')})"
            if r.benched_until is not None
            else ""
        )
        + f", reclaimable {r.reclaimable}"
        + (f", orphaned {r.orphaned}" if r.orphaned else "")
        for r in summary.rows
    )
    idle = ", ".join(f"{m.name} ({m.idle_for_seconds // 60} min)" for m in summary.long_idle)
    text = f"fleetd: your members are idle. Capacity: {rows}."
    if idle:
        text += f" Long idle: {idle}."
    return text + " fleet_list() shows the fleet; fleet_stop(sessionId=...) releases a member."
