"""The inbox side: the reply inbox named by ``inbox.backend`` (one broker or an ordered list),
and the hand-over of a reloaded broker list and watchdogs to a running AMQP inbox."""

from __future__ import annotations

from collections.abc import Sequence

from fleetd.clock import Clock
from fleetd.config import FleetdConfig
from fleetd.errors import ConfigError
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.failures import DecodeFailureHook
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.port import ReplyInbox
from fleetd.metrics import Metrics

__all__ = ["build_inbox", "inbox_from", "repoint_inbox"]


def build_inbox(
    backend: str,
    amqp_url: str | Sequence[str] | None = None,
    *,
    clock: Clock | None = None,
    on_decode_failure: DecodeFailureHook | None = None,
    connect_timeout: float = 10.0,
    operation_timeout: float = 10.0,
) -> ReplyInbox:
    """The inbox adapter named by ``inbox.backend`` (``memory`` or ``amqp``); ``amqp_url`` is
    one broker URL or the brokers in failover order."""
    if backend == "memory":
        return InMemoryInbox()
    if backend == "amqp":
        if not amqp_url:
            raise ConfigError("inbox.amqp.url", "required when inbox.backend is amqp")
        return AmqpInbox(
            amqp_url,
            clock=clock,
            on_decode_failure=on_decode_failure,
            connect_timeout=connect_timeout,
            operation_timeout=operation_timeout,
        )
    raise ConfigError("inbox.backend", "must be memory or amqp")


def inbox_from(settings: FleetdConfig, *, clock: Clock, metrics: Metrics) -> ReplyInbox:
    """The configured inbox, counting decode failures on ``metrics``."""
    amqp = settings.inbox.amqp
    return build_inbox(
        settings.inbox.backend.value,
        amqp.endpoints,
        clock=clock,
        on_decode_failure=lambda failure: metrics.inbox_decode_failures_total.labels(
            reason=failure.reason.value
        ).inc(),
        connect_timeout=amqp.connect_timeout.total_seconds(),
        operation_timeout=amqp.operation_timeout.total_seconds(),
    )


def repoint_inbox(inbox: ReplyInbox, settings: FleetdConfig) -> None:
    """Hand a reloaded broker list and AMQP watchdogs to a running AMQP inbox (they are hot)."""
    if isinstance(inbox, AmqpInbox):
        amqp = settings.inbox.amqp
        inbox.repoint(
            amqp.endpoints,
            connect_timeout=amqp.connect_timeout.total_seconds(),
            operation_timeout=amqp.operation_timeout.total_seconds(),
        )
