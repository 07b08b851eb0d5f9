"""The journal and sink side: the delivery worker of the human leg, which resolves its receivers
from the live config each pass (the ``dependencies`` view shows them), the receiver list's
generation the human-leg policy re-arms by, and the sink's failure in the bounded words
notification coverage shows."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from fleetd.clock import Clock
from fleetd.config import ConfigRef
from fleetd.errors import ConfigError
from fleetd.journal.port import Journal
from fleetd.metrics import Metrics
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.sink import resolve_sink
from fleetd.notify.sink_status import SinkStatus
from fleetd.notify.worker import SinkWorker
from fleetd.runtime import DependencyView

__all__ = ["receiver_generation", "sink_problem", "webhook_sink"]


def webhook_sink(
    config: ConfigRef,
    *,
    environ: Mapping[str, str],
    clock: Clock,
    journal: Journal,
    metrics: Metrics,
    owner: str,
    settled: Callable[[str], None],
    dependencies: DependencyView,
) -> tuple[SinkWorker, HttpWebhookSender]:
    """The webhook delivery worker over httpx (its target, receivers included, resolved from the
    live config at each pass) and its sender; the ``dependencies`` view shows its receivers."""
    sender = HttpWebhookSender(clock=clock)
    sink = SinkWorker(
        journal=journal,
        target=lambda: resolve_sink(config.current.health.notifications, environ),
        sender=sender,
        clock=clock,
        draw=random.random,
        metrics=metrics,
        owner=owner,
        settled=settled,
    )
    dependencies.webhook = sink.receivers
    return sink, sender


def receiver_generation(config: ConfigRef, environ: Mapping[str, str]) -> str | None:
    """The configured receiver list's generation (``None`` while notifications are off or the
    list cannot be resolved): the human-leg policy re-arms what another list refused."""
    try:
        target = resolve_sink(config.current.health.notifications, environ)
    except ConfigError:
        return None
    return None if target is None else target.generation


def sink_problem(sink: SinkWorker) -> str | None:
    """The webhook sink's failure in bounded words, or None while it works or is off."""
    health = sink.health
    if health.status is SinkStatus.DEGRADED:
        return health.reason.value if health.reason is not None else "failing"
    return None
