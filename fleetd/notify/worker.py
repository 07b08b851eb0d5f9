"""``SinkWorker``: the delivery pass that takes outbox rows from the journal to the sink.

One path for every destination kind: the request's shape and the statuses that mean "fleetd's
bug" are the kind's (:mod:`fleetd.notify.kinds`); everything below is shared.

The escalation shell (:mod:`fleetd.runtime.escalation`) records an incident change and its
outbound events in one journal transaction and sends nothing; the worker only delivers. Which
events exist — ``open``, reminders, ``resolved``, cancellations and re-arms after a config change
or a replay — is :mod:`fleetd.notify.core.policy`'s decision, carried out by that shell just before
each pass, in the same ``webhook`` loop, which calls :meth:`SinkWorker.step` every few seconds.
One pass:

1. **Target.** ``target()`` gives the resolved webhook (``None``: notifications are disabled, so
   the pass claims nothing — pending events simply wait for re-enabling).
2. **Claim and send.** Due attempts are leased to ``owner`` (the journal guarantees one
   outstanding attempt per event and no attempt leased twice). Incidents are sent concurrently,
   the events of one incident in revision order. Each attempt is one failover sweep over the
   receivers (:class:`~fleetd.notify.receivers.Receivers`: lowest-index enabled receiver whose
   breaker admits first, the next one after a failover-class failure or a 410, which disables
   its receiver until a new target generation or a replay); each dial re-signs the stored
   body at the current time under the event's idempotency key (``webhook-id`` =
   ``Idempotency-Key`` = ``eventId``) and is bounded by ``requestTimeoutMs``. The attempt ends
   as **complete**, **reschedule** (the next attempt at
   :func:`~fleetd.notify.core.failover.after_sweep`'s
   time, drawn with ``draw()``) or **fail** (permanent, naming the target). An outcome is
   recorded only while the lease holds; a lease too short for another request is given back
   unsent, and so is an attempt that every breaker refused. A delivery is recorded even when
   the event was cancelled while in flight (the person was told), and ``delivered`` is called
   with the incident id so the policy can owe that person the resolution.
3. **Breakers.** One per receiver counts blind failures across events. While every receiver's
   breaker is open, passes claim nothing until a cooldown lets exactly one probe through; while
   none is closed, a pass claims one event (the probe). The target is taken anew each pass: a
   reload that changes the list swaps it between passes (a repointed receiver starts afresh).
4. **Health and metrics.** :attr:`SinkWorker.health` (:mod:`fleetd.notify.sink_status`) and the
   §10.6 series: attempts by event and outcome, queue depth, last success, capability.

A journal failure never escapes a pass: it is logged, the pass ends early, the status says
``journal_failing``, and the next pass is the retry (an unrecorded outcome's lease expires and
the attempt is sent again: at least once, deduplicated by the receiver).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, TypeVar

from fleetd.clock import Clock
from fleetd.errors import ConfigError, JournalError
from fleetd.journal.port import DEFAULT_CLAIM_LIMIT, Journal
from fleetd.journal.values import Claim
from fleetd.metrics import Metrics
from fleetd.notify.core.failover import after_sweep
from fleetd.notify.core.retry import OutcomeReason, PostResult, RetryDecision, Verdict, classify
from fleetd.notify.http import WebhookSender
from fleetd.notify.kinds import build_request, our_bug
from fleetd.notify.receivers import ReceiverReport, Receivers
from fleetd.notify.request import stored_event
from fleetd.notify.sink import SinkTarget
from fleetd.notify.sink_status import SinkFacts, SinkHealth, judge
from fleetd.resilience.breaker import BreakerPolicy

__all__ = ["LEASE_MARGIN", "PAYLOAD_REFUSED", "PassReport", "SinkWorker"]

_log = logging.getLogger("fleetd.notify")

T = TypeVar("T")

LEASE_MARGIN: Final = timedelta(seconds=30)
"""A claim's lease is one request limit per receiver, one more, and this: time for a sweep over
every receiver and for the events of one incident."""
PAYLOAD_REFUSED: Final = "payload_refused"
"""The outcome of an event whose stored payload is not a valid v1 event: never sent."""


def _nobody(_incident_id: str) -> None:
    return None


@dataclass(slots=True, kw_only=True)
class PassReport:
    """What one pass did (tests, the benchmark and debug logs read it)."""

    claimed: int = 0
    delivered: int = 0
    retried: int = 0
    failed: int = 0
    released: int = 0


class SinkWorker:
    """Delivers the journal's outbound events to the configured webhook, one pass per step."""

    def __init__(
        self,
        *,
        journal: Journal,
        target: Callable[[], SinkTarget | None],
        sender: WebhookSender,
        clock: Clock,
        draw: Callable[[], float],
        metrics: Metrics,
        owner: str,
        settled: Callable[[str], None] = _nobody,
        limit: int = DEFAULT_CLAIM_LIMIT,
        breaker_policy: BreakerPolicy | None = None,
    ) -> None:
        self._journal = journal
        self._target = target
        self._sender = sender
        self._clock = clock
        self._draw = draw
        self._metrics = metrics
        self._owner = owner
        self._settled = settled
        self._limit = limit
        self._policy = breaker_policy or BreakerPolicy()
        self._receivers: Receivers | None = None  # built from the first target
        self._generation: str | None = None
        self._journal_ok = True
        self._failures = 0
        self._permanent = False
        self._last_outcome: OutcomeReason | None = None
        self._last_attempt_at: datetime | None = None
        self._last_delivered_at: datetime | None = None
        self._health = SinkHealth()

    @property
    def health(self) -> SinkHealth:
        """The sink's status after the last pass (``disabled`` before the first)."""
        return self._health

    def receivers(self) -> ReceiverReport | None:
        """The receivers' breakers and health now (``None`` until a target was resolved, and
        while notifications are disabled)."""
        receivers = self._receivers
        return None if receivers is None else receivers.report(self._clock.now())

    def enable_receivers(self) -> int:
        """Re-enable the receivers a 410 disabled (an operator replayed an incident); how many."""
        receivers = self._receivers
        return 0 if receivers is None else receivers.enable()

    async def step(self, now: datetime | None = None) -> PassReport:
        """One delivery pass at ``now`` (default: the clock's time); see the module docstring."""
        now = now or self._clock.now()
        report = PassReport()
        self._journal_ok = True
        resolved = True
        try:
            target = self._target()
        except ConfigError as exc:
            _log.warning("notification target unavailable: %s", exc.key)
            target, resolved = None, False
        if target is not None:
            await self._deliver(target, now, report)
        else:
            self._generation = None
            if resolved:  # disabled: re-enabling starts every receiver afresh
                self._receivers = None
        stats = await self._call(self._journal.stats())
        if stats is not None:
            self._metrics.notification_queue_depth.set(stats.queue_depth)
            last = stats.last_delivered_at
            self._metrics.notification_last_success_seconds.set(last.timestamp() if last else 0)
        facts = SinkFacts(
            enabled=target is not None or not resolved,
            resolved=resolved,
            journal_ok=self._journal_ok,
            receivers=() if self._receivers is None else self._receivers.states(now),
            disabled=frozenset() if self._receivers is None else self._receivers.disabled,
            consecutive_failures=self._failures,
            permanent_since_delivery=self._permanent,
        )
        self._health = judge(
            self._health,
            facts,
            now=now,
            last_outcome=self._last_outcome,
            last_attempt_at=self._last_attempt_at,
            last_delivered_at=self._last_delivered_at,
        )
        return report

    async def _deliver(self, target: SinkTarget, now: datetime, report: PassReport) -> None:
        receivers = self._receivers
        if receivers is None:
            receivers = self._receivers = Receivers(
                target.urls, clock=self._clock, policy=self._policy, kind=target.kind.value
            )
        else:
            receivers.repoint(target.urls)  # between passes: no attempt is in flight
            receivers.kind = target.kind.value
        if target.generation != self._generation:  # a new list: earlier refusals are not its own
            self._generation = target.generation
            self._permanent = False
            receivers.enable()  # a new target generation: receivers a 410 disabled are back
        if not receivers.admits(now):
            return
        limit = self._limit if receivers.any_closed(now) else 1
        lease = (len(target.urls) + 1) * target.limit + LEASE_MARGIN
        claims = await self._call(
            self._journal.claim_due(self._owner, now=now, lease=lease, limit=limit)
        )
        if not claims:
            return
        report.claimed = len(claims)
        by_incident: dict[str, list[Claim]] = {}
        for claim in sorted(claims, key=lambda c: (c.incident_id, c.revision)):
            by_incident.setdefault(claim.incident_id, []).append(claim)
        await asyncio.gather(
            *(
                self._send_in_order(group, target, receivers, report)
                for group in by_incident.values()
            )
        )

    async def _send_in_order(
        self, claims: list[Claim], target: SinkTarget, receivers: Receivers, report: PassReport
    ) -> None:
        for claim in claims:
            await self._send(claim, target, receivers, report)

    async def _send(
        self, claim: Claim, target: SinkTarget, receivers: Receivers, report: PassReport
    ) -> None:
        try:
            event = stored_event(
                claim.payload,
                incident_id=claim.incident_id,
                event_type=claim.type,
                revision=claim.revision,
                event_id=claim.idempotency_key,
            )
        except ValueError:
            _log.error(
                "event %s of incident %s has no valid payload", claim.revision, claim.incident_id
            )
            self._count(claim, PAYLOAD_REFUSED)
            refused = self._journal.fail(
                claim, now=self._clock.now(), failure=PAYLOAD_REFUSED, sink=target.generation
            )
            if await self._call(refused):
                report.failed += 1
            return

        async def dial(index: int, url: str) -> PostResult:
            request = build_request(
                event,
                kind=target.kind,
                url=url,
                now=self._clock.now(),
                secret=target.secret,
                routing_key=target.routing_key,
            )
            return await self._sender.send(request, limit=target.limit)

        # No dial may outlive the lease: the last one starts a request limit before it ends.
        swept = await receivers.sweep(dial, deadline=claim.lease_expires_at - target.limit)
        done = self._clock.now()
        outcome = swept.last
        if outcome is None:  # the lease is too short, or every breaker refused: given back
            if await self._call(self._journal.release(claim, now=done)):
                report.released += 1
            return
        draw = self._draw() if classify(outcome) is Verdict.RETRY else 0.0
        decision = after_sweep(swept, failures=claim.attempt, draw=draw, now=done)
        assert decision is not None
        if decision.verdict is Verdict.PERMANENT and our_bug(target.kind, outcome.status):
            decision = RetryDecision(verdict=Verdict.PERMANENT, reason=OutcomeReason.PAYLOAD_BUG)
            _log.error(
                "the %s receiver refused event %s of incident %s as malformed (HTTP %s): a "
                "fleetd bug, not the receiver's fault; the event is not sent again",
                target.kind.value,
                claim.revision,
                claim.incident_id,
                outcome.status,
            )
        self._count(claim, decision.reason.value)
        self._last_outcome, self._last_attempt_at = decision.reason, done
        if decision.verdict is Verdict.DELIVERED:
            self._failures, self._permanent, self._last_delivered_at = 0, False, done
            await self._delivered(claim, done, outcome.status, report)
            return
        self._failures += 1
        if decision.verdict is Verdict.RETRY:
            assert decision.retry_at is not None
            rescheduled = self._journal.reschedule(
                claim,
                now=done,
                due_at=decision.retry_at,
                failure=decision.reason.value,
                http_status=outcome.status,
            )
            if await self._call(rescheduled):
                report.retried += 1
            return
        self._permanent = True
        if decision.reason is not OutcomeReason.PAYLOAD_BUG:  # logged above, at ERROR
            self._log_refusal(target.kind.value, claim, swept.receiver, decision.reason)
        failed = self._journal.fail(
            claim,
            now=done,
            failure=decision.reason.value,
            http_status=outcome.status,
            sink=target.generation,
        )
        if await self._call(failed):
            report.failed += 1
        self._settled(claim.incident_id)  # refused for good: a doubt the plan counted on ended

    async def _delivered(
        self, claim: Claim, now: datetime, status: int | None, report: PassReport
    ) -> None:
        if await self._call(self._journal.complete(claim, now=now, http_status=status)):
            report.delivered += 1
            self._settled(claim.incident_id)

    @staticmethod
    def _log_refusal(kind: str, claim: Claim, receiver: int | None, reason: OutcomeReason) -> None:
        _log.warning(
            "%s receiver %s refused event %s of incident %s permanently (%s); it waits for "
            "a config change or a replay",
            kind,
            receiver,
            claim.revision,
            claim.incident_id,
            reason.value,
        )

    def _count(self, claim: Claim, outcome: str) -> None:
        self._metrics.notifications_total.labels(event=claim.type.value, outcome=outcome).inc()

    async def _call(self, call: Awaitable[T]) -> T | None:
        """The journal's answer, or ``None`` (the pass carries on). The outage is reported once,
        where the journal is observed (:class:`~fleetd.journal.watch.JournalWatch`); a pass
        notes each failure at DEBUG only."""
        try:
            return await call
        except JournalError as exc:
            self._journal_ok = False
            _log.debug("notification journal failed: %s: %s", exc.operation, exc.reason)
            return None
