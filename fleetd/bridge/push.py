"""Nudging leads that have uncollected inbox content.

A lead is nudged only while herdr shows it at its prompt (``idle`` or ``done``): never into a
``working`` or ``blocked`` lead. Each inbox head gets at most ``push.maxNudgesPerItem`` nudges, at
least :data:`NUDGE_SPACING` apart; when the cap is reached the loop stands down and records it, and
the health monitor judges what that means. The outcome of every decision is kept per lead as
structured evidence (:class:`PushOutcome`), never as log text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fleetd.errors import FleetdError, HerdrError
from fleetd.herdr.model import AgentStatus

if TYPE_CHECKING:
    from fleetd.bridge.service import Bridge

__all__ = ["NUDGE_SPACING", "PushLoop", "PushOutcome"]

_log = logging.getLogger("fleetd.bridge")

NUDGE_SPACING = timedelta(seconds=30)
_AT_PROMPT = frozenset({AgentStatus.IDLE, AgentStatus.DONE})


@dataclass(slots=True, kw_only=True)
class PushOutcome:
    """What the push loop last knew and did for one lead."""

    lead: str
    depth: int = 0
    oldest_epoch_millis: int | None = None
    nudges_for_head: int = 0
    cap_reached_at: datetime | None = None
    last_nudge_at: datetime | None = None
    last_status: str | None = None
    last_error: str | None = None
    nudges_total: int = 0


@dataclass(slots=True)
class PushLoop:
    """One pass per interval over the configured leads."""

    bridge: Bridge
    outcomes: dict[str, PushOutcome] = field(default_factory=dict)

    async def push_once(self) -> None:
        await self.bridge.flush_unpublished()
        config = self.bridge.settings()
        cap = config.bridge.push.max_nudges_per_item
        for lead in config.leads:
            outcome = self.outcomes.setdefault(lead.name, PushOutcome(lead=lead.name))
            try:
                stats = await self.bridge.inbox.stats(lead.name)
            except FleetdError as exc:
                outcome.last_error = type(exc).__name__
                continue
            if stats.oldest_created_epoch_millis != outcome.oldest_epoch_millis:
                outcome.nudges_for_head = 0
                outcome.cap_reached_at = None
            outcome.depth = stats.depth
            outcome.oldest_epoch_millis = stats.oldest_created_epoch_millis
            if stats.depth == 0 or outcome.nudges_for_head >= cap:
                continue
            await self._maybe_nudge(lead.name, lead.agent, outcome, cap)

    async def _maybe_nudge(self, lead: str, agent: str, outcome: PushOutcome, cap: int) -> None:
        now = self.bridge.clock.now()
        if outcome.last_nudge_at is not None and now - outcome.last_nudge_at < NUDGE_SPACING:
            return
        try:
            info = await self.bridge.control.get_agent(agent)
        except HerdrError as exc:
            outcome.last_error = exc.code
            return
        outcome.last_status = info.agent_status.value
        if info.agent_status not in _AT_PROMPT:
            return
        text = (
            f"fleetd: {outcome.depth} message(s) wait in your inbox. "
            f'Collect them with fleet_poll(target="{lead}").'
        )
        try:
            await self.bridge.control.prompt(agent, text)
        except HerdrError as exc:
            outcome.last_error = exc.code
            return
        outcome.last_error = None
        outcome.last_nudge_at = now
        outcome.nudges_for_head += 1
        outcome.nudges_total += 1
        self.bridge.metrics.nudges_total.labels(lead=lead).inc()
        if outcome.nudges_for_head >= cap:
            outcome.cap_reached_at = now
            _log.warning("lead %s: inbox nudge cap reached with %d waiting", lead, outcome.depth)
