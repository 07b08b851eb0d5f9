"""Decode failures: one deduplicated, operator-visible record per bad inbox entry (M4 §7.2).

An entry that cannot be decoded must be seen by an operator without its content ever being shown.
Each failure therefore yields, once per entry: a redacted WARN on the ``fleetd.inbox`` logger, a
call of the injected ``on_decode_failure`` hook (the composition root counts it as a metric), and a
:class:`DecodeFailure` summary kept for ``fleet_list``. The health monitor reads the summaries
each tick (:meth:`FailureLog.summaries`); its pure core opens an ``INBOX_DECODE_FAILED`` incident
per key and reason and sends the owning lead a typed, redacted ``health`` record
(:mod:`fleetd.health.inboxes`).

"Once per entry" matters for unsupported versions: such an entry stays on its queue and comes back
after every reconnect, but it is one failure, not one per redelivery. An entry is identified by
its key, its AMQP message id and a digest of its body; the body itself is never kept or logged.
A later change of disposition (a quarantine copy that finally succeeds) updates the summary and
logs again, without calling the hook a second time.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from fleetd.clock import Clock
from fleetd.inbox.codec import DecodeReason, Invalid, UnsupportedVersion, safe_log_id

__all__ = ["DecodeFailure", "DecodeFailureHook", "Disposition", "FailureLog"]

logger = logging.getLogger("fleetd.inbox")


class Disposition(StrEnum):
    """Where a bad entry is now."""

    QUARANTINED = "quarantined"
    """Copied to ``agent.<key>.inbox.quarantine`` (confirmed), then acknowledged."""
    QUARANTINE_PENDING = "quarantine_pending"
    """The quarantine copy failed; the original stays unacknowledged and the copy is retried."""
    HELD = "held"
    """Unsupported schema version: left unacknowledged on its original queue for a newer build."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeFailure:
    """A redacted summary of one bad entry: ids, reason and counts, never content."""

    key: str
    reason: DecodeReason
    disposition: Disposition
    message_id: str
    version: int | None
    detail: str
    first_seen_epoch_millis: int
    last_seen_epoch_millis: int
    occurrences: int


DecodeFailureHook = Callable[[DecodeFailure], None]


class FailureLog:
    """Deduplicates decode failures, logs them redacted and calls the hook once per entry."""

    def __init__(
        self, *, clock: Clock, on_decode_failure: DecodeFailureHook | None, capacity: int = 256
    ) -> None:
        self._clock = clock
        self._hook = on_decode_failure
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str, str | None], DecodeFailure] = OrderedDict()

    def report(
        self,
        *,
        key: str,
        outcome: Invalid | UnsupportedVersion,
        message_id: str | None,
        digest: str,
        disposition: Disposition,
    ) -> DecodeFailure:
        """Record one sighting of a bad entry and return its current summary."""
        now = int(self._clock.now().timestamp() * 1000)
        identity = (key, digest, message_id)
        known = self._entries.get(identity)
        if known is not None:
            failure = replace(
                known,
                disposition=disposition,
                last_seen_epoch_millis=now,
                occurrences=known.occurrences + 1,
            )
            self._entries[identity] = failure
            if known.disposition != disposition:
                self._warn(failure)
            return failure
        if isinstance(outcome, UnsupportedVersion):
            reason, detail, version = DecodeReason.UNSUPPORTED_VERSION, "", outcome.version
        else:
            reason, detail, version = outcome.reason, outcome.detail, None
        failure = DecodeFailure(
            key=key,
            reason=reason,
            disposition=disposition,
            message_id=safe_log_id(message_id),
            version=version,
            detail=detail,
            first_seen_epoch_millis=now,
            last_seen_epoch_millis=now,
            occurrences=1,
        )
        self._entries[identity] = failure
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        self._warn(failure)
        self._call_hook(failure)
        return failure

    def summaries(self) -> list[DecodeFailure]:
        """Every remembered failure, oldest first."""
        return list(self._entries.values())

    def _warn(self, failure: DecodeFailure) -> None:
        logger.warning(
            "inbox entry not decoded: key=%s reason=%s detail=%s version=%s disposition=%s "
            "message_id=%s",
            failure.key,
            failure.reason,
            failure.detail or "-",
            failure.version if failure.version is not None else "-",
            failure.disposition,
            failure.message_id,
        )

    def _call_hook(self, failure: DecodeFailure) -> None:
        if self._hook is None:
            return
        try:
            self._hook(failure)
        except Exception as exc:  # noqa: BLE001 - a faulty hook must not stop the consumer
            logger.warning("decode-failure hook raised %s", type(exc).__name__)
