"""The outbound adapters the composition root builds from the config, and their hot settings.

:mod:`fleetd.compose` builds fleetd; this module holds the parts of that wiring that face fleetd's
outbound dependencies, so the root stays one readable page:

* :func:`herdr_control` — the herdr socket client, whose connect and request watchdogs are read
  from the live config at each call;
* :func:`build_inbox` / :func:`inbox_from` — the reply inbox named by ``inbox.backend`` (one
  broker or an ordered list), and :func:`repoint_inbox`, which hands a reloaded broker list and
  watchdogs to a running AMQP inbox;
* :func:`model_health` — the model catalog probe and the ``dependencies`` view over it and the
  inbox, with the dependency series registered on the service's metrics;
* :func:`webhook_sink` — the delivery worker of the human webhook, which resolves its receivers
  from the live config each pass, and whose receivers the ``dependencies`` view shows; and
  :func:`sink_problem`, its failure in the bounded words notification coverage shows.

Nothing here runs at import; every function builds what it is asked for and returns it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fleetd.catalog.http import HttpModelCatalog
from fleetd.catalog.port import ModelCatalog
from fleetd.catalog.tracker import ModelHealth
from fleetd.clock import Clock
from fleetd.config import ConfigRef, FleetdConfig
from fleetd.errors import ConfigError
from fleetd.herdr.control import AgentControl, HerdrAgentControl
from fleetd.herdr.discovery import resolve_socket_path
from fleetd.inbox.amqp import AmqpInbox
from fleetd.inbox.failures import DecodeFailureHook
from fleetd.inbox.memory import InMemoryInbox
from fleetd.inbox.port import ReplyInbox
from fleetd.journal.port import Journal
from fleetd.metrics import Metrics
from fleetd.notify.http import HttpWebhookSender
from fleetd.notify.sink import resolve_sink
from fleetd.notify.sink_status import SinkStatus
from fleetd.notify.worker import SinkWorker
from fleetd.runtime import DependencyCollector, DependencyView

__all__ = [
    "build_inbox",
    "herdr_control",
    "inbox_from",
    "model_health",
    "repoint_inbox",
    "sink_problem",
    "webhook_sink",
]


def herdr_control(config: ConfigRef, environ: Mapping[str, str], clock: Clock) -> AgentControl:
    """The herdr socket client; its two watchdogs are read from the live config at each call."""
    path = resolve_socket_path(
        environ=environ,
        home=Path(environ.get("HOME") or Path.home()),
        explicit=config.current.herdr.socket_path,
    )

    def request_limit() -> float:
        return config.current.herdr.request_timeout.total_seconds()

    def connect_limit() -> float:
        return config.current.herdr.connect_timeout.total_seconds()

    return HerdrAgentControl.for_socket(
        path, clock=clock, request_timeout=request_limit, connect_timeout=connect_limit
    )


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


def model_health(
    config: ConfigRef,
    *,
    environ: Mapping[str, str],
    clock: Clock,
    inbox: ReplyInbox,
    metrics: Metrics,
    catalog: ModelCatalog | None = None,
) -> tuple[ModelHealth, DependencyView]:
    """The catalog probe (over httpx unless ``catalog`` is given) and the dependencies view, its
    series registered on ``metrics``."""
    models = ModelHealth(
        catalog=catalog or HttpModelCatalog(clock=clock),
        clock=clock,
        settings=lambda: config.current,
        environ=environ,
    )
    dependencies = DependencyView(inbox=inbox, models=models, clock_now=clock.now)
    metrics.registry.register(DependencyCollector(dependencies))
    return models, dependencies


def webhook_sink(
    config: ConfigRef,
    *,
    environ: Mapping[str, str],
    clock: Clock,
    journal: Journal,
    metrics: Metrics,
    owner: str,
    delivered: Callable[[str], None],
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
        delivered=delivered,
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
