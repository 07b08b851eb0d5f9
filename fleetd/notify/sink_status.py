"""Is the human sink working? :class:`SinkHealth`, judged after every delivery pass.

The delivery worker keeps a few facts (its mode, failures since the last delivery, each
receiver's breaker, whether the journal answered) and :func:`judge` turns them into one status a
coverage surface can show without reading anything else:

=========  ==================  =====================================================================
status     reason              when
=========  ==================  =====================================================================
disabled   —                   ``health.notifications.mode`` is ``disabled``: nothing is sent
degraded   sink_unresolved     webhook mode, but the target cannot be resolved from environment
degraded   journal_failing     the journal failed during the pass: retries and dedupe are at risk
degraded   receivers_disabled  every receiver answered 410 Gone and is disabled: nothing is sent
                               until the receivers change (URL, secret, kind) or a replay. One
                               disabled while another is enabled is not degraded: it fails over
degraded   all_receivers_down  no enabled receiver's breaker is closed: blind failures opened
                               every one (with one receiver, its breaker); nothing is sent until
                               a cooldown lets a probe through and the probe is answered. One
                               receiver down while another's breaker is closed is not degraded
degraded   attempts_failing    the last :data:`FAILING_AFTER` or more attempts all failed
degraded   permanent_failure   the target refused an event permanently (a 4xx) since the last
                               delivery; it waits for a config change or an operator's replay
ok         —                   otherwise
=========  ==================  =====================================================================

The first matching row wins. Reasons are bounded codes, safe for any surface and for metric
labels; nothing here holds a URL, a status text or an exception message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from fleetd.notify.core.retry import OutcomeReason
from fleetd.resilience.breaker import BreakerState

__all__ = ["FAILING_AFTER", "SinkFacts", "SinkHealth", "SinkReason", "SinkStatus", "judge"]

FAILING_AFTER: Final = 3
"""Failed attempts in a row (no delivery between) that make the sink ``attempts_failing``."""


class SinkStatus(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    DISABLED = "disabled"


class SinkReason(StrEnum):
    SINK_UNRESOLVED = "sink_unresolved"
    JOURNAL_FAILING = "journal_failing"
    RECEIVERS_DISABLED = "receivers_disabled"
    ALL_RECEIVERS_DOWN = "all_receivers_down"
    ATTEMPTS_FAILING = "attempts_failing"
    PERMANENT_FAILURE = "permanent_failure"


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkFacts:
    """What the worker knows after a pass."""

    enabled: bool
    resolved: bool = True
    journal_ok: bool = True
    receivers: tuple[BreakerState, ...] = ()  # each receiver's breaker, in list order
    disabled: frozenset[int] = frozenset()  # the receivers a 410 disabled, by index
    consecutive_failures: int = 0
    permanent_since_delivery: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkHealth:
    """The sink's status, why it is not ``ok``, and since when it has been so (``since`` is the
    first pass with this status and reason). ``last_outcome`` is the last attempt's bounded
    outcome; times are UTC-aware."""

    status: SinkStatus = SinkStatus.DISABLED
    reason: SinkReason | None = None
    since: datetime | None = None
    consecutive_failures: int = 0
    last_outcome: OutcomeReason | None = None
    last_attempt_at: datetime | None = None
    last_delivered_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.status is SinkStatus.OK

    @property
    def mode(self) -> str:
        """The notification mode the status stands for (a metric label)."""
        return "disabled" if self.status is SinkStatus.DISABLED else "webhook"


def _all_disabled(facts: SinkFacts) -> bool:
    return bool(facts.receivers) and len(facts.disabled) >= len(facts.receivers)


def _all_down(facts: SinkFacts) -> bool:
    enabled = [s for i, s in enumerate(facts.receivers) if i not in facts.disabled]
    return bool(enabled) and all(state is not BreakerState.CLOSED for state in enabled)


def _verdict(facts: SinkFacts) -> tuple[SinkStatus, SinkReason | None]:
    if not facts.enabled:
        return SinkStatus.DISABLED, None
    rows = (
        (not facts.resolved, SinkReason.SINK_UNRESOLVED),
        (not facts.journal_ok, SinkReason.JOURNAL_FAILING),
        (_all_disabled(facts), SinkReason.RECEIVERS_DISABLED),
        (_all_down(facts), SinkReason.ALL_RECEIVERS_DOWN),
        (facts.consecutive_failures >= FAILING_AFTER, SinkReason.ATTEMPTS_FAILING),
        (facts.permanent_since_delivery, SinkReason.PERMANENT_FAILURE),
    )
    for matches, reason in rows:
        if matches:
            return SinkStatus.DEGRADED, reason
    return SinkStatus.OK, None


def judge(
    previous: SinkHealth,
    facts: SinkFacts,
    *,
    now: datetime,
    last_outcome: OutcomeReason | None,
    last_attempt_at: datetime | None,
    last_delivered_at: datetime | None,
) -> SinkHealth:
    """The health after a pass at ``now``; ``since`` carries over while status and reason stay."""
    status, reason = _verdict(facts)
    unchanged = (status, reason) == (previous.status, previous.reason)
    return SinkHealth(
        status=status,
        reason=reason,
        since=previous.since if unchanged and previous.since is not None else now,
        consecutive_failures=facts.consecutive_failures,
        last_outcome=last_outcome,
        last_attempt_at=last_attempt_at,
        last_delivered_at=last_delivered_at,
    )
