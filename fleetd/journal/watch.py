"""Is the journal working? :class:`JournalHealth`, kept by :class:`JournalWatch`.

M4 §10.3: a journal failure never stops detection, but notification coverage becomes degraded.
:class:`JournalWatch` runs around every call of the journal adapter (its one chokepoint, see
:mod:`fleetd.observe`): a call that raises
:class:`~fleetd.errors.JournalError` marks the journal degraded, with the failed operation and its
bounded reason (``"record: disk_full"``), and re-raises for the caller to carry on; the next call
that succeeds marks it ok again. A refusal (:class:`~fleetd.errors.JournalRefusedError`: a
value out of bounds, an open key another instance recorded first) is an answer, not an outage.
Surfaces (``fleet_list.healthCoverage``, ``/healthz``, metrics) read :attr:`JournalWatch.health`.
Nothing here retries: the next tick or delivery pass is the retry.

It is also where a journal outage is reported: one WARNING when the first call fails, one INFO
when a call succeeds again, whatever the number of calls in between (the delivery pass alone makes
several a second), and the series ``fleetd_journal_up`` (0 during an outage) and
``fleetd_journal_operation_seconds`` (by port method, every label present from the start).
Callers log a journal failure at DEBUG at most.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from fleetd.clock import Clock
from fleetd.errors import JournalError, JournalRefusedError
from fleetd.journal.port import Journal
from fleetd.metrics import Metrics

if TYPE_CHECKING:
    from fleetd.observe import Around

__all__ = ["OPERATIONS", "JournalHealth", "JournalStatus", "JournalWatch", "watch_journal"]

T = TypeVar("T")

_log = logging.getLogger("fleetd.journal")

OPERATIONS = (
    "record",
    "settle",
    "get",
    "recent",
    "load_open",
    "claim_due",
    "complete",
    "reschedule",
    "fail",
    "release",
    "stats",
    "purge",
    "renew_instance",
    "instances",
    "instance_summaries",
)
"""The port's operations, the ``operation`` label of ``fleetd_journal_operation_seconds``."""


class JournalStatus(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalHealth:
    """``ok``, or ``degraded`` since ``since`` for ``reason`` after ``failures`` failed calls in a
    row. ``reason`` is ``"<operation>: <reason>"`` in bounded words, safe for any surface."""

    status: JournalStatus = JournalStatus.OK
    reason: str | None = None
    since: datetime | None = None
    failures: int = 0

    @property
    def ok(self) -> bool:
        return self.status is JournalStatus.OK


class JournalWatch:
    """The journal's observer: an :class:`~fleetd.observe.Around` given to the adapter's
    chokepoint (``journal.observe(watch)``) that keeps :class:`JournalHealth`, the outage log
    lines and the journal series; see the module docstring."""

    def __init__(self, *, clock: Clock, metrics: Metrics | None = None) -> None:
        self._clock = clock
        self._metrics = metrics
        self._health = JournalHealth()
        if metrics is not None:
            metrics.journal_up.set(1)
            for operation in OPERATIONS:
                metrics.journal_operation_seconds.labels(operation=operation)

    @property
    def health(self) -> JournalHealth:
        return self._health

    async def __call__(self, method: str, call: Awaitable[T], /) -> T:
        started = self._clock.monotonic()
        try:
            result = await call
        except JournalRefusedError:
            # the journal answered: it refused this record (a bad value, or another instance
            # recorded the same open key first), which is no outage
            self._answered(method, started)
            raise
        except JournalError as exc:
            self._took(method, started)
            previous = self._health
            reason = f"{exc.operation}: {exc.reason}"
            if previous.ok:
                _log.warning(
                    "incident journal failing (%s): detection goes on, notification coverage "
                    "is degraded until it answers",
                    reason,
                )
                self._up(0)
            self._health = JournalHealth(
                status=JournalStatus.DEGRADED,
                reason=reason,
                since=previous.since if not previous.ok else self._clock.now(),
                failures=previous.failures + 1,
            )
            raise
        self._answered(method, started)
        return result

    def _answered(self, method: str, started: float) -> None:
        self._took(method, started)
        failed = self._health
        if not failed.ok:
            self._health = JournalHealth()
            self._up(1)
            down = (self._clock.now() - failed.since).total_seconds() if failed.since else 0.0
            _log.info(
                "incident journal answers again after %d failed calls in %.0f s (last: %s)",
                failed.failures,
                down,
                failed.reason,
            )

    def _took(self, operation: str, started: float) -> None:
        if self._metrics is not None and operation in OPERATIONS:
            elapsed = max(0.0, self._clock.monotonic() - started)
            self._metrics.journal_operation_seconds.labels(operation=operation).observe(elapsed)

    def _up(self, value: int) -> None:
        if self._metrics is not None:
            self._metrics.journal_up.set(value)


if TYPE_CHECKING:
    _observes: type[Around] = JournalWatch  # mypy checks the class against the protocol


def watch_journal(
    journal: Journal, *, clock: Clock, metrics: Metrics | None = None
) -> JournalWatch:
    """Put a new :class:`JournalWatch` at ``journal``'s chokepoint and return it."""
    watch = JournalWatch(clock=clock, metrics=metrics)
    journal.observe(watch)
    return watch
